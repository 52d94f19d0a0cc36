package harness

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
)

// The NATS core contender of the streams mode: a stream is a subject. The
// caller subscribes to a subject per stream, then asks the server process
// (request/reply on natsStreamOpen) to publish messages of a size on
// them; the server publishes in a loop per subject until the caller's
// request on natsStreamStop. NATS core has no flow control: a publisher
// runs at the speed its broker connection takes, and a subscriber that
// falls behind loses messages (its client's pending limits, or the
// broker's slow-consumer cut), which the stamps count as lost. The
// requests travel on a control connection of each side, so that they do
// not queue behind the messages.
const (
	natsStreamOpen = "bench.streams.open" // "prefix n size": subjects prefix.0 to prefix.n-1
	natsStreamStop = "bench.streams.stop" // "prefix"
)

var natsStreamer = streamer{
	name:  "nats-core",
	title: "NATS core",
	note: "publish/subscribe through a nats-server embedded in the server process (127.0.0.1): a subject per stream, a publisher goroutine per " +
		"subject in a loop of nc.Publish on the server's one broker connection, the caller's one nats.go connection with a subscription per " +
		"subject (its default pending limits) counting in the handler (opening and stopping go over a connection of their own on each side). " +
		"NATS core has no flow control, so its row is an upper bound without backpressure: the messages a subscriber misses are counted " +
		"as lost, not as received",
	lossy: true,
	serve: func(listen string, src *streamSource) (Server, error) {
		br, err := startBroker()
		if err != nil {
			return nil, err
		}
		p := &natsPublisher{src: src, runs: map[string]func(){}}
		p.nc, err = natsgo.Connect(br.ClientURL())
		if err == nil {
			p.ctl, err = natsgo.Connect(br.ClientURL())
		}
		if err == nil {
			_, err = p.ctl.Subscribe(natsStreamOpen, p.open)
		}
		if err == nil {
			_, err = p.ctl.Subscribe(natsStreamStop, p.stop)
		}
		if err == nil {
			err = p.ctl.FlushTimeout(10 * time.Second)
		}
		if err != nil {
			p.close()
			br.Shutdown()
			return nil, err
		}
		return &natsServer{br: br, addr: br.ClientURL(), close: p.close}, nil
	},
	dial: func(_ context.Context, addr string) (StreamClient, error) {
		nc, err := natsgo.Connect(addr)
		if err != nil {
			return nil, err
		}
		ctl, err := natsgo.Connect(addr)
		if err != nil {
			nc.Close()
			return nil, err
		}
		return &natsStreamClient{nc: nc, ctl: ctl}, nil
	},
}

// natsPublisher is the server side: a publishing goroutine per subject.
type natsPublisher struct {
	nc, ctl *natsgo.Conn // the messages' connection, the requests'
	src     *streamSource
	mu      sync.Mutex
	runs    map[string]func() // prefix -> stop its publishers and wait
}

func (p *natsPublisher) open(m *natsgo.Msg) {
	f := strings.Fields(string(m.Data))
	var n, size int
	var err error
	if len(f) != 3 {
		err = fmt.Errorf("open %q", m.Data)
	}
	if err == nil {
		n, err = strconv.Atoi(f[1])
	}
	if err == nil {
		size, err = strconv.Atoi(f[2])
	}
	if err != nil {
		m.Respond([]byte(err.Error()))
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range n {
		subject := f[0] + "." + strconv.Itoa(i)
		wg.Go(func() {
			serveMessages(p.src, ctx, size, subject, func(subject string, b []byte) error {
				if err := ctx.Err(); err != nil {
					return err
				}
				return p.nc.Publish(subject, b)
			})
		})
	}
	p.mu.Lock()
	p.runs[f[0]] = func() { cancel(); wg.Wait() }
	p.mu.Unlock()
	m.Respond([]byte("ok"))
}

func (p *natsPublisher) stop(m *natsgo.Msg) {
	p.mu.Lock()
	stop := p.runs[string(m.Data)]
	delete(p.runs, string(m.Data))
	p.mu.Unlock()
	if stop != nil {
		stop()
	}
	m.Respond([]byte("ok"))
}

func (p *natsPublisher) close() {
	p.mu.Lock()
	for _, stop := range p.runs {
		stop()
	}
	p.mu.Unlock()
	for _, nc := range []*natsgo.Conn{p.ctl, p.nc} {
		if nc != nil {
			nc.Close()
		}
	}
}

type natsStreamClient struct {
	nc, ctl *natsgo.Conn  // the messages' connection, the requests'
	runs    atomic.Uint64 // numbers each run's subjects
}

func (c *natsStreamClient) Start(ctx context.Context, n, size int, got func(int, []byte) error) (StreamRun, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r := &natsStreamRun{c: c, prefix: "bench.stream." + strconv.FormatUint(c.runs.Add(1), 10)}
	for i := range n {
		sub, err := c.nc.Subscribe(r.prefix+"."+strconv.Itoa(i), func(m *natsgo.Msg) {
			if err := got(i, m.Data); err != nil {
				r.fail(fmt.Errorf("stream %d: %w", i, err))
			}
		})
		if err != nil {
			r.Stop()
			return nil, err
		}
		r.subs = append(r.subs, sub)
	}
	// The subscriptions reach the broker before the publishers start.
	if err := c.nc.FlushWithContext(ctx); err != nil {
		r.Stop()
		return nil, err
	}
	if _, err := c.ctl.RequestWithContext(ctx, natsStreamOpen, fmt.Appendf(nil, "%s %d %d", r.prefix, n, size)); err != nil {
		r.Stop()
		return nil, fmt.Errorf("opening %d streams: %w", n, err)
	}
	r.open = true
	return r, nil
}

func (c *natsStreamClient) Close() error {
	c.ctl.Close()
	c.nc.Close()
	return nil
}

type natsStreamRun struct {
	c       *natsStreamClient
	prefix  string
	subs    []*natsgo.Subscription
	open    bool // the publishers started
	mu      sync.Mutex
	err     error
	stopped bool
}

func (r *natsStreamRun) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil && !r.stopped {
		r.err = err
	}
}

// Stop stops the publishers and unsubscribes; a handler still running
// may count a last message into this run's counts, which are read by
// then.
func (r *natsStreamRun) Stop() error {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	var err error
	if r.open {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, e := r.c.ctl.RequestWithContext(ctx, natsStreamStop, []byte(r.prefix)); e != nil {
			err = fmt.Errorf("stopping %s: %w", r.prefix, e)
		}
	}
	for _, sub := range r.subs {
		sub.Unsubscribe()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	return err
}
