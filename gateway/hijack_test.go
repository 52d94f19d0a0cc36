package gateway

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestFrameWithTheUpgrade: a client that sends its first frame in the
// same write as the upgrade request (net/http reads the frame's bytes
// ahead, into the buffer the hijack replaces) is answered. Before the
// hijack kept those bytes, the frame was lost and the next one misread.
func TestFrameWithTheUpgrade(t *testing.T) {
	tg := newTestGateway(t, settings{})
	c, err := net.Dial("tcp", strings.TrimPrefix(tg.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(guard))
	var out bytes.Buffer
	out.WriteString("GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
	for _, id := range []string{"1", "2"} {
		out.Write(clientFrame(`{"type":"req","id":"` + id + `","method":"POST","path":"/echo","body":{"n":` + id + `}}`))
	}
	if _, err := c.Write(out.Bytes()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade answered %s", res.Status)
	}
	seen := map[string]bool{}
	for range 2 { // the two are in flight at once: either reply comes first
		reply := serverFrame(t, br)
		for _, id := range []string{"1", "2"} {
			if strings.Contains(reply, `"id":"`+id+`"`) && strings.Contains(reply, `"status":200`) && strings.Contains(reply, `"n":`+id) {
				seen[id] = true
			}
		}
	}
	if !seen["1"] || !seen["2"] {
		t.Errorf("replies to frames 1 and 2: got %v", seen)
	}
}

// clientFrame is a masked text frame of payload (shorter than 126 bytes).
func clientFrame(payload string) []byte {
	key := [4]byte{1, 2, 3, 4}
	b := []byte{0x81, 0x80 | byte(len(payload))}
	b = append(b, key[:]...)
	for i := range len(payload) {
		b = append(b, payload[i]^key[i%4])
	}
	return b
}

// serverFrame reads one unmasked text frame (shorter than 64 KiB).
func serverFrame(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	var h [2]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		t.Fatal(err)
	}
	n := int(h[1] & 0x7f)
	if n == 126 {
		var l [2]byte
		if _, err := io.ReadFull(br, l[:]); err != nil {
			t.Fatal(err)
		}
		n = int(l[0])<<8 | int(l[1])
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(br, p); err != nil {
		t.Fatal(err)
	}
	if h[0] != 0x81 {
		t.Fatalf("frame header %#x, want a final text frame: %q", h[0], p)
	}
	return string(p)
}
