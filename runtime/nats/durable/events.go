package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/wizardmesh/wizard/runtime"
)

// Events is an event space: the events of one JetStream stream, emitted
// and consumed by a node ([New]). Its methods are safe for concurrent use.
type Events struct {
	node    *runtime.Node
	id      string // names this member in the claims of events it runs
	js      jetstream.JetStream
	space   string
	stream  string // the stream's name
	subject string // the prefix of the events' subjects: wizard.event.<space>
	cfg     config
	log     *slog.Logger
	records jetstream.KeyValue
	// subjects are those of the patterns emitted (Emit).
	subjects subjectCache

	mu      sync.Mutex
	groups  map[string]*group
	closing bool
	running sync.WaitGroup // the deliveries being handled
}

// Names the space's stream and its parts derive from.
const (
	streamPrefix  = "wizard_events_"
	bucketPrefix  = "wizard_done_"
	subjectPrefix = "wizard.event."
	deadPrefix    = "wizard.dead."
)

// New opens the event space named space (letters, digits, '-' and '_')
// of node through js: the JetStream stream "wizard_events_<space>", which
// holds the subjects "wizard.event.<space>.>" (the events) and
// "wizard.dead.<space>.>" (the dead letters), and the key-value bucket
// "wizard_done_<space>" of the records of events handled. It makes them
// when they are missing and otherwise checks them: a stream whose storage
// or subjects differ from those asked for is an error naming the field; a
// limit set by an option (replicas, max age, max bytes, duplicate window)
// that differs is updated; a limit left to its default keeps the stream's.
// Every node of a mesh may call New for the same space.
//
// Events run on node as its own subscriptions do: through its handler
// interceptors and its de-duplication table.
func New(ctx context.Context, node *runtime.Node, js jetstream.JetStream, space string, opts ...Option) (*Events, error) {
	if node == nil || js == nil {
		return nil, fmt.Errorf("wizard: durable.New(%q): nil node or JetStream", space)
	}
	if err := checkSpace(space); err != nil {
		return nil, fmt.Errorf("wizard: durable.New(%q): %v", space, err)
	}
	c := config{
		storage:    jetstream.FileStorage,
		replicas:   1,
		duplicates: DefaultDuplicateWindow,
		recordTTL:  DefaultRecordTTL,
		log:        slog.Default(),
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&c); err != nil {
			return nil, fmt.Errorf("wizard: durable.New(%q): %v", space, err)
		}
	}
	e := &Events{
		node: node, js: js, space: space, cfg: c, log: c.log,
		id:      node.ID() + "/" + nuid.Next(),
		stream:  streamPrefix + space,
		subject: subjectPrefix + space,
		groups:  map[string]*group{},
	}
	if err := e.ensureStream(ctx); err != nil {
		return nil, err
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      bucketPrefix + space,
		Description: "wizard: the events of space " + space + " that a group handled",
		TTL:         c.recordTTL,
		Storage:     c.storage,
		Replicas:    c.replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("wizard: event space %q: the records' bucket %s: %w", space, bucketPrefix+space, err)
	}
	e.records = kv
	return e, nil
}

// Space returns the event space's name.
func (e *Events) Space() string { return e.space }

// Stream returns the name of the space's JetStream stream.
func (e *Events) Stream() string { return e.stream }

// ensureStream makes the space's stream, or checks and updates the one
// there is.
func (e *Events) ensureStream(ctx context.Context) error {
	want := jetstream.StreamConfig{
		Name:        e.stream,
		Description: "wizard: the events of space " + e.space,
		Subjects:    []string{e.subject + ".>", deadPrefix + e.space + ".>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     e.cfg.storage,
		Replicas:    e.cfg.replicas,
		MaxAge:      e.cfg.maxAge,
		MaxBytes:    -1,
		Duplicates:  e.cfg.duplicates,
	}
	if e.cfg.maxBytes > 0 {
		want.MaxBytes = e.cfg.maxBytes
	}
	for range 2 {
		s, err := e.js.Stream(ctx, e.stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			_, err = e.js.CreateStream(ctx, want)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				continue // another node made it meanwhile: check it
			}
			if err != nil {
				return fmt.Errorf("wizard: event space %q: creating stream %s: %w", e.space, e.stream, err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("wizard: event space %q: stream %s: %w", e.space, e.stream, err)
		}
		return e.reconcile(ctx, s.CachedInfo().Config, want)
	}
	return fmt.Errorf("wizard: event space %q: stream %s is made and deleted by others meanwhile", e.space, e.stream)
}

// reconcile checks the stream's config have against want: what cannot
// change is an error naming the field; the limits set by options that
// differ are updated.
func (e *Events) reconcile(ctx context.Context, have, want jetstream.StreamConfig) error {
	conflict := func(field string, h, w any) error {
		return fmt.Errorf("wizard: event space %q: stream %s exists with %s %v; this node asks for %v", e.space, e.stream, field, h, w)
	}
	for _, s := range want.Subjects {
		if !slices.Contains(have.Subjects, s) {
			return conflict("Subjects", have.Subjects, want.Subjects)
		}
	}
	if have.Retention != want.Retention {
		return conflict("Retention", have.Retention, want.Retention)
	}
	if e.cfg.set&setStorage != 0 && have.Storage != want.Storage {
		return conflict("Storage", have.Storage, want.Storage)
	}
	next, update := have, false
	if e.cfg.set&setReplicas != 0 && have.Replicas != want.Replicas {
		next.Replicas, update = want.Replicas, true
	}
	if e.cfg.set&setMaxAge != 0 && have.MaxAge != want.MaxAge {
		next.MaxAge, update = want.MaxAge, true
	}
	if e.cfg.set&setMaxBytes != 0 && have.MaxBytes != want.MaxBytes {
		next.MaxBytes, update = want.MaxBytes, true
	}
	if e.cfg.set&setDuplicates != 0 && have.Duplicates != want.Duplicates {
		next.Duplicates, update = want.Duplicates, true
	}
	if !update {
		return nil
	}
	if _, err := e.js.UpdateStream(ctx, next); err != nil {
		return fmt.Errorf("wizard: event space %q: updating stream %s: %w", e.space, e.stream, err)
	}
	return nil
}

// Close stops the space's consumers on this node and waits for the
// handlers running to finish and their events to be acked; events
// delivered to it and not yet started are handed back (Nak) for other
// members. It does not close the node or the NATS connection. Close is
// idempotent.
func (e *Events) Close() error {
	e.mu.Lock()
	if e.closing {
		e.mu.Unlock()
		e.running.Wait()
		return nil
	}
	e.closing = true
	groups := make([]*group, 0, len(e.groups))
	for _, g := range e.groups {
		groups = append(groups, g)
	}
	e.mu.Unlock()
	for _, g := range groups {
		g.cc.Stop()
	}
	e.running.Wait()
	for _, g := range groups {
		close(g.quit) // the workers, idle now
	}
	return nil
}

// checkSpace reports what is wrong with an event space's name.
func checkSpace(s string) error {
	switch {
	case s == "":
		return errors.New("the event space's name is empty")
	case len(s) > 64:
		return fmt.Errorf("the event space's name is %d bytes, more than 64", len(s))
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("the event space's name holds %q; want letters, digits, '-' and '_'", r)
		}
	}
	return nil
}
