// Package quic is wizard's QUIC transport, on quic-go: TLS 1.3 always,
// ALPN "wizard/1", and a few long-lived streams per connection, each
// multiplexing many concurrent calls as a TCP connection does in package
// tcp. Swapping transports is one option:
//
//	tr, err := quic.New(
//		quic.WithServerTLS(serverTLS), // Certificates; ClientAuth and ClientCAs for mutual TLS
//		quic.WithClientTLS(clientTLS), // RootCAs; Certificates for mutual TLS
//	)
//	if err != nil {
//		return err
//	}
//	node, err := runtime.New(
//		runtime.WithTransport(tr),
//		runtime.WithListen("0.0.0.0:7070"), // a UDP port
//		runtime.WithDiscovery(runtime.StaticPeers("10.0.0.7:7070")),
//	)
//
// # Streams
//
// A dialed connection opens [WithStreams] bidirectional streams (4 by
// default) and keeps them for its whole life. Each stream carries the
// wizard wire format exactly as a TCP connection does (handshake, then
// request, response, cancel, ping and goaway frames, written by one
// goroutine that coalesces them), so a call costs no stream setup:
// opening a stream per call costs a stream's setup and its flow-control
// state on every call, and its frames share no writes. Calls fill the streams in order ([WithStreamFill]): a
// call takes the first stream with fewer than 64 calls in flight, so that
// the frames of many calls share each write and each QUIC packet (which
// costs a system call, encryption and acknowledgements), and the next
// streams take the calls beyond, so that a lost packet stalls only part
// of a busy connection's calls.
//
// # Bounds
//
// What a caller costs a listener is bounded, whatever it sends, per
// connection as over TCP, however many streams the caller opens (at most
// 16 at once): on all of a connection's streams together at most
// [WithMaxConnInFlight] handlers run at once (256), calls beyond wait in
// order, and once they, or the answers waiting to be written, hold
// [WithMaxConnQueued] bytes (1 MiB) the listener stops reading the
// connection's streams, so that QUIC's flow control holds the caller
// back; what the caller sends meanwhile waits in QUIC's receive windows,
// at most 1 MiB a stream and 2 MiB a connection. While calls on several
// streams wait for a handler, the streams take the free handlers in turn.
// Every ping is answered. A call that arrives without a deadline gets
// [WithServeTimeout] (30s). A node's [runtime.WithMaxInFlight] limit is
// shared among its callers (a QUIC connection, all its streams, is one):
// each busy caller may hold an equal part, less an eighth of the limit
// kept for callers not busy yet, and once the node is full its calls
// beyond are refused at once as the node refuses calls over its limit.
//
// # TLS
//
// QUIC cannot run without TLS, so a listener needs a certificate:
// [Transport.Listen] fails with a clear error when there is none. Give one
// with [WithServerTLS]; dialers verify it against [WithClientTLS]'s RootCAs
// (the system roots by default), with the dialed host as server name unless
// the configuration names one. For mutual TLS set ClientAuth and ClientCAs
// on the server's configuration and Certificates on the client's. Both
// sides are pinned to TLS 1.3 and ALPN "wizard/1": a peer offering another
// protocol is refused during the handshake.
//
// For development and tests only, [WithInsecureSelfSigned] makes listeners
// without a certificate serve a self-signed one and dialers without a
// configuration accept any certificate: encrypted, but not authenticated.
//
// TLS alone proves the server to its callers but serves anyone who can
// reach the port: only mutual TLS (ClientAuth set to
// tls.RequireAndVerifyClientCert, with ClientCAs) keeps callers without a
// certificate from those CAs out.
// A certificate may name its node's id (runtime.NodeURI): a node then
// routes a peer only as the id its server certificate names, and a
// handler sees a caller as the id its client certificate names
// ([Conn.PeerCertificate] gives the verified server certificate).
//
// # Limits
//
// A listener holds at most [WithMaxConns] connections (by default half the
// process's file-descriptor limit, at most 4096), and at most
// [WithMaxConnsPerIP] from one IP address (an IPv6 /64; by default a
// quarter of the maximum); an eighth of the maximum is kept for IPs with
// fewer than 4 connections. When the listener is full, the IP with the
// most connections gives one up to an IP with at least two fewer: its
// connection idle longest (no request in flight since the listener last
// looked; one that has not opened a stream counts as idle since it was
// accepted), else one without a request in flight, else one with requests
// in flight, which its caller sends again (the node's de-duplication keeps
// a call from running twice); to an IP with one fewer, only an idle one.
// Otherwise, and at the per-IP limit, the newcomer's IP makes room among
// its own connections, one without a request in flight. The connection
// chosen is closed at once with application error 2; when there is none,
// the newcomer is closed instead. So neither connections held open by an
// attacker nor a few IPs keeping many connections busy can lock new
// callers out. QUIC handshakes in progress count against the maximum too:
// beyond it quic-go refuses new ones, and past a quarter of it a client
// must prove its address with a Retry round trip first, so that forged
// source addresses cannot fill the slots; quic-go bounds each handshake in
// time (5 seconds without a packet, 10 in all). A connection without a
// request in flight for [WithIdleTimeout] (10 minutes by default) is sent
// a goaway on every stream, so that its caller reconnects when it needs
// to; the wizard handshake on a stream must end within 10 seconds.
// Connections refused or closed for a limit, and streams that fail their
// handshake, are logged at Warn with the remote address, at most 10
// records of a kind every 10 seconds and then one that counts the others
// ("... N more suppressed").
//
// # UDP buffers
//
// Under load QUIC needs larger UDP socket buffers than most systems allow
// by default: quic-go asks for 7 MiB in each direction. On Linux an
// unprivileged process gets at most net.core.rmem_max and
// net.core.wmem_max; raise them once per host, and in /etc/sysctl.d to
// keep them across reboots:
//
//	sysctl -w net.core.rmem_max=7500000
//	sysctl -w net.core.wmem_max=7500000
//
// On BSDs and macOS, raise kern.ipc.maxsockbuf (sysctl -w
// kern.ipc.maxsockbuf=8441037). When a socket's buffers stay short, the
// transport logs a warning through [WithLogger] (then debug records).
// quic-go also prints one line of its own to the standard library's log
// package, once per process; since the transport's logger already reports
// the condition, set QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING=true in the
// environment to silence it.
//
// # Lifecycle and errors
//
// [New] checks every option and fails on the first invalid one, with an
// error that names it ("wizard: quic: WithStreams(17): want 0 for the
// default (4) or 1 to 16"). What it cannot know is reported later:
// [Transport.Listen] fails without a server certificate, and quic-go
// checks a [WithQUICConfig] configuration when the transport listens or
// dials.
//
// [Conn.Done] is closed when the QUIC connection ends: the peer closed it,
// it went silent past the keep-alive timeout or QUIC's idle timeout, a
// stream failed (a failed stream closes the whole connection, so that the
// node reconnects), or the server ended every stream. A goaway on any
// stream (the server's listener shutting down) refuses new calls on the
// whole connection as not sent, while the calls in flight on every stream
// finish. Errors before a request was written, dial errors included,
// match [runtime.ErrNotSent], so the node may retry the call elsewhere;
// they read "wizard: quic: dial <addr>: call not sent: <why>" or
// "wizard: quic: <addr>: call not sent: <why>". [Listener.Shutdown] stops
// accepting connections, sends goaway on every stream, lets the calls in
// flight finish and waits for clients to close their connections, then
// frees the UDP port; a node that restarts on the same port is found
// again by its clients, which redial with backoff.
//
// A malformed or oversized frame closes that connection with a logged
// reason, never the process.
package quic
