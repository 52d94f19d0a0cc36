package durable

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The records: after a group's handlers finished an event without error
// and before the event is acked, the key "<group>.<seq>" is put in the
// space's bucket; a delivery of the event again (its ack was lost: the
// member crashed, the connection or the broker went away) finds it and is
// acked without running. The bucket's TTL (WithRecordTTL) bounds them.

const (
	// recordTimeout bounds one put or get of a record.
	recordTimeout = 5 * time.Second
	// recordTrying bounds the time a record is tried for (the broker
	// restarting, say), and recordRetryWait is the first wait between
	// tries, doubled up to a second.
	recordTrying    = 30 * time.Second
	recordRetryWait = 100 * time.Millisecond
)

// recordKey is the key of the record that g handled seq.
func (g *group) recordKey(seq uint64) string {
	return g.token + "." + strconv.FormatUint(seq, 10)
}

// record writes the record that g handled seq, trying again while the
// broker does not answer, and reports whether it is written.
func (g *group) record(seq uint64) bool {
	deadline := time.Now().Add(recordTrying)
	wait := recordRetryWait
	for {
		ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
		_, err := g.e.records.Put(ctx, g.recordKey(seq), []byte{'1'})
		cancel()
		if err == nil {
			return true
		}
		if time.Now().Add(wait).After(deadline) {
			g.e.log.Warn("wizard: durable events: the record of an event handled was not written; it is left to its redelivery", "space", g.e.space, "group", g.name, "seq", seq, "err", err)
			return false
		}
		_ = sleep(context.Background(), wait)
		wait = min(2*wait, time.Second)
	}
}

// recorded reports whether the record that g handled seq exists, or the
// error that keeps it from knowing.
func (g *group) recorded(seq uint64) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	_, err := g.e.records.Get(ctx, g.recordKey(seq))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	}
	g.e.log.Debug("wizard: durable events: the record of an event could not be read", "space", g.e.space, "group", g.name, "seq", seq, "err", err)
	return false, err
}
