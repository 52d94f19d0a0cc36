package durable

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of the options.
const (
	// DefaultMaxDeliveries is the deliveries of an event to a group after
	// which a handler's failure sends it to the dead-letter subject.
	DefaultMaxDeliveries = 5
	// DefaultAckWait is how long JetStream waits for a member's ack before
	// it delivers the event again; a running handler keeps it from
	// expiring (InProgress).
	DefaultAckWait = 30 * time.Second
	// DefaultConcurrency is the handlers a member runs at once per group.
	DefaultConcurrency = 16
	// DefaultRecordTTL is how long the record that a group handled an
	// event is kept.
	DefaultRecordTTL = 24 * time.Hour
	// DefaultDuplicateWindow is how long the stream remembers a
	// Nats-Msg-Id to drop a second publication of it.
	DefaultDuplicateWindow = 2 * time.Minute
)

// DefaultBackoff is the delays before an event whose handler failed is
// delivered again: the first after the first failure, and so on, the last
// repeated.
var DefaultBackoff = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second}

// Option configures an event space in [New].
type Option interface{ apply(*config) error }

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// The fields of the stream an Option set explicitly: only those are
// compared with (and updated in) a stream that exists already.
const (
	setStorage = 1 << iota
	setReplicas
	setMaxAge
	setMaxBytes
	setDuplicates
)

type config struct {
	set        int
	storage    jetstream.StorageType
	replicas   int
	maxAge     time.Duration
	maxBytes   int64
	duplicates time.Duration
	recordTTL  time.Duration
	log        *slog.Logger
}

// WithStorage keeps the space's events on disk (jetstream.FileStorage,
// the default) or in memory (jetstream.MemoryStorage, lost when the
// broker stops).
func WithStorage(s jetstream.StorageType) Option {
	return optionFunc(func(c *config) error {
		if s != jetstream.FileStorage && s != jetstream.MemoryStorage {
			return fmt.Errorf("WithStorage(%d): want jetstream.FileStorage or jetstream.MemoryStorage", s)
		}
		c.storage, c.set = s, c.set|setStorage
		return nil
	})
}

// WithReplicas keeps n copies of the space's stream (and of its records)
// on the servers of a JetStream cluster: 1 by default; 3 survives the loss
// of one server. [New] fails unless 1 <= n <= 5.
func WithReplicas(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 || n > 5 {
			return fmt.Errorf("WithReplicas(%d): want 1 to 5", n)
		}
		c.replicas, c.set = n, c.set|setReplicas
		return nil
	})
}

// WithMaxAge drops events older than d from the stream (by default none
// is dropped for its age). [New] fails when d is negative.
func WithMaxAge(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return fmt.Errorf("WithMaxAge(%v): negative", d)
		}
		c.maxAge, c.set = d, c.set|setMaxAge
		return nil
	})
}

// WithMaxBytes drops the oldest events when the stream holds more than n
// bytes (by default it grows within the account's limits). [New] fails
// when n is not positive.
func WithMaxBytes(n int64) Option {
	return optionFunc(func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("WithMaxBytes(%d): want a positive size", n)
		}
		c.maxBytes, c.set = n, c.set|setMaxBytes
		return nil
	})
}

// WithDuplicateWindow is how long the stream remembers an event's
// Nats-Msg-Id, dropping a second publication of it within that time
// ([DefaultDuplicateWindow]). [New] fails when d is not positive.
func WithDuplicateWindow(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("WithDuplicateWindow(%v): want a positive duration", d)
		}
		c.duplicates, c.set = d, c.set|setDuplicates
		return nil
	})
}

// WithRecordTTL is how long the record that a group handled an event is
// kept ([DefaultRecordTTL]): a delivery of the event after that runs its
// handlers again. It should outlast the longest time an event can wait
// for its ack: the redeliveries' backoff and a broker's downtime. [New]
// fails when d is shorter than a second.
func WithRecordTTL(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < time.Second {
			return fmt.Errorf("WithRecordTTL(%v): want a second or more", d)
		}
		c.recordTTL = d
		return nil
	})
}

// WithLogger logs through l (by default slog.Default(), Warn and above):
// events dead-lettered, records and acks that failed.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			return errors.New("WithLogger(nil): leave the option out for slog.Default()")
		}
		c.log = l
		return nil
	})
}

// EmitOption configures one [Events.Emit].
type EmitOption interface{ applyEmit(*emitConfig) }

type emitOptionFunc func(*emitConfig)

func (f emitOptionFunc) applyEmit(c *emitConfig) { f(c) }

type emitConfig struct {
	msgID string
}

// MsgID publishes the event with id as its Nats-Msg-Id: the stream keeps
// one event per id within its duplicate window ([WithDuplicateWindow]),
// so an emitter that retries after a crash with the same id publishes it
// once. Without it every Emit makes an id of its own, kept across its own
// retries.
func MsgID(id string) EmitOption {
	return emitOptionFunc(func(c *emitConfig) { c.msgID = id })
}

// SubscribeOption configures a group's consumer in [Events.Subscribe].
// The options of a group's first Subscribe on an [Events] apply to the
// group there; the start options apply only when the group's consumer is
// made, by the first member of a new group.
type SubscribeOption interface{ applySub(*subConfig) error }

type subOptionFunc func(*subConfig) error

func (f subOptionFunc) applySub(c *subConfig) error { return f(c) }

type subConfig struct {
	maxDeliveries int
	backoff       []time.Duration
	ackWait       time.Duration
	concurrency   int
	deadLetter    string
	deliver       jetstream.DeliverPolicy
	startSeq      uint64
	startTime     *time.Time
	atLeastOnce   bool
}

// MaxDeliveries is the delivery of an event to the group on which a
// handler's failure sends it to the dead-letter subject instead of
// delivering it again ([DefaultMaxDeliveries]). A delivery that a node
// refused (closing, overloaded) or that ended without an outcome (its
// member crashed) never dead-letters: the next delivery runs the
// handlers. Subscribe fails when n < 1.
func MaxDeliveries(n int) SubscribeOption {
	return subOptionFunc(func(c *subConfig) error {
		if n < 1 {
			return fmt.Errorf("MaxDeliveries(%d): want 1 or more", n)
		}
		c.maxDeliveries = n
		return nil
	})
}

// Backoff is the delays before an event whose handler failed is delivered
// again, by failure, the last repeated ([DefaultBackoff]). Subscribe
// fails on no delay or a negative one.
func Backoff(delays ...time.Duration) SubscribeOption {
	return subOptionFunc(func(c *subConfig) error {
		if len(delays) == 0 {
			return errors.New("Backoff(): no delay; leave the option out for the default")
		}
		for _, d := range delays {
			if d < 0 {
				return fmt.Errorf("Backoff(%v): negative delay", delays)
			}
		}
		c.backoff = delays
		return nil
	})
}

// AckWait is how long JetStream waits for a member's ack before it
// delivers an event again ([DefaultAckWait]): how soon the events a
// crashed member held go to another. A running handler renews it every
// third of it. Subscribe fails when d is under 100ms.
func AckWait(d time.Duration) SubscribeOption {
	return subOptionFunc(func(c *subConfig) error {
		if d < 100*time.Millisecond {
			return fmt.Errorf("AckWait(%v): want 100ms or more", d)
		}
		c.ackWait = d
		return nil
	})
}

// Concurrency is the handlers of the group this member runs at once
// ([DefaultConcurrency]). The member takes up to 4n deliveries,
// claiming and recording some while others run (the waiting ones are
// kept alive as running ones are). Subscribe fails when n < 1.
func Concurrency(n int) SubscribeOption {
	return subOptionFunc(func(c *subConfig) error {
		if n < 1 {
			return fmt.Errorf("Concurrency(%d): want 1 or more", n)
		}
		c.concurrency = n
		return nil
	})
}

// DeadLetter sends the group's dead events to subject instead of
// "wizard.dead.<space>.<group>" (which the space's stream keeps). A
// stream must capture subject: a dead letter that no stream acknowledges
// is not sent, and its event is delivered again.
func DeadLetter(subject string) SubscribeOption {
	return subOptionFunc(func(c *subConfig) error {
		if err := checkSubject(subject); err != nil {
			return fmt.Errorf("DeadLetter(%q): %v", subject, err)
		}
		c.deadLetter = subject
		return nil
	})
}

// AtLeastOnce runs the group's events at least once instead of once: for
// handlers that are idempotent or tolerate a rare repeat. A member runs
// an event and acks it after its handlers returned without error, as by
// default, but writes no record in the space's bucket: no claim before
// the handlers and no "done" before the ack, two writes (and two round
// trips) to the broker fewer per event.
//
// What it keeps: no event is lost (one is acked only after its handlers
// succeeded); failures, [Backoff], [MaxDeliveries] and dead letters are
// the default's; a copy of an event delivered to the node that runs it,
// or ran it within the de-duplication table's window, runs once there
// (runtime.WithDedup; a node without WithListen has no table).
//
// What it gives up: an event whose ack is lost runs again when it is
// delivered to another member (its member crashed or was cut off before
// the ack reached the broker), or to any member after a broker killed
// outright comes back (nats-server writes acks to disk after a delay),
// or to the same node after the table's window. All the members of a
// group should subscribe with the same mode: a default member does not
// see the events an AtLeastOnce member ran, and runs their redeliveries.
func AtLeastOnce() SubscribeOption {
	return subOptionFunc(func(c *subConfig) error {
		c.atLeastOnce = true
		return nil
	})
}

// StartAll starts a new group at the space's first event.
func StartAll() SubscribeOption {
	return subOptionFunc(func(c *subConfig) error {
		c.deliver = jetstream.DeliverAllPolicy
		return nil
	})
}

// StartSeq starts a new group at the event with stream sequence seq.
func StartSeq(seq uint64) SubscribeOption {
	return subOptionFunc(func(c *subConfig) error {
		if seq == 0 {
			return errors.New("StartSeq(0): sequences start at 1; use StartAll")
		}
		c.deliver, c.startSeq = jetstream.DeliverByStartSequencePolicy, seq
		return nil
	})
}

// StartTime starts a new group at the first event stored at t or later.
func StartTime(t time.Time) SubscribeOption {
	return subOptionFunc(func(c *subConfig) error {
		if t.IsZero() {
			return errors.New("StartTime(zero time)")
		}
		c.deliver, c.startTime = jetstream.DeliverByStartTimePolicy, &t
		return nil
	})
}
