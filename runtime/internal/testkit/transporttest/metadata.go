package transporttest

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/runtime"
)

// chainSeen is what a handler of the metadata chain saw of its call.
type chainSeen struct {
	Metadata  string // runtime.IncomingMetadata(ctx).String()
	Node      string
	Transport string
	Subject   string // the verified certificate's, or ""
	HasAddr   bool
	Next      *chainSeen `json:",omitempty"` // what the next node saw
}

func seenBy(ctx context.Context, req runtime.Request) *chainSeen {
	src := req.Source()
	s := &chainSeen{Metadata: runtime.IncomingMetadata(ctx).String(), Node: src.Node, Transport: src.Transport, HasAddr: src.Addr != ""}
	if src.Identity != nil {
		s.Subject = src.Identity.Subject
	}
	return s
}

// MetadataChain runs a chain caller → A → B. A serves with tA (mutual TLS,
// presenting, as a client, the certificate whose subject is subjectA) and
// copies one of the caller's metadata keys into its call to B, which
// serves with tB; the caller dials with tC, presenting the certificate
// whose subject is subjectC. B sees the copied key only, A's node id and
// A's certificate; A sees all of the caller's metadata, the caller's id
// and the caller's certificate.
func MetadataChain(t *testing.T, name string, tC, tA, tB runtime.Transport, subjectC, subjectA string) {
	b := NewServer(t, tB)
	MustAdd(t, b, "role:chain,cmd:b", func(ctx context.Context, req runtime.Request) (any, error) {
		return seenBy(ctx, req), nil
	})
	a := NewServer(t, tA, runtime.WithDiscovery(runtime.StaticPeers(b.Addr())), runtime.WithCatalogRefresh(50*time.Millisecond))
	WaitRoutable(t, a, "role:chain,cmd:b")
	MustAdd(t, a, "role:chain,cmd:a", func(ctx context.Context, req runtime.Request) (any, error) {
		s := seenBy(ctx, req)
		// Copied: one key. Everything else the caller sent stays here.
		out := runtime.AppendMetadata(ctx, "x-copied", runtime.IncomingMetadata(ctx).Get("x-copied"))
		res, err := a.Act(out, "role:chain,cmd:b", nil)
		if err != nil {
			return nil, err
		}
		s.Next = new(chainSeen)
		if err := res.Decode(s.Next); err != nil {
			return nil, err
		}
		return s, nil
	})
	caller := NewClient(t, tC, "role:chain,cmd:a", nil, a.Addr())
	ctx := runtime.AppendMetadata(t.Context(), "x-copied", "yes", "x-private", "secret", "x-token-bin", "\x00\xff")
	res, err := caller.Act(ctx, "role:chain,cmd:a", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got chainSeen
	if err := res.Decode(&got); err != nil {
		t.Fatal(err)
	}
	want := chainSeen{
		Metadata: `x-copied="yes" x-private="secret" x-token-bin=(2 bytes)`, Node: caller.ID(), Transport: name, Subject: subjectC, HasAddr: true,
		Next: &chainSeen{Metadata: `x-copied="yes"`, Node: a.ID(), Transport: name, Subject: subjectA, HasAddr: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("what A and B saw (-want +got):\n%s", diff)
	}
}
