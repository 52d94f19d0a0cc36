package durable

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The records, in the space's bucket, one per group and event under the
// key "<group>.<seq>": a member claims an event before it runs its
// handlers ("run <member>", renewed with the event's InProgress), and
// marks it "done" after they finished without error, before it acks it;
// it deletes its claim when they failed. A delivery of an event that is
// done (its ack was lost: the member crashed, the connection or the
// broker went away) is acked without running; one that another member
// claimed and keeps renewing is handed back for later. A claim not
// renewed for staleClaims ack waits is taken over. The bucket's TTL
// (WithRecordTTL) bounds them.

const (
	// recordTimeout bounds one operation on a record, or a third of the
	// ack wait if less (see opTimeout).
	recordTimeout = 5 * time.Second
	// recordTrying bounds the time a record is tried for (the broker
	// restarting, say), and recordRetryWait is the wait between tries.
	recordTrying    = 30 * time.Second
	recordRetryWait = 50 * time.Millisecond
	// staleClaims is the ack waits after which a claim not renewed is
	// another member's to take: its claimant renews it every third of
	// one, so it is gone, or cut off from the broker that long.
	staleClaims = 2
)

var (
	valueDone   = []byte("done")
	claimPrefix = "run "
)

// claimState is what a member found of an event's record.
type claimState uint8

const (
	claimed claimState = iota // this member holds the claim: run it
	done                      // the group handled it: ack it
	busy                      // another member runs it: later
)

// opTimeout bounds one operation on a record: an answer lost with the
// broker that went away is given up soon enough for the claim to be
// renewed, or marked done, on the broker that took over, before another
// member takes the claim for stale.
func (g *group) opTimeout() time.Duration {
	return min(recordTimeout, g.cfg.ackWait/3)
}

// recordKey is the key of g's record of seq.
func (g *group) recordKey(seq uint64) string {
	return g.token + "." + strconv.FormatUint(seq, 10)
}

// claim claims seq for this member, or says why not; rev is the claim's
// revision, to renew and release it by.
func (g *group) claim(seq uint64) (st claimState, rev uint64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), g.opTimeout())
	defer cancel()
	key, mine := g.recordKey(seq), []byte(claimPrefix+g.e.id)
	rev, err = g.e.records.Create(ctx, key, mine)
	if err == nil {
		return claimed, rev, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return busy, 0, err
	}
	ent, err := g.e.records.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return busy, 0, nil // released meanwhile: the next delivery claims it
	}
	if err != nil {
		return busy, 0, err
	}
	v := string(ent.Value())
	switch {
	case v == string(valueDone):
		return done, 0, nil
	case !strings.HasPrefix(v, claimPrefix):
		return busy, 0, errors.New("record " + key + " holds " + strconv.Quote(v))
	case v != string(mine) && time.Since(ent.Created()) < staleClaims*g.cfg.ackWait:
		return busy, 0, nil
	}
	// This member's own claim, left by a run that ended without an
	// outcome written, or another's gone stale: taken over.
	rev, err = g.e.records.Update(ctx, key, mine, ent.Revision())
	if err != nil {
		return busy, 0, err
	}
	return claimed, rev, nil
}

// renew renews this member's claim of seq at revision rev and returns
// its new revision, or rev when it could not (another member took it
// over, or the broker is away: the next renewal tries again).
func (g *group) renew(seq, rev uint64) uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), g.opTimeout())
	defer cancel()
	next, err := g.e.records.Update(ctx, g.recordKey(seq), []byte(claimPrefix+g.e.id), rev)
	if err != nil {
		return rev
	}
	return next
}

// release deletes this member's claim of seq at revision rev, so that a
// redelivery anywhere runs the event at once. A claim not deleted goes
// stale.
func (g *group) release(seq, rev uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), g.opTimeout())
	defer cancel()
	_ = g.e.records.Delete(ctx, g.recordKey(seq), jetstream.LastRevision(rev))
}

// markDone writes that g handled seq, trying again while the broker does
// not answer, and reports whether it is written.
func (g *group) markDone(seq uint64) bool {
	deadline := time.Now().Add(recordTrying)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), g.opTimeout())
		_, err := g.e.records.Put(ctx, g.recordKey(seq), valueDone)
		cancel()
		if err == nil {
			return true
		}
		if time.Now().Add(recordRetryWait).After(deadline) {
			g.e.log.Warn("wizard: durable events: the record of an event handled was not written; it is left to its redelivery", "space", g.e.space, "group", g.name, "seq", seq, "err", err)
			return false
		}
		_ = sleep(context.Background(), recordRetryWait)
	}
}
