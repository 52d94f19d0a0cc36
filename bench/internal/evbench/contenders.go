package evbench

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/nats/durable"
	"github.com/wizardmesh/wizard/runtime/tcp"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// contender is one way of emitting events to groups.
type contender struct {
	name, title, note string
	// node marks a Node.js contender (Moleculer): its processes are
	// events.mjs's, not this binary's.
	node bool
	// broker: the contender needs a nats-server process.
	broker bool
	// lossy: the contender may drop events (no acknowledgement, no
	// flow control); the others must deliver every event they took.
	lossy bool
	// gap, when set, is why the contender cannot run: it is reported as
	// not measured (or, named with -contenders, fails the run).
	gap string
	// subscribe makes a member of s.Group that files each event it
	// handles in rec; it returns the member's address for the emitter.
	subscribe func(ctx context.Context, s spec, rec *recorder) (string, func(), error)
	// emitter returns what emits one event stamped with the time, once
	// every group in s.Groups can take events.
	emitter func(ctx context.Context, s spec) (func(context.Context) error, func(), error)
}

// The pattern (wizard) and subjects (NATS) of the events.
const (
	wizardPattern = "bench:event"
	natsSubject   = "bench.event"
	jsSubject     = "bench.js"
	jsStream      = "BENCH"
)

var contenders = []contender{
	{
		name: "wizard-mesh", title: "wizard mesh",
		note: "runtime over TCP, no broker: each member a node (runtime/tcp, WithListen on 127.0.0.1, WithService(group)) subscribing " +
			"a NewUnaryHandler to " + wizardPattern + "; the emitter a node finding them through StaticPeers, N loops of " +
			"Node.Emit(ctx, \"" + wizardPattern + "\", &wrapperspb.UInt64Value{now}), each waiting until every group's member " +
			"has run its handler (the default: the emitter learns which groups took it)",
		subscribe: meshSubscribe, emitter: meshEmitter(false),
	},
	{
		name: "wizard-mesh-noreply", title: "wizard mesh, NoReply",
		note: "the same with runtime.NoReply(): Emit returns once the event is handed to each group's member (fire and forget, as " +
			"Moleculer's emit and NATS core publish are)",
		subscribe: meshSubscribe, emitter: meshEmitter(true),
	},
	{
		name: "moleculer", title: "Moleculer emit", node: true,
		note: "Moleculer 0.15 (npm, bench/moleculer/events.mjs, Node.js): each member a broker in its own process with a service named " +
			"after its group and an event handler for bench.event; the emitter a broker looping `await broker.emit('bench.event', " +
			"{t})` (balanced: one instance of each service), N loops; TCP transporter on 127.0.0.1, every broker given the others' " +
			"addresses, UDP discovery off, JSON serializer, no logger, metrics or tracing",
	},
	{
		name: "nats-core", title: "NATS core", broker: true, lossy: true,
		note: "nats.go alone through a nats-server process (127.0.0.1): each member a connection with QueueSubscribe(" + natsSubject +
			", group), the emitter one connection, N loops of Publish(8-byte stamp). No acknowledgement and no flow control: a member " +
			"that falls behind loses events (its pending limits or the broker's slow-consumer cut), counted as lost",
		subscribe: natsSubscribe, emitter: natsEmitter,
	},
	{
		name: "jetstream", title: "nats.go JetStream", broker: true,
		note: "nats.go's jetstream package alone on the same kind of broker with JetStream on: a stream " + jsStream + " on " + jsSubject +
			" (file storage, limits retention), a durable pull consumer per group (explicit ack, deliver new) that each member of the " +
			"group consumes with Consume and acks; the emitter one connection, N loops of js.Publish (each waiting for the stream's ack)",
		subscribe: jsSubscribe, emitter: jsEmitter,
	},
	{
		name: "wizard-durable", title: "wizard durable", broker: true,
		note: "runtime/nats/durable on the same kind of broker: each member a node (runtime/tcp, WithListen, so that it has its " +
			"de-duplication table) with durable.New(node, jetstream.New(nc), \"bench\") and Subscribe(" + wizardPattern + ", group, " +
			"NewUnaryHandler): a durable consumer per group (explicit ack after the record that the group handled the event is " +
			"written to the space's key-value bucket); the emitter a node with the same space, N loops of Events.Emit (a " +
			"Nats-Msg-Id each, waiting for the stream's ack); file storage, the package's defaults otherwise",
		subscribe: durableSubscribe(), emitter: durableEmitter,
	},
	{
		name: "wizard-durable-alo", title: "wizard durable, AtLeastOnce", broker: true,
		note: "the same with Subscribe(..., durable.AtLeastOnce()): no record in the key-value bucket (no claim before the " +
			"handler, no \"done\" before the ack); acked after the handler, the node's de-duplication table still running a " +
			"redelivery to the same node once",
		subscribe: durableSubscribe(durable.AtLeastOnce()), emitter: durableEmitter,
	},
}

func contenderOf(name string) (contender, error) {
	for _, c := range contenders {
		if c.name == name {
			return c, nil
		}
	}
	return contender{}, fmt.Errorf("no events contender %q (have: %s)", name, Names())
}

// Names lists the events mode's contenders.
func Names() string {
	var s string
	for i, c := range contenders {
		if i > 0 {
			s += ", "
		}
		s += c.name
	}
	return s
}

func goContenderOf(name string) (contender, error) {
	c, err := contenderOf(name)
	if err == nil && (c.node || c.subscribe == nil) {
		err = fmt.Errorf("events contender %s has no Go processes", name)
	}
	return c, err
}

func stamp() *wrapperspb.UInt64Value {
	return &wrapperspb.UInt64Value{Value: uint64(time.Now().UnixNano())}
}

func meshSubscribe(_ context.Context, s spec, rec *recorder) (string, func(), error) {
	tr, err := tcp.New()
	if err != nil {
		return "", nil, err
	}
	n, err := runtime.New(runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"),
		runtime.WithID(fmt.Sprintf("%s-%d", s.Group, s.Member)), runtime.WithService(s.Group))
	if err != nil {
		return "", nil, err
	}
	h := runtime.NewUnaryHandler(func(_ context.Context, in *wrapperspb.UInt64Value) (*emptypb.Empty, error) {
		rec.got(int64(in.GetValue()))
		return nil, nil
	})
	if err := n.Subscribe(wizardPattern, "", h); err != nil {
		n.Close()
		return "", nil, err
	}
	return n.Addr(), func() { n.Close() }, nil
}

func meshEmitter(noReply bool) func(context.Context, spec) (func(context.Context) error, func(), error) {
	return func(ctx context.Context, s spec) (func(context.Context) error, func(), error) {
		tr, err := tcp.New()
		if err != nil {
			return nil, nil, err
		}
		n, err := runtime.New(runtime.WithTransport(tr), runtime.WithService("emitter"),
			runtime.WithDiscovery(runtime.StaticPeers(s.Peers...)))
		if err != nil {
			return nil, nil, err
		}
		if err := n.WaitForSubscribers(ctx, wizardPattern, s.Groups...); err != nil {
			n.Close()
			return nil, nil, fmt.Errorf("wizard emitter: waiting for groups %v: %w", s.Groups, err)
		}
		var opts []runtime.CallOption
		if noReply {
			opts = append(opts, runtime.NoReply())
		}
		want := len(s.Groups)
		emit := func(ctx context.Context) error {
			d, err := n.Emit(ctx, wizardPattern, stamp(), opts...)
			if err == nil && len(d.Took) != want {
				err = fmt.Errorf("emit taken by %v; want %d groups", d.Took, want)
			}
			return err
		}
		return emit, func() { n.Close() }, nil
	}
}

// startBroker starts a nats-server on 127.0.0.1 in this process, with
// JetStream storing into storeDir when it is set.
func startBroker(storeDir string) (string, func(), error) {
	o := &natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true}
	if storeDir != "" {
		o.JetStream, o.StoreDir = true, storeDir
	}
	s, err := natsserver.NewServer(o)
	if err != nil {
		return "", nil, err
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return "", nil, errors.New("nats-server: not ready in 10s")
	}
	return s.ClientURL(), func() { s.Shutdown(); s.WaitForShutdown() }, nil
}

func stampBytes() []byte {
	return binary.LittleEndian.AppendUint64(nil, uint64(time.Now().UnixNano()))
}

func unstamp(b []byte) int64 {
	if len(b) < 8 {
		return 0
	}
	return int64(binary.LittleEndian.Uint64(b))
}

func natsSubscribe(_ context.Context, s spec, rec *recorder) (string, func(), error) {
	nc, err := natsgo.Connect(s.Broker, natsgo.Name(s.Group))
	if err != nil {
		return "", nil, err
	}
	if _, err := nc.QueueSubscribe(natsSubject, s.Group, func(m *natsgo.Msg) { rec.got(unstamp(m.Data)) }); err == nil {
		err = nc.FlushTimeout(10 * time.Second) // the broker has the subscription
	}
	if err != nil {
		nc.Close()
		return "", nil, err
	}
	return "ready", nc.Close, nil
}

func natsEmitter(_ context.Context, s spec) (func(context.Context) error, func(), error) {
	nc, err := natsgo.Connect(s.Broker, natsgo.Name("emitter"))
	if err != nil {
		return nil, nil, err
	}
	return func(context.Context) error { return nc.Publish(natsSubject, stampBytes()) }, nc.Close, nil
}

// ensureStream makes the benchmark's stream: file storage (as durable
// events need), limits retention, bounded so that the runs fit the disk.
func ensureStream(ctx context.Context, js jetstream.JetStream) error {
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: jsStream, Subjects: []string{jsSubject}, Storage: jetstream.FileStorage,
		Retention: jetstream.LimitsPolicy, MaxBytes: 2 << 30, MaxAge: 10 * time.Minute, Discard: jetstream.DiscardOld,
	})
	return err
}

func jsSubscribe(ctx context.Context, s spec, rec *recorder) (string, func(), error) {
	nc, err := natsgo.Connect(s.Broker, natsgo.Name(s.Group))
	if err != nil {
		return "", nil, err
	}
	fail := func(err error) (string, func(), error) { nc.Close(); return "", nil, err }
	js, err := jetstream.New(nc)
	if err != nil {
		return fail(err)
	}
	if err := ensureStream(ctx, js); err != nil {
		return fail(fmt.Errorf("stream %s: %w", jsStream, err))
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, jsStream, jetstream.ConsumerConfig{
		Durable: s.Group, AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverNewPolicy, FilterSubject: jsSubject,
	})
	if err != nil {
		return fail(fmt.Errorf("consumer %s: %w", s.Group, err))
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		rec.got(unstamp(m.Data()))
		if err := m.Ack(); err != nil {
			fmt.Fprintf(os.Stderr, "jetstream %s: ack: %v\n", s.Group, err)
		}
	})
	if err != nil {
		return fail(fmt.Errorf("consume %s: %w", s.Group, err))
	}
	return "ready", func() { cc.Stop(); nc.Close() }, nil
}

func jsEmitter(ctx context.Context, s spec) (func(context.Context) error, func(), error) {
	nc, err := natsgo.Connect(s.Broker, natsgo.Name("emitter"))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err == nil {
		err = ensureStream(ctx, js)
	}
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	emit := func(ctx context.Context) error {
		_, err := js.Publish(ctx, jsSubject, stampBytes())
		return err
	}
	return emit, nc.Close, nil
}

// durableSpace is the event space of the durable contender.
const durableSpace = "bench"

// durableOpen connects to the broker and opens the space on a node.
func durableOpen(ctx context.Context, s spec, n *runtime.Node) (*durable.Events, func(), error) {
	nc, err := natsgo.Connect(s.Broker, natsgo.Name(cmp.Or(s.Group, "emitter")))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	ev, err := durable.New(ctx, n, js, durableSpace, durable.WithMaxBytes(2<<30), durable.WithMaxAge(10*time.Minute))
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return ev, func() { ev.Close(); nc.Close() }, nil
}

func durableSubscribe(opts ...durable.SubscribeOption) func(context.Context, spec, *recorder) (string, func(), error) {
	return func(ctx context.Context, s spec, rec *recorder) (string, func(), error) {
		return durableMember(ctx, s, rec, opts)
	}
}

func durableMember(ctx context.Context, s spec, rec *recorder, opts []durable.SubscribeOption) (string, func(), error) {
	tr, err := tcp.New()
	if err != nil {
		return "", nil, err
	}
	n, err := runtime.New(runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"),
		runtime.WithID(fmt.Sprintf("%s-%d", s.Group, s.Member)), runtime.WithService(s.Group))
	if err != nil {
		return "", nil, err
	}
	ev, closeEv, err := durableOpen(ctx, s, n)
	if err != nil {
		n.Close()
		return "", nil, err
	}
	h := runtime.NewUnaryHandler(func(_ context.Context, in *wrapperspb.UInt64Value) (*emptypb.Empty, error) {
		rec.got(int64(in.GetValue()))
		return nil, nil
	})
	if err := ev.Subscribe(ctx, wizardPattern, "", h, opts...); err != nil {
		closeEv()
		n.Close()
		return "", nil, err
	}
	return "ready", func() { closeEv(); n.Close() }, nil
}

func durableEmitter(ctx context.Context, s spec) (func(context.Context) error, func(), error) {
	n, err := runtime.New(runtime.WithService("emitter"))
	if err != nil {
		return nil, nil, err
	}
	ev, closeEv, err := durableOpen(ctx, s, n)
	if err != nil {
		n.Close()
		return nil, nil, err
	}
	emit := func(ctx context.Context) error {
		_, err := ev.Emit(ctx, wizardPattern, stamp())
		return err
	}
	return emit, func() { closeEv(); n.Close() }, nil
}
