package runtime

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/wizardmesh/wizard/runtime/introspect"
)

// Health is a node's serving state, as [Node.Health] and [introspect.HealthPattern]
// tell it.
type Health uint32

// The serving states.
const (
	// HealthNotServing: the node is starting (listening, but its
	// discovery not started yet) or has shut down.
	HealthNotServing Health = iota
	// HealthServing: the node is started and serves calls.
	HealthServing
	// HealthDraining: the node's Shutdown (or Close) has begun; it takes no
	// new remote calls once its listener has said goaway, and finishes those
	// in flight.
	HealthDraining
)

var healthNames = [...]string{"not_serving", "serving", "draining"}

// String returns the state's name: "not_serving", "serving" or
// "draining".
func (h Health) String() string {
	if int(h) < len(healthNames) {
		return healthNames[h]
	}
	return fmt.Sprintf("health_%d", uint32(h))
}

// MarshalText encodes h as its name.
func (h Health) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText decodes a name that [Health.String] returns.
func (h *Health) UnmarshalText(b []byte) error {
	for i, name := range healthNames {
		if string(b) == name {
			*h = Health(i)
			return nil
		}
	}
	return fmt.Errorf("wizard: unknown health status %q", b)
}

// Health returns the node's serving state: [HealthServing] once [New] has
// returned it (its listener accepting and its discovery started), and
// [HealthDraining] from the moment [Node.Shutdown] or [Node.Close] begins
// until it returns, then [HealthNotServing].
func (n *Node) Health() Health { return Health(n.health.Load()) }

// Ready reports whether the node serves: true once it is started (its
// listener accepting, its discovery started: [New] has returned), false
// as soon as [Node.Shutdown] or [Node.Close] begins. Ready says nothing of
// the peers the node calls: it does not wait for discovery to find them
// ([Node.WaitFor] does).
func (n *Node) Ready() bool { return n.Health() == HealthServing }

// healthReport is the answer on [introspect.HealthPattern].
type healthReport struct {
	Status Health `json:"status"`
}

// healthReply answers a call on [introspect.HealthPattern].
func (n *Node) healthReply() *Message {
	b, err := json.Marshal(healthReport{Status: n.Health()})
	if err != nil {
		return errorReply(err)
	}
	return &Message{Codec: CodecJSON, Payload: b}
}

// CheckHealth asks the node at the other end of c for its serving state
// through [introspect.HealthPattern]: what probes, peers and tools call. A node that
// cannot be reached, or has already said goaway, answers nothing: the
// error is the transport's (one that matches [ErrNotSent] after a goaway),
// and the state returned is [HealthNotServing].
func CheckHealth(ctx context.Context, c Conn) (Health, error) {
	reply, err := c.Call(ctx, &Message{Pattern: introspect.HealthPattern})
	if err != nil {
		return HealthNotServing, err
	}
	if reply == nil {
		return HealthNotServing, Errorf(CodeInternal, "wizard: health check: no reply")
	}
	if reply.Code != CodeOK {
		return HealthNotServing, &Error{Code: reply.Code, Message: reply.Error}
	}
	var r healthReport
	if err := json.Unmarshal(reply.Payload, &r); err != nil {
		return HealthNotServing, Errorf(CodeInternal, "wizard: health check: bad answer: %v", err)
	}
	return r.Status, nil
}
