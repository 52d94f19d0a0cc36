package nats

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	natsgo "github.com/nats-io/nats.go"
)

// PermissionError is the broker's refusal, under the permissions of the
// transport's credentials, to let it publish to or subscribe to a
// subject. The broker says so asynchronously: a subscription refused
// fails the Listen, Dial or Discovery Start that made it; a publish
// refused fails the calls waiting on a reply from that subject (they were
// not sent) and is logged. It unwraps to nats.go's error, which matches
// nats.ErrPermissionViolation.
type PermissionError struct {
	Op      string // "publish" or "subscribe"
	Subject string
	err     error
}

// The operations of a [PermissionError].
const (
	opPublish   = "publish"
	opSubscribe = "subscribe"
)

// Error reads "the broker denies permission to <op> to "<subject>"".
func (e *PermissionError) Error() string {
	return fmt.Sprintf("the broker denies permission to %s to %q", e.Op, e.Subject)
}

// Unwrap returns nats.go's error.
func (e *PermissionError) Unwrap() error { return e.err }

// violation matches nats-server's words for a refusal, as nats.go passes
// them on.
var violation = regexp.MustCompile(`Permissions Violation for (Publish|Subscription) to ("(?:[^"\\]|\\.)*")`)

// permissionError returns err as a [PermissionError], or nil when it is
// not the broker's refusal of a publish or a subscription.
func permissionError(err error) *PermissionError {
	if err == nil || !errors.Is(err, natsgo.ErrPermissionViolation) {
		return nil
	}
	m := violation.FindStringSubmatch(err.Error())
	if m == nil {
		return nil
	}
	subject, uerr := strconv.Unquote(m[2])
	if uerr != nil {
		return nil
	}
	op := opPublish
	if m[1] == "Subscription" {
		op = opSubscribe
	}
	return &PermissionError{Op: op, Subject: subject, err: err}
}

// checked flushes the connection and returns the broker's refusal of op
// on subject, if the last error it sent the connection is one and came
// after since (the last error when the publish or subscription was
// made: an earlier refusal, perhaps lifted since, does not count). Once
// the flush returns, the refusal is seen: the broker answers the flush
// after it, and nats.go records it before it reads the answer.
func (b *broker) checked(ctx context.Context, since error, op, subject string) error {
	if err := b.nc.FlushWithContext(ctx); err != nil {
		return err
	}
	last := b.nc.LastError()
	if last == since {
		return nil
	}
	if pe := permissionError(last); pe != nil && pe.Op == op && pe.Subject == subject {
		return pe
	}
	return nil
}

// denied takes a refusal the broker reported: the calls waiting on a
// reply from the subject refused are answered as not sent (none reached
// a node), and the connections to it end, so that their next calls fail
// at once with the refusal; every refusal is logged with its subject.
func (b *broker) denied(pe *PermissionError) {
	b.log.Warn("wizard: nats: the broker denies a permission", "op", pe.Op, "subject", pe.Subject)
	if pe.Op != opPublish {
		return
	}
	b.mu.Lock()
	var mine []*pending
	for id, p := range b.pending {
		if p.conn != nil && p.conn.subject == pe.Subject {
			mine = append(mine, p)
			delete(b.pending, id)
		}
	}
	var conns []*Conn
	for c := range b.conns {
		if c.subject == pe.Subject {
			conns = append(conns, c)
		}
	}
	b.mu.Unlock()
	for _, p := range mine {
		p.ch <- answer{err: notSentError{pe}}
	}
	for _, c := range conns {
		c.fail(pe)
	}
}
