package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"time"
)

// logAccess writes the access log's record of a request, at Info: method,
// path, route, status, duration, request id and subject. A client gone
// (499) is logged like any other status.
func (g *Gateway) logAccess(r *http.Request, l *live, a *access, d time.Duration) {
	ctx := context.Background()
	if !l.set.accessLog || !g.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	g.log.LogAttrs(ctx, slog.LevelInfo, "gateway: request",
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.String("route", a.route),
		slog.Int("status", a.status),
		slog.Duration("duration", d),
		slog.String("request_id", a.rid),
		slog.String("subject", a.subject),
		slog.String("remote", l.clientIP(r)),
	)
}

// logFrame is logAccess for a WebSocket request frame.
func (g *Gateway) logFrame(f inFrame, ip string, a *access, d time.Duration) {
	ctx := context.Background()
	if !g.now().set.accessLog || !g.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	g.log.LogAttrs(ctx, slog.LevelInfo, "gateway: request",
		slog.String("method", f.Method),
		slog.String("path", f.Path),
		slog.String("route", a.route),
		slog.Int("status", a.status),
		slog.Duration("duration", d),
		slog.String("request_id", a.rid),
		slog.String("subject", a.subject),
		slog.String("remote", ip),
		slog.Bool("websocket", true),
	)
}
