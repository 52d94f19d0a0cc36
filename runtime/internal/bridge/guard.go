package bridge

import (
	"context"
	"log/slog"
	"net"
	"net/netip"

	"github.com/wizardmesh/wizard/runtime/internal/connset"
	"github.com/wizardmesh/wizard/runtime/internal/mux"
	"github.com/wizardmesh/wizard/runtime/internal/ratelog"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// Guard keeps a listener's connections within its limits (a
// [connset.Set]) and the records its connections log within bounds: the
// records at Warn and above of its logger, which the listener hands to
// its connections too, are rate-limited by message ([ratelog.Handler]),
// since anyone who reaches the port can cause them.
type Guard struct {
	// Log is the listener's logger, rate-limited: for its own records and
	// for mux.Serve's.
	Log *slog.Logger

	set  *connset.Set
	logh *ratelog.Handler // nil when Log discards
	name string           // the transport's
}

// NewGuard returns the guard of a listener of transport name ("tcp")
// with limits lim, logging to log (nil: nowhere).
func NewGuard(name string, lim connset.Limits, log *slog.Logger) *Guard {
	g := &Guard{set: connset.New(lim), name: name, Log: slog.New(slog.DiscardHandler)}
	if log != nil {
		g.logh = ratelog.NewHandler(log.Handler())
		g.Log = slog.New(g.logh)
	}
	return g
}

// Admit admits a connection from remote, or refuses it with a logged
// reason (the caller closes it). To make room it may close another with
// its closeNow, after logging why; goAway is called when the connection
// has been idle past the idle timeout.
func (g *Guard) Admit(remote net.Addr, closeNow, goAway func()) (*connset.Conn, error) {
	ra := remote.String()
	c, err := g.set.Add(addrOf(remote), func(why error) {
		g.Log.Warn("wizard: "+g.name+": connection closed to make room for another", "remote", ra, "reason", why.Error())
		closeNow()
	}, func() {
		g.Log.Debug("wizard: "+g.name+": idle connection going away", "remote", ra)
		goAway()
	})
	if err != nil {
		g.Log.Warn("wizard: "+g.name+": connection refused", "remote", ra, "reason", err.Error())
	}
	return c, err
}

// Tracked returns h counting c's requests in flight, so that the guard
// knows whether c is idle.
func Tracked(h mux.Handler, c *connset.Conn) mux.Handler {
	return func(ctx context.Context, req *wire.Frame) *wire.Frame {
		c.Begin()
		defer c.End()
		return h(ctx, req)
	}
}

// Len returns the number of connections admitted and not yet ended.
func (g *Guard) Len() int { return g.set.Len() }

// Close stops the guard: it refuses later connections and logs the
// counts of what it suppressed.
func (g *Guard) Close() {
	g.set.Close()
	if g.logh != nil {
		g.logh.Close()
	}
}

// addrOf returns the IP of a TCP or UDP address.
func addrOf(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.AddrPort().Addr()
	case *net.UDPAddr:
		return a.AddrPort().Addr()
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap.Addr()
}
