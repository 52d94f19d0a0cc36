package nats_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/natstest"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/nats"
)

// grant is a broker user's permissions, as docs/nats.md's recipe words
// them.
type grant struct {
	user     string
	pub, sub []string
}

// docs/nats.md's recipe: a node that serves on its own subject, and a node
// that only calls.
func serverGrant(user, subject string) grant {
	return grant{user: user,
		pub: []string{"wizard.node.>", "wizard.discovery", "_INBOX.>"},
		sub: []string{subject, "wizard.node.*.ctl", "wizard.discovery", "_INBOX.>"}}
}

func callerGrant(user string) grant {
	return grant{user: user,
		pub: []string{"wizard.node.>", "wizard.discovery"},
		sub: []string{"wizard.node.*.ctl", "wizard.discovery", "_INBOX.>"}}
}

// noPub returns g without the permission to publish to subject.
func (g grant) noPub(subject string) grant {
	g.pub = slices.DeleteFunc(slices.Clone(g.pub), func(s string) bool { return s == subject })
	return g
}

// noSub returns g without the permission to subscribe to subject.
func (g grant) noSub(subject string) grant {
	g.sub = slices.DeleteFunc(slices.Clone(g.sub), func(s string) bool { return s == subject })
	return g
}

// authConf is a nats-server configuration with the users of gs (password
// "pw") and an "admin" who may do anything.
func authConf(gs ...grant) string {
	quote := func(list []string) string {
		return `["` + strings.Join(list, `", "`) + `"]`
	}
	var users []string
	for _, g := range gs {
		users = append(users, fmt.Sprintf("{user: %q, password: pw, permissions: {publish: %s, subscribe: %s}}", g.user, quote(g.pub), quote(g.sub)))
	}
	users = append(users, `{user: admin, password: pw}`)
	return "authorization {\n  users = [\n    " + strings.Join(users, "\n    ") + "\n  ]\n}\n"
}

// permNode makes a node of the broker at url, as user, with NATS
// discovery; it listens on subject unless it is "".
func permNode(t *testing.T, url, user, subject string, log *testlog.Buffer) (*runtime.Node, error) {
	t.Helper()
	tr, err := nats.New(nats.WithURL(url), nats.WithUserInfo(user, "pw"), nats.WithLogger(log.Logger()), nats.WithReconnect(20*time.Millisecond, 0))
	if err != nil {
		t.Fatal(err)
	}
	d, err := nats.NewDiscovery(tr, nats.WithHeartbeat(heartbeat, deadAfter))
	if err != nil {
		t.Fatal(err)
	}
	opts := []runtime.Option{runtime.WithTransport(tr), runtime.WithDiscovery(d), runtime.WithLogger(log.Logger())}
	if subject != "" {
		opts = append(opts, runtime.WithListen(subject))
	}
	n, err := runtime.New(opts...)
	if err == nil {
		t.Cleanup(func() { n.Close() })
	}
	return n, err
}

const paySubject = "wizard.node.pay"

// payServer starts the node serving role:pay on paySubject as user.
func payServer(t *testing.T, url, user string, log *testlog.Buffer) *runtime.Node {
	t.Helper()
	srv, err := permNode(t, url, user, paySubject, log)
	if err != nil {
		t.Fatalf("the server: %v", err)
	}
	transporttest.MustAdd(t, srv, "role:pay", func(ctx context.Context, r runtime.Request) (any, error) { return "paid", nil })
	return srv
}

// TestPermissionRecipe: nodes with docs/nats.md's grants, and no more,
// find each other and call, and the broker refuses none of their
// publishes and subscriptions.
func TestPermissionRecipe(t *testing.T) {
	p := natstest.StartProcess(t, authConf(serverGrant("pay", paySubject), callerGrant("web")))
	log := &testlog.Buffer{}
	payServer(t, p.URL(), "pay", log)
	cl, err := permNode(t, p.URL(), "web", "", log)
	if err != nil {
		t.Fatalf("the caller: %v", err)
	}
	transporttest.WaitRoutable(t, cl, "role:pay")
	for range 10 {
		res, err := cl.Act(t.Context(), "role:pay", nil)
		if err != nil || res.Value() != "paid" {
			t.Fatalf("role:pay = %v, %v", res.Value(), err)
		}
	}
	if s := log.String(); strings.Contains(s, "denies") {
		t.Errorf("the broker refused something:\n%s", s)
	}
	if out := p.Output(); strings.Contains(out, "Violation") {
		t.Errorf("nats-server reports a violation:\n%s", out)
	}
}

// TestPermissionDenied: a grant of the recipe missing makes an error
// that names the subject and the permission: the start of the node that
// lacks it fails, or its calls do, or (a server that may not publish its
// replies, whose callers cannot know why they hear nothing) its log says
// so.
func TestPermissionDenied(t *testing.T) {
	t.Run("server may not subscribe to its subject", func(t *testing.T) {
		p := natstest.StartProcess(t, authConf(serverGrant("pay", paySubject).noSub(paySubject)))
		watch := announcements(t, p.URL())
		_, err := permNode(t, p.URL(), "pay", paySubject, &testlog.Buffer{})
		wantPermission(t, err, "subscribe", paySubject)
		if got := watch(); len(got) != 0 {
			t.Errorf("the node that failed to start announced itself: %v", got)
		}
	})
	t.Run("caller may not subscribe to control subjects", func(t *testing.T) {
		p := natstest.StartProcess(t, authConf(serverGrant("pay", paySubject), callerGrant("web").noSub("wizard.node.*.ctl")))
		payServer(t, p.URL(), "pay", &testlog.Buffer{})
		dialRefused(t, p.URL(), "web", "subscribe", paySubject+".ctl")
	})
	t.Run("caller may not publish to node subjects", func(t *testing.T) {
		p := natstest.StartProcess(t, authConf(serverGrant("pay", paySubject), callerGrant("web").noPub("wizard.node.>")))
		payServer(t, p.URL(), "pay", &testlog.Buffer{})
		dialRefused(t, p.URL(), "web", "publish", paySubject)
	})
	t.Run("caller may not subscribe to its inbox", func(t *testing.T) {
		p := natstest.StartProcess(t, authConf(callerGrant("web").noSub("_INBOX.>")))
		_, err := permNode(t, p.URL(), "web", "", &testlog.Buffer{})
		wantPermission(t, err, "subscribe", "_INBOX.")
	})
	t.Run("node may not announce", func(t *testing.T) {
		p := natstest.StartProcess(t, authConf(callerGrant("web").noSub("wizard.discovery")))
		_, err := permNode(t, p.URL(), "web", "", &testlog.Buffer{})
		wantPermission(t, err, "subscribe", "wizard.discovery")
	})
	t.Run("node may not query the mesh", func(t *testing.T) {
		p := natstest.StartProcess(t, authConf(callerGrant("web").noPub("wizard.discovery")))
		_, err := permNode(t, p.URL(), "web", "", &testlog.Buffer{})
		wantPermission(t, err, "publish", "wizard.discovery")
	})
	t.Run("server may not publish replies", func(t *testing.T) {
		p := natstest.StartProcess(t, authConf(serverGrant("pay", paySubject).noPub("_INBOX.>"), callerGrant("web")))
		log := &testlog.Buffer{}
		payServer(t, p.URL(), "pay", log)
		if _, err := permNode(t, p.URL(), "web", "", &testlog.Buffer{}); err != nil {
			t.Fatalf("the caller: %v", err)
		}
		testwait.Until(t, "the server logs the refusal of a reply", func() bool {
			return strings.Contains(log.String(), `msg="wizard: nats: the broker denies a permission" op=publish subject=_INBOX.`)
		})
	})
}

// dialRefused checks, as user, that a Dial of the node serving role:pay
// fails naming the permission to op to subject, and that a caller node
// says so of that node in its members, once its discovery heard of it.
func dialRefused(t *testing.T, url, user, op, subject string) {
	t.Helper()
	tr := newTransport(t, url, nats.WithUserInfo(user, "pw"))
	c, err := tr.Dial(t.Context(), paySubject)
	if err == nil {
		c.Close()
	}
	wantPermission(t, err, op, subject)
	if !errors.Is(err, runtime.ErrNotSent) {
		t.Errorf("Dial: %v does not match runtime.ErrNotSent", err)
	}
	cl, err := permNode(t, url, user, "", &testlog.Buffer{})
	if err != nil {
		t.Fatalf("the caller: %v", err)
	}
	want := fmt.Sprintf("the broker denies permission to %s to %q", op, subject)
	testwait.Until(t, "the caller's members say "+want, func() bool {
		for _, m := range cl.Members() {
			if m.Addr == paySubject && strings.Contains(m.LastError, want) {
				return true
			}
		}
		return false
	})
}

// wantPermission fails t unless err names the permission to op to a
// subject that starts with subject.
func wantPermission(t *testing.T, err error, op, subject string) {
	t.Helper()
	want := fmt.Sprintf("the broker denies permission to %s to %q", op, subject)
	if strings.HasSuffix(subject, ".") {
		want = want[:len(want)-1] // a prefix
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v; want one that says %s", err, want)
	}
	var pe *nats.PermissionError
	if !errors.As(err, &pe) || pe.Op != op || !errors.Is(err, natsgo.ErrPermissionViolation) {
		t.Errorf("error %v is not a *nats.PermissionError of %s matching nats.ErrPermissionViolation", err, op)
	}
}

// announcements watches the discovery subject as the admin; the function
// it returns says which nodes announced themselves until then: a message
// it publishes last marks the end, after whatever the broker took before.
func announcements(t *testing.T, url string) func() []string {
	t.Helper()
	nc, err := natsgo.Connect(url, natsgo.UserInfo("admin", "pw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	msgs := make(chan *natsgo.Msg, 64)
	sub, err := nc.ChanSubscribe("wizard.discovery", msgs)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return func() []string {
		if err := nc.Publish("wizard.discovery", []byte("end")); err != nil {
			t.Fatal(err)
		}
		var up []string
		for {
			m := testwait.Recv(t, msgs)
			if string(m.Data) == "end" {
				_ = sub.Unsubscribe()
				return up
			}
			var a struct{ Op, Addr string }
			if json.Unmarshal(m.Data, &a) == nil && a.Op == "up" {
				up = append(up, a.Addr)
			}
		}
	}
}

// TestPermissionLifted: a refusal is not held against a subscription
// made after the broker's configuration, reloaded, grants it: the
// connection stays up (discovery holds it) and a Dial refused for want of
// the control subject succeeds once the grant is there.
func TestPermissionLifted(t *testing.T) {
	without := authConf(serverGrant("pay", paySubject), callerGrant("web").noSub("wizard.node.*.ctl"))
	p := natstest.StartProcess(t, without)
	payServer(t, p.URL(), "pay", &testlog.Buffer{})
	tr := newTransport(t, p.URL(), nats.WithUserInfo("web", "pw"))
	d, err := nats.NewDiscovery(tr)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(newHost("")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	_, err = tr.Dial(t.Context(), paySubject)
	wantPermission(t, err, "subscribe", paySubject+".ctl")
	p.Reload(authConf(serverGrant("pay", paySubject), callerGrant("web")))
	testwait.Until(t, "a Dial succeeds once the broker grants the control subject", func() bool {
		c, err := tr.Dial(t.Context(), paySubject)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}

// TestPermissionRevoked: a caller whose permission to publish to the
// node's subject is taken away (the broker reloads its configuration)
// gets a call error that names it at once, not a timeout.
func TestPermissionRevoked(t *testing.T) {
	p := natstest.StartProcess(t, authConf(serverGrant("pay", paySubject), callerGrant("web")))
	payServer(t, p.URL(), "pay", &testlog.Buffer{})
	cl, err := permNode(t, p.URL(), "web", "", &testlog.Buffer{})
	if err != nil {
		t.Fatalf("the caller: %v", err)
	}
	transporttest.WaitRoutable(t, cl, "role:pay")
	p.Reload(authConf(serverGrant("pay", paySubject), callerGrant("web").noPub("wizard.node.>")))
	var callErr error
	testwait.Until(t, "a call fails once the broker applied the new permissions", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, callErr = cl.Act(ctx, "role:pay", nil)
		return callErr != nil
	})
	t.Logf("call error: %v", callErr)
	want := fmt.Sprintf("the broker denies permission to publish to %q", paySubject)
	if !strings.Contains(callErr.Error(), want) {
		t.Errorf("call error %v; want one that says %s", callErr, want)
	}
}
