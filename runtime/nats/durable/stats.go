package durable

import (
	"cmp"
	"context"
	"fmt"
)

// GroupStats are a group's figures: the group's lag, from JetStream, and
// what this [Events] counted of the deliveries it handled.
type GroupStats struct {
	// Pending is the group's lag: the events not yet delivered to it
	// (NumPending) and those delivered and not yet acked (NumAckPending),
	// on all its members.
	Pending uint64
	// AckPending is the second part of Pending.
	AckPending uint64
	// ConsumerDelivered is the deliveries JetStream made to the group,
	// redeliveries included, on all its members.
	ConsumerDelivered uint64
	// Delivered is the deliveries this Events took for the group;
	// Redelivered those of them that were not an event's first.
	Delivered, Redelivered uint64
	// Handled is the events whose handlers ran here without error;
	// Skipped the deliveries acked or settled without running, found
	// handled already (a record, or a run going on here); Failed the
	// deliveries on which a handler failed; Refused those the node did
	// not run (closing, overloaded); DeadLettered the events sent to the
	// dead-letter subject from here.
	Handled, Skipped, Failed, Refused, DeadLettered uint64
}

// Stats returns the figures of group ("" for the node's service): its
// lag from JetStream, which any node can ask, and this Events' counts of
// it (zero where it has no member here).
func (e *Events) Stats(ctx context.Context, group string) (GroupStats, error) {
	group = cmp.Or(group, e.node.Service())
	info, err := e.js.Consumer(ctx, e.stream, tokenOf(group))
	if err != nil {
		return GroupStats{}, fmt.Errorf("wizard: event space %q: Stats(%q): %w", e.space, group, err)
	}
	ci := info.CachedInfo()
	st := GroupStats{
		Pending:           ci.NumPending + uint64(ci.NumAckPending),
		AckPending:        uint64(ci.NumAckPending),
		ConsumerDelivered: ci.Delivered.Consumer,
	}
	e.mu.Lock()
	g := e.groups[group]
	e.mu.Unlock()
	if g != nil {
		g.mu.Lock()
		c := g.stats
		g.mu.Unlock()
		st.Delivered, st.Redelivered = c.delivered, c.redelivered
		st.Handled, st.Skipped, st.Failed = c.handled, c.skipped, c.failed
		st.Refused, st.DeadLettered = c.refused, c.deadLettered
	}
	return st, nil
}
