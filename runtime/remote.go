package runtime

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/wizardmesh/wizard/runtime/discovery"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// remote is the node's remote side: its listener and the peers it calls.
type remote struct {
	transport      Transport
	listenAddr     string
	listener       Listener
	discovery      discovery.Discovery
	defaultTimeout time.Duration
	refresh        time.Duration
	newBalancer    func(pattern.Pattern) Balancer
	newBreaker     func(*Target) Breaker
	budget         *retryBudget
	dials          chan struct{} // a slot per dial under way; WithMaxDials
	pulls          chan struct{} // a slot per catalog pull under way; maxPulls
	// requireID routes only peers whose certificate names their id
	// (WithRequirePeerIdentity).
	requireID bool

	mu       sync.Mutex
	peers    map[string]*peer             // by address
	catalogs map[string][]pattern.Pattern // fetched pattern sets by digest
	// catalogTypes are the message types of the cached catalogs' typed
	// patterns, by digest (none for an untyped catalog).
	catalogTypes map[string]catalogTypes
	// catalogBytes is the estimated size of catalogs (see cacheCatalog).
	catalogBytes int

	self selfDigest

	// foreign holds the peers discovery reported on another transport,
	// by address (at most maxForeign): listed, never called.
	foreign map[string]discovery.Peer
}

// maxForeign bounds the peers on another transport a node keeps listed.
const maxForeign = 1024

// newRemote is the remote side c configures, before it starts.
func newRemote(c *nodeConfig) *remote {
	return &remote{
		transport:      c.transport,
		listenAddr:     c.listen,
		discovery:      c.discovery,
		defaultTimeout: cmp.Or(c.defaultTimeout, 5*time.Second),
		refresh:        cmp.Or(c.refresh, 2*time.Second),
		peers:          map[string]*peer{},
		newBalancer:    c.newBalancer,
		newBreaker:     c.newBreaker,
		budget:         newRetryBudget(),
		dials:          make(chan struct{}, cmp.Or(c.maxDials, defaultMaxDials)),
		pulls:          make(chan struct{}, maxPulls),
		requireID:      c.requirePeerIdentity,
		catalogs:       map[string][]pattern.Pattern{},
		catalogTypes:   map[string]catalogTypes{},
		foreign:        map[string]discovery.Peer{},
	}
}

// Addr returns the address the node's transport listens on, or "" when it
// does not listen.
func (n *Node) Addr() string {
	if n.remote == nil || n.remote.listener == nil {
		return ""
	}
	return n.remote.listener.Addr()
}

// startRemote starts the listener and discovery.
func (n *Node) startRemote() error {
	r := n.remote
	if r.listenAddr != "" {
		l, err := r.transport.Listen(r.listenAddr, nodeServer{n})
		if err != nil {
			return fmt.Errorf("wizard: listen on %s: %w", r.listenAddr, err)
		}
		r.listener = l
	}
	if r.discovery != nil {
		if err := r.discovery.Start(nodeHost{n}); err != nil {
			if r.listener != nil {
				r.listener.Close()
			}
			return fmt.Errorf("wizard: start discovery: %w", err)
		}
	}
	return nil
}

// stopListener stops accepting remote calls: goaway, then drain.
func (n *Node) stopListener(ctx context.Context) error {
	if l := n.remote.listener; l != nil {
		return l.Shutdown(ctx)
	}
	return nil
}
