package harness

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Handler answers one call: r = a + b, maybe after a delay or by asking
// another service (the roles of [ServerSpec]).
type Handler func(ctx context.Context, a, b float64) (float64, error)

// Client calls one server over one connection; it is safe for concurrent
// use.
type Client interface {
	Call(ctx context.Context, a, b float64) (float64, error)
	Close() error
}

// Server is a contender's server running in a child process.
type Server interface {
	// Addr returns the address clients dial.
	Addr() string
	Close() error
}

// ServeOptions tell a server what its handler does.
type ServeOptions struct {
	// Blocking says the handler may wait (the two-hop roles), so a server
	// that runs handlers inline in its reader (the floor) must not.
	Blocking bool
}

// DialOptions tune a client for a measurement. None is left: every
// contender dials the setup its users are told to run (HTTP/1.1 a
// keep-alive pool, drpc its drpcpool) in every scenario, and the
// handicapped setups are contenders of their own, labelled extra rows.
type DialOptions struct{}

// Driver drives runs against one server itself and reports what it
// measured, for a caller outside the Go load generator; it is used by one
// goroutine at a time.
type Driver interface {
	Drive(ctx context.Context, l Load) (Sample, error)
	Close() error
}

// Contender is one way of making the call.
type Contender struct {
	// Name identifies the contender in flags and child processes
	// ("wizard-tcp").
	Name string
	// Title labels it in tables and charts ("wizard TCP").
	Title string
	// Note is printed under the tables.
	Note string
	// Extra marks a labelled extra row: a handicapped setup of a peer (one
	// connection where its users pool, a default its docs advise against)
	// or the floor's former client, kept to show what the handicap costs.
	// It is no peer's headline: the "fastest contender" comparison and
	// the chart leave it out.
	Extra bool
	// Serve starts a server on listen that answers with h.
	Serve func(listen string, h Handler, o ServeOptions) (Server, error)
	// Dial connects a client to the server at addr.
	Dial func(ctx context.Context, addr string, o DialOptions) (Client, error)
	// DialCluster connects one client to the replicas at addrs, balanced
	// by the contender's own balancer; it returns once every replica can
	// take calls. Nil: the harness dials each replica and goes round robin
	// over them (see [Cluster]).
	DialCluster func(ctx context.Context, addrs []string, o DialOptions) (Client, error)
	// Balancer says what spreads the cluster scenario's calls over the
	// replicas ("" for the harness's round robin).
	Balancer string
	// Hops says whether the contender takes part in the two-hop and the
	// cluster scenarios.
	Hops bool
	// DialDriver, when set, replaces Dial: the contenders whose callers
	// are not Go (a Node.js client process) get a [Driver] for the server
	// at addr, which measures each run itself.
	DialDriver func(ctx context.Context, addr string) (Driver, error)
	// Prepare, when set, readies what the contender needs outside Go (a
	// Node.js toolchain and its locked packages) and returns why it cannot
	// run, or "": the harness then skips it with a line and a [Gap].
	Prepare func(ctx context.Context) string
}

// Reference names: ratios in the tables are to these contenders.
const (
	gRPCName  = "grpc"
	floorName = "floor"
)

// Contenders is the table of contenders, in table order.
var Contenders = []Contender{
	wizardContender("wizard-tcp", "wizard TCP", "runtime + runtime/tcp, typed client (runtime.NewClient), proto codec", newTCP),
	wizardContender("wizard-quic", "wizard QUIC", "runtime + runtime/quic (quic-go, TLS 1.3 always, so unlike the others it encrypts; "+
		"a self-signed certificate through quic.WithInsecureSelfSigned on loopback; the default 4 long-lived streams per connection), typed client, proto codec", newQUIC),
	grpcContender,
	httpContender,
	httpOneConnContender,
	floorContender,
	floorWriterContender,
	quicFloorContender,
	microwizardGoContender,
	microwizardNodeContender,
	microwizardBridgeContender,
	moleculerContender,
	drpcContender,
	drpcOneConnContender,
	connectContender,
	connectGzipContender,
	natsMicroContender,
	wizardNATSContender,
}

// Gap is a contender the issue asks for that this build cannot run.
type Gap struct {
	Title, Reason string
}

// Gaps lists the contenders that are missing, and why. The report prints
// them so that a missing row is never mistaken for a measured one.
var Gaps []Gap

// Lookup returns the contender called name.
func Lookup(name string) (Contender, error) {
	for _, c := range Contenders {
		if c.Name == name {
			return c, nil
		}
	}
	return Contender{}, fmt.Errorf("unknown contender %q (have %s)", name, Names())
}

// Names lists the contenders' names, comma separated.
func Names() string {
	names := make([]string, len(Contenders))
	for i, c := range Contenders {
		names[i] = c.Name
	}
	return strings.Join(names, ",")
}

// selectContenders returns the contenders named in names (all when empty),
// in table order.
func selectContenders(names []string) ([]Contender, error) {
	if len(names) == 0 {
		return slices.Clone(Contenders), nil
	}
	for _, n := range names {
		if _, err := Lookup(n); err != nil {
			return nil, err
		}
	}
	var out []Contender
	for _, c := range Contenders {
		if slices.Contains(names, c.Name) {
			out = append(out, c)
		}
	}
	return out, nil
}
