package harness

import (
	"bufio"
	"io"
	"strings"
	"testing"
	"time"
)

// TestServeControl drives a server in this process through its control
// protocol: the address first, then one answer per query, and EOF on its
// input stops it.
func TestServeControl(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- serve(ServerSpec{Contender: floorName, Role: RoleSleep, Listen: "127.0.0.1:0", Delay: time.Millisecond}, inR, outW)
		outW.Close()
	}()
	out := bufio.NewReader(outR)
	line := func() string {
		t.Helper()
		s, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the server's output: %v", err)
		}
		return strings.TrimSpace(s)
	}
	query := func(q string) string {
		t.Helper()
		if _, err := io.WriteString(inW, q+"\n"); err != nil {
			t.Fatal(err)
		}
		return line()
	}

	addr := line()
	c, err := floorContender.Dial(t.Context(), addr, DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 3 {
		if r, err := c.Call(t.Context(), 1, float64(i)); err != nil || r != 1+float64(i) {
			t.Fatalf("call %d: %v, %v", i, r, err)
		}
	}

	tests := []struct{ query, want string }{
		{queryServed, answerServed + "3"},
		{"what", "unknown query what"},
		{" " + queryServed + " ", answerServed + "3"},
		{queryMem, answerMem + "{"}, // a prefix: the figures vary
	}
	for _, tt := range tests {
		if got := query(tt.query); got != tt.want && !(strings.HasSuffix(tt.want, "{") && strings.HasPrefix(got, tt.want)) {
			t.Errorf("query %q: answered %q, want %q", tt.query, got, tt.want)
		}
	}

	inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop when its input closed")
	}
}
