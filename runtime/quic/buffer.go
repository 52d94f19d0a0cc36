package quic

import (
	"context"
	"log/slog"
	"net"
)

// udpBufferSize is the socket buffer size quic-go asks the kernel for in
// each direction (7 MiB), and below which it warns.
const udpBufferSize = 7 << 20

// checkBuffers reports, through the transport's logger, a UDP socket whose
// buffers quic-go could not raise to udpBufferSize: a warning the first
// time, then debug records. quic-go has already tried by then (with
// SO_RCVBUFFORCE when the process may).
func (t *Transport) checkBuffers(c *net.UDPConn) {
	rcv, snd, ok := socketBuffers(c)
	if !ok || rcv >= udpBufferSize && snd >= udpBufferSize {
		return
	}
	level := slog.LevelDebug
	t.warnOnce.Do(func() { level = slog.LevelWarn })
	t.log.LogAttrs(context.Background(), level,
		"wizard: quic: UDP socket buffers are smaller than QUIC needs, throughput will suffer; on Linux raise the limits with: sysctl -w net.core.rmem_max=7500000 net.core.wmem_max=7500000",
		slog.String("addr", c.LocalAddr().String()),
		slog.Int("receive_kib", rcv>>10),
		slog.Int("send_kib", snd>>10),
		slog.Int("want_kib", udpBufferSize>>10),
	)
}
