package transporttest

import (
	"context"
	"crypto/tls"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testpki"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/introspect"
)

// The scenarios of node ids bound to certificates: every node of a mutual
// TLS mesh presents a certificate from one CA, which may name the node's
// id (wizard://node/<id>, see runtime.NodeURI).

// NewTLSTransport makes a transport that serves with server and dials
// with client.
type NewTLSTransport func(t testing.TB, server, client *tls.Config) runtime.Transport

// meshTransport makes a transport of the mesh whose certificate names
// certID ("" for none).
func meshTransport(t *testing.T, ca *testpki.CA, newTr NewTLSTransport, certID string) runtime.Transport {
	t.Helper()
	server, client := ca.NodeConfigs(ca.Node(t, certID))
	return newTr(t, server, client)
}

// certNode starts a node of the mesh with id, listening, presenting a
// certificate that names certID ("" for none), with a handler of
// role:certid,cmd:who that answers id.
func certNode(t *testing.T, ca *testpki.CA, newTr NewTLSTransport, id, certID string, opts ...runtime.Option) *runtime.Node {
	t.Helper()
	tr := meshTransport(t, ca, newTr, certID)
	n := NewServer(t, tr, append([]runtime.Option{runtime.WithID(id)}, opts...)...)
	MustAdd(t, n, "role:certid,cmd:who", func(ctx context.Context, r runtime.Request) (any, error) { return id, nil })
	return n
}

// certCaller starts a node of the mesh, with id and a certificate naming
// it, that calls addrs.
func certCaller(t *testing.T, ca *testpki.CA, newTr NewTLSTransport, id string, opts []runtime.Option, addrs ...string) *runtime.Node {
	t.Helper()
	tr := meshTransport(t, ca, newTr, id)
	return NewClient(t, tr, "role:certid,cmd:who", append([]runtime.Option{runtime.WithID(id)}, opts...), addrs...)
}

// certRelay is a member of the mesh whose certificate names an id of its
// own: it answers every catalog pull with the catalog of the node at
// target (so its catalog claims that node's id and run), and every other
// call itself.
type certRelay struct {
	addr  string
	calls atomic.Int32 // calls it served, catalog pulls aside
}

func startCertRelay(t *testing.T, ca *testpki.CA, newTr NewTLSTransport, certID, target string) *certRelay {
	t.Helper()
	tr := meshTransport(t, ca, newTr, certID)
	relay, err := tr.Dial(t.Context(), target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relay.Close() })
	im := &certRelay{}
	l, err := tr.Listen("127.0.0.1:0", serverFunc(func(ctx context.Context, m *runtime.Message) *runtime.Message {
		if m.Pattern == introspect.CatalogPattern {
			// As itself: the node it relays takes no caller under another
			// id than its certificate names.
			meta := []runtime.MetaPair{{Key: ":c", Value: certID}}
			reply, err := relay.Call(ctx, &runtime.Message{Pattern: m.Pattern, Meta: meta, Codec: m.Codec, Payload: m.Payload})
			if err != nil {
				return &runtime.Message{Code: runtime.CodeUnavailable, Error: err.Error()}
			}
			return reply
		}
		im.calls.Add(1)
		return &runtime.Message{Codec: runtime.CodecJSON, Payload: []byte(`"` + certID + `"`)}
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	im.addr = l.Addr()
	return im
}

type serverFunc func(ctx context.Context, m *runtime.Message) *runtime.Message

func (f serverFunc) ServeMessage(ctx context.Context, m *runtime.Message) *runtime.Message {
	return f(ctx, m)
}

// memberAt returns what n knows of the member at addr.
func memberAt(n *runtime.Node, addr string) (introspect.Member, bool) {
	for _, m := range n.Members() {
		if m.Addr == addr {
			return m, true
		}
	}
	return introspect.Member{}, false
}

// waitSettled waits until n has pulled the catalog of the peer at addr
// and routed it or turned it away.
func waitSettled(t *testing.T, n *runtime.Node, addr string) {
	t.Helper()
	testwait.Until(t, "the peer at "+addr+" routed or turned away", func() bool {
		m, _ := memberAt(n, addr)
		return m.Patterns > 0 || m.LastError != ""
	})
}

// checkTurnedAway fails t unless n lists the peer at addr unrouted,
// unconnected, saying why.
func checkTurnedAway(t *testing.T, n *runtime.Node, addr, why string) {
	t.Helper()
	if m, _ := memberAt(n, addr); m.Patterns != 0 || m.Connected || !strings.Contains(m.LastError, why) {
		t.Errorf("the record of %s: %+v; want it unrouted, unconnected, saying %q", addr, m, why)
	}
}

// callWho makes calls calls to role:certid,cmd:who from n and counts the
// answers by who gave them.
func callWho(t *testing.T, n *runtime.Node, calls int) map[string]int {
	t.Helper()
	served := map[string]int{}
	for i := range calls {
		res, err := n.ActE(t.Context(), "role:certid,cmd:who", nil)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		s, _ := res.Value().(string)
		served[s]++
	}
	return served
}

// CertifiedImpostor: a member of the mesh with a valid certificate of
// its own, naming its own id, relays the catalog of the node svc, so its
// catalog answers as svc (id and run). A caller that finds both by
// address alone (static peers: no discovery says who is where) routes svc
// and not the relay, which gets none of 100 calls; the caller warns of it
// once, naming both ids, and lists it unrouted, saying why.
func CertifiedImpostor(t *testing.T, newTr NewTLSTransport) {
	ca := testpki.New(t)
	svc := certNode(t, ca, newTr, "svc", "svc")
	im := startCertRelay(t, ca, newTr, "impostor", svc.Addr())
	var logs testlog.Buffer
	cl := certCaller(t, ca, newTr, "cl", []runtime.Option{runtime.WithLogger(logs.Logger())}, svc.Addr(), im.addr)
	waitSettled(t, cl, im.addr)
	served := callWho(t, cl, 100)
	if n := im.calls.Load(); n != 0 || served["svc"] != 100 {
		t.Errorf("the relay served %d of 100 calls (answers: %v); want 0", n, served)
	}
	checkTurnedAway(t, cl, im.addr, `certificate names node "impostor"`)
	warned := "level=WARN msg=\"wizard: peer not routed: it answers as another node than its certificate names\""
	if got := strings.Count(logs.String(), warned); got != 1 || !strings.Contains(logs.String(), "certified=impostor") {
		t.Errorf("warned of %d times, want once, naming the certified id:\n%s", got, logs.String())
	}
}

// RequirePeerIdentity: under runtime.WithRequirePeerIdentity, a caller
// routes svc, whose certificate names its id, and not anon, a node of
// the mesh whose certificate names none; without the option, a caller
// routes both.
func RequirePeerIdentity(t *testing.T, newTr NewTLSTransport) {
	ca := testpki.New(t)
	svc := certNode(t, ca, newTr, "svc", "svc")
	anon := certNode(t, ca, newTr, "anon", "")
	strict := certCaller(t, ca, newTr, "strict", []runtime.Option{runtime.WithRequirePeerIdentity()}, svc.Addr(), anon.Addr())
	waitSettled(t, strict, anon.Addr())
	if served := callWho(t, strict, 50); served["svc"] != 50 {
		t.Errorf("answers %v; want svc's alone", served)
	}
	checkTurnedAway(t, strict, anon.Addr(), "certificate names no node")
	lax := certCaller(t, ca, newTr, "lax", nil, svc.Addr(), anon.Addr())
	testwait.Until(t, "a caller without the option routes anon", func() bool {
		m, _ := memberAt(lax, anon.Addr())
		return m.Connected && m.Patterns > 0
	})
}

// CallerNamedByCertificate: under mutual TLS, a caller speaks only as the
// node its certificate names: a call stating another caller id is refused
// unrun (permission_denied, naming both), and a handler sees the certified
// id as the calling node.
func CallerNamedByCertificate(t *testing.T, newTr NewTLSTransport) {
	ca := testpki.New(t)
	svc := certNode(t, ca, newTr, "svc", "svc")
	var runs atomic.Int64
	MustAdd(t, svc, "role:certid,cmd:caller", func(ctx context.Context, r runtime.Request) (any, error) {
		runs.Add(1)
		return r.Source().Node, nil
	})
	conn, err := meshTransport(t, ca, newTr, "cl").Dial(t.Context(), svc.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	call := func(caller string) (*runtime.Message, error) {
		return conn.Call(t.Context(), &runtime.Message{
			Pattern: "cmd:caller,role:certid",
			Codec:   runtime.CodecJSON,
			Payload: []byte(`{}`),
			Meta:    []runtime.MetaPair{{Key: ":c", Value: caller}},
		})
	}
	reply, err := call("liar")
	if err != nil || reply.Code != runtime.CodePermissionDenied || !strings.Contains(reply.Error, `"liar"`) || !strings.Contains(reply.Error, `"cl"`) {
		t.Errorf("a call stating caller liar: %+v, %v; want permission_denied naming liar and cl", reply, err)
	}
	if n := runs.Load(); n != 0 {
		t.Errorf("the forged call ran %d times", n)
	}
	reply, err = call("cl")
	if err != nil || reply.Code != runtime.CodeOK || string(reply.Payload) != `"cl"` {
		t.Errorf("a call stating its certified id: %+v, %v; want the handler to see cl", reply, err)
	}
}

// CertifiedIdentity runs the scenarios of node ids named by certificates:
// a certified impostor, the strict option and the caller's named id.
func CertifiedIdentity(t *testing.T, newTr NewTLSTransport) {
	t.Run("CertifiedImpostorGetsNoCalls", func(t *testing.T) { CertifiedImpostor(t, newTr) })
	t.Run("RequirePeerIdentity", func(t *testing.T) { RequirePeerIdentity(t, newTr) })
	t.Run("CallerNamedByCertificate", func(t *testing.T) { CallerNamedByCertificate(t, newTr) })
}
