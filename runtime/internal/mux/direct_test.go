package mux

import (
	"bufio"
	"bytes"
	"testing"
	"testing/synctest"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// TestBatchAnswersOneWrite: the answers of requests read together and
// served inline leave in one write, the reader's own when the writer is
// idle (direct.go): over a pipe, one read of the client's end takes them
// all.
func TestBatchAnswersOneWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _, _ := pipeServer(t, echo, Options{})
		if n := r.br.Buffered(); n != 0 {
			t.Fatalf("%d bytes buffered past the handshake", n)
		}
		const n = 8
		r.sendAll(requests(n)...)
		buf := make([]byte, 64<<10)
		k, err := r.conn.Read(buf) // one write of the server's
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(bytes.NewReader(buf[:k]))
		for i := range n {
			var f wire.Frame
			if _, err := wire.ReadFrame(br, 0, &f, nil); err != nil {
				t.Fatalf("answer %d of %d not in the first write: %v", i+1, n, err)
			}
			if f.Type != wire.TypeResponse || f.ID != uint64(i+1) {
				t.Fatalf("frame %d: %v %d, want the response to %d", i+1, f.Type, f.ID, i+1)
			}
		}
		if br.Buffered() != 0 {
			t.Errorf("%d bytes more than the %d answers in the write", br.Buffered(), n)
		}
	})
}
