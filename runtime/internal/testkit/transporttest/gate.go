package transporttest

import (
	"sync"
	"testing"
)

// Gate is a channel that blocked handlers wait on. It opens by
// [Gate.Open] or, at the latest, when the test ends (before its nodes
// close, so that a failing test does not hang in Close).
type Gate struct {
	ch   chan struct{}
	once sync.Once
}

// NewGate returns a closed gate that opens when t ends.
func NewGate(t testing.TB) *Gate {
	g := &Gate{ch: make(chan struct{})}
	t.Cleanup(g.Open)
	return g
}

// Open opens the gate; it is idempotent.
func (g *Gate) Open() { g.once.Do(func() { close(g.ch) }) }

// C returns the channel that is closed when the gate opens.
func (g *Gate) C() <-chan struct{} { return g.ch }
