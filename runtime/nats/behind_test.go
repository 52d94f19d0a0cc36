package nats_test

import (
	"sync"
	"testing"

	natsgo "github.com/nats-io/nats.go"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/natstest"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// TestNodeBehindItsPongs: a node heard from while a keep-alive pong is
// late is behind, not gone, and keeps the caller's connection. While
// calls wait, this node answers no ping: each ping makes it answer its
// oldest waiting call instead, as a node would whose pong queues behind
// its answers. The caller's first ping (its calls wait and the node is
// silent) times out after an answer came: the connection stays, and the
// other call is answered at the next ping.
func TestNodeBehindItsPongs(t *testing.T) {
	b := natstest.Start(t)
	raw, err := natsgo.Connect(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	const subject = "behind.node"
	var mu sync.Mutex
	var waiting []*natsgo.Msg
	pings := 0
	_, err = raw.Subscribe(subject, func(m *natsgo.Msg) {
		for _, f := range rawFrames(t, m.Data) {
			mu.Lock()
			switch f.Type {
			case wire.TypeRequest:
				waiting = append(waiting, m)
			case wire.TypePing:
				pings++
				if len(waiting) == 0 { // the dial's ping, no call waiting
					_ = m.Respond(wire.AppendFrame(nil, &wire.Frame{Type: wire.TypePong}))
					break
				}
				r := waiting[0]
				waiting = waiting[1:]
				_ = r.Respond(wire.AppendFrame(nil, &wire.Frame{Type: wire.TypeResponse, Payload: rawFrames(t, r.Data)[0].Payload}))
			}
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Flush(); err != nil {
		t.Fatal(err)
	}
	c, err := newTransport(t, b.URL()).Dial(t.Context(), subject)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var wg sync.WaitGroup
	for _, want := range []string{"one", "two"} {
		wg.Go(func() {
			r, err := c.Call(t.Context(), &runtime.Message{Pattern: "role:echo", Payload: []byte(want)})
			if err != nil || string(r.Payload) != want {
				t.Errorf("call %s: %v, %v", want, r, err)
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if pings < 3 {
		t.Errorf("%d pings (the dial's and the keep-alive's), want 3 or more", pings)
	}
}
