package durable

import (
	"context"
	"strconv"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The headers a dead letter carries besides the event's own.
const (
	// HeaderDeadGroup names the group that gave the event up.
	HeaderDeadGroup = "Wizard-Dead-Group"
	// HeaderDeadStream and HeaderDeadSeq are the event's stream and its
	// sequence in it.
	HeaderDeadStream = "Wizard-Dead-Stream"
	HeaderDeadSeq    = "Wizard-Dead-Seq"
	// HeaderDeadSubject is the subject the event was emitted on.
	HeaderDeadSubject = "Wizard-Dead-Subject"
	// HeaderDeadDeliveries is the deliveries of the event to the group.
	HeaderDeadDeliveries = "Wizard-Dead-Deliveries"
	// HeaderDeadError is the last error: a handler's, or why the event
	// could not be read.
	HeaderDeadError = "Wizard-Dead-Error"
)

// deadLetter publishes the event of msg to the group's dead-letter
// subject, with the headers that say why, then terminates it for the
// group. A dead letter the stream does not acknowledge leaves the event
// to be delivered again. It reports whether the dead letter was sent.
func (g *group) deadLetter(msg jetstream.Msg, md delivery, cause error) bool {
	e := g.e
	seq := md.seq
	dl := &natsgo.Msg{Subject: g.dead, Data: msg.Data(), Header: natsgo.Header{}}
	for k, v := range msg.Headers() {
		if k != natsgo.MsgIdHdr {
			dl.Header[k] = v
		}
	}
	dl.Header[HeaderDeadGroup] = []string{g.name}
	dl.Header[HeaderDeadStream] = []string{e.stream}
	dl.Header[HeaderDeadSeq] = []string{strconv.FormatUint(seq, 10)}
	dl.Header[HeaderDeadSubject] = []string{msg.Subject()}
	dl.Header[HeaderDeadDeliveries] = []string{strconv.FormatUint(md.n, 10)}
	dl.Header[HeaderDeadError] = []string{cause.Error()}
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	// The id makes a second dead letter of the event, sent when the
	// first's Term was lost, a duplicate the stream drops.
	id := "wizard-dead:" + e.stream + ":" + g.token + ":" + strconv.FormatUint(seq, 10)
	if _, err := e.js.PublishMsg(ctx, dl, jetstream.WithMsgID(id)); err != nil {
		e.log.Warn("wizard: durable events: the dead letter was not sent; the event stays", "space", e.space, "group", g.name, "seq", seq, "subject", g.dead, "err", err)
		_ = msg.NakWithDelay(g.cfg.backoff[len(g.cfg.backoff)-1])
		return false
	}
	e.log.Warn("wizard: durable events: an event was dead-lettered", "space", e.space, "group", g.name, "seq", seq, "deliveries", md.n, "subject", g.dead, "err", cause)
	g.count(func(c *counters) { c.deadLettered++ })
	_ = msg.TermWithReason("wizard: dead-lettered to " + g.dead)
	return true
}
