// Package durable carries a node's events through NATS JetStream, so that
// they outlive the emitter, the members of a group and the broker: an
// event is stored before Emit returns, and every group whose
// subscriptions match it handles it, once, whenever a member of the group
// is up.
//
//	nc, err := natsgo.Connect("nats://10.0.0.7:4222")
//	js, err := jetstream.New(nc)
//	events, err := durable.New(ctx, node, js, "orders", durable.WithReplicas(3))
//	err = events.Subscribe(ctx, "role:order,event:placed", "billing", bill)
//	receipt, err := events.Emit(ctx, "role:order,event:placed", order)
//
// # Spaces and groups
//
// An event space is a JetStream stream, "wizard_events_<space>", holding
// the subjects "wizard.event.<space>.>" (the events: see [Events.Emit]
// for the subject of each) and "wizard.dead.<space>.>" (the dead
// letters). A group is a durable consumer of it, named after the group,
// shared by the group's members on every node: JetStream hands each
// event to one of them. A new group starts with the events emitted after
// it is made, or from the first event, a time or a sequence
// ([StartAll], [StartTime], [StartSeq]).
//
// Events are matched as over the mesh ([runtime.Node.Emit]): every
// subscription of the group whose pattern's pairs are all in the event's
// (the emitted pattern and a map message's root scalar fields) runs, on
// the member the event went to, through the node's handler interceptors.
// Unlike over the mesh, Emit does not know or wait for the groups: an
// event is stored whether or not a group wants it, and a group that
// comes later (with [StartAll]) gets it; Emit returns once the stream has
// it, and handlers' errors are never the emitter's.
//
// # Once per group
//
// A member acks an event after its handlers returned without error. On
// the way, three records keep a handler from running twice:
//
//   - the stream drops a second publication of an event with the same
//     Nats-Msg-Id within its duplicate window ([WithDuplicateWindow]):
//     Emit's own retries, or an emitter's with [MsgID];
//   - the space's key-value bucket "wizard_done_<space>" holds, for each
//     group and event, the member that claimed it before running its
//     handlers (renewed while they run), then "done" before the ack. A
//     delivery of an event that is done is acked without running; one
//     that another member claimed is handed back for later; a claim not
//     renewed for two ack waits ([AckWait]) is taken over;
//   - the node's de-duplication table runs an event once per (stream,
//     group, sequence) on that node: a copy delivered while it runs waits
//     for it, one delivered after gets its outcome (see runtime.WithDedup;
//     a node without WithListen has no table, and relies on the other
//     two).
//
// What remains: a member that crashes (or loses the broker for longer
// than the record's tries) after its handlers returned and before "done"
// is written leaves a claim that goes stale, and the member that takes it
// over runs the handlers again. Nothing outside the handler can close
// that window: the handler's effect and the record are two writes to two
// systems, and a crash between them is indistinguishable, from outside,
// from a crash before the effect. A handler that must not run twice
// writes its effect and a key of the event (the stream sequence: not
// exposed yet; the event's own id) in one transaction of its own store.
// A member cut off from the broker for more than two ack waits while its
// handler runs may see its claim taken over too: choose an ack wait above
// the broker's failover time.
//
// # At least once
//
// A group whose handlers are idempotent, or tolerate a rare repeat,
// subscribes with [AtLeastOnce]: no claim, no "done" record, so two
// writes to the broker (and two round trips) fewer per event. An event
// is still acked only after its handlers returned without error, so none
// is lost, and the node's de-duplication table still runs a copy
// delivered to the node that runs or ran it once. What it gives up: an
// event whose ack was lost runs again on the member it is delivered to
// next (its member crashed, or was cut off, before the broker had the
// ack; a broker killed outright forgets acks it had not yet written).
//
// # Flow
//
// A member runs at most [Concurrency] handlers of a group at once, and
// takes up to four times as many deliveries: the claims and records of
// some events are written while others' handlers run, and the consumer
// pulls events in batches of that size. A delivery waiting for a handler
// slot is kept alive like a running one (its claim renewed, the broker
// told it is in progress, every third of the ack wait). The acks of
// deliveries whose handlers end together go to the broker together.
//
// # Failures and dead letters
//
// A handler's error has the event delivered again after the [Backoff]
// delay (1s, 5s, 30s by default); the delivery numbered [MaxDeliveries]
// (5 by default) on which a handler fails sends the event to the group's
// dead-letter subject, "wizard.dead.<space>.<group>" ([DeadLetter]), with
// the event's headers and [HeaderDeadGroup], [HeaderDeadStream],
// [HeaderDeadSeq], [HeaderDeadSubject], [HeaderDeadDeliveries] and
// [HeaderDeadError], then terminates it for the group. A delivery the
// node refused (closing, overloaded) or that ended without an outcome
// (its member crashed) is not a handler's failure: it never dead-letters,
// so an event whose member keeps crashing is delivered again every ack
// wait. [Events.Stats] gives the group's lag and this member's counts.
//
// # Errors
//
// Errors name the space, and the pattern or group; those of JetStream are
// wrapped ([errors.Is] finds jetstream.ErrStreamNotFound, say). [New]
// fails when an existing stream's subjects, retention or storage differ
// from what the space needs, naming the field.
package durable
