// Package mux runs many concurrent request/response calls over one byte
// stream (a TCP connection, a QUIC stream), framed by package wire. The
// TCP and QUIC transports sit on it: [NewClient] on the dialing side,
// [Serve] on the accepting side.
//
// # Connection
//
// After the handshake (the client writes first; a server facing another
// version still answers, so that the client can name both versions) each
// side runs:
//
//   - one reader goroutine, which decodes frames and hands answers to the
//     waiting callers (client) or hands requests to workers (server: see
//     Bounds). On a TCP or TLS connection the server's reader serves
//     requests itself, sparing the wake of a worker: a lone request,
//     with nothing more to read behind it, and requests read together
//     while their handlers are fast (20µs on average; slower ones go to
//     workers, side by side). The answers of requests read together
//     leave together once nothing more is buffered to read, and like
//     a lone answer the reader writes them itself when the writer is
//     idle (direct.go). A handler that runs on past a short bound (at
//     most 200µs) keeps the call, and another goroutine reads on, so a
//     slow handler holds up the connection's other calls, and the
//     answers read before it, for that bound at most;
//   - one writer goroutine, which takes the whole write queue at once,
//     writes it into a buffered writer and flushes only when the queue is
//     empty, so that frames queued together leave in one write;
//   - one keep-alive goroutine (unless turned off), which pings the peer
//     and closes the connection when a ping goes unanswered for
//     [Options.KeepAliveTimeout] and nothing else came meanwhile. A peer
//     that stalls in the middle of a frame, or does not read, cannot
//     answer pings either, so it is closed the same way.
//
// Callers do not get goroutines: a call waits on its own channel, found by
// request id in the client's pending table. Encoding buffers and call
// records are pooled, and so are the stream's read and write buffers:
// a connection borrows them while bytes wait in them, so that an idle
// TCP connection holds neither (see streambuffer.go).
//
// Request ids are assigned by the client in the order frames enter the
// write queue, so they increase along the stream. This is what makes the
// two guarantees below exact.
//
// # Bounds
//
// What a connection costs the server is bounded, whatever the client
// sends. At most [Options.MaxInFlight] handlers run at once on it, on
// workers that serve one request after another; further requests wait in
// a queue, in order, and the reader goes on reading (it answers pings and
// applies cancels) until the waiting requests hold [Options.MaxQueued]
// bytes. Answers are queued for the writer at once; once they hold
// MaxQueued bytes no request starts, and the reader stops at the same
// bound. A stopped reader leaves the client's frames in the kernel, whose
// TCP window then holds the client back: a client that sends without
// reading costs at most twice MaxQueued plus an answer per handler
// running, and a goroutine per handler running. Every ping is answered:
// a client that pings faster than it reads the pongs is held back the
// same way. A connection made of several streams (a QUIC connection)
// shares these bounds among its streams ([Options.Bounds], see
// [Bounds]): its client gets no more room by opening more streams.
//
// Keep-alive counts any frame read as a sign of life, so that a pong
// queued behind other frames is not taken for a dead peer. A server whose
// reader stopped because requests wait for its handlers does not read its
// pongs either: keep-alive does not count that against the client, as
// long as its ping left. A client that does not read gets no ping
// through, and is closed as before. (A client that pipelines requests
// beyond what the server takes cannot tell a stopped reader from a dead
// server; its pings wait behind its requests, and while answers come it
// is not closed.)
//
// A request without a deadline gets [Options.ServeTimeout], so that every
// handler's context ends; a handler that runs on after its connection is
// lost (a request flagged [wire.FlagKeep]) runs at most to its deadline,
// and Serve returns only once it has. With [Options.Share], a request
// beyond its caller's share of the node's in-flight limit (see [Budget])
// is refused at once.
//
// # Errors
//
// A malformed, oversized or unexpected frame, a failed handshake, or a
// peer that does not answer pings closes that connection (never the
// process): the reason is logged through [Options.Logger] and returned by
// [Serve] or [Client.Err]. When a connection ends, each pending call fails
// with an error wrapping the reason and either [ErrNotSent] (the writer had
// not taken the request: it is safe to retry anywhere) or [ErrConnLost]
// (the request was written, or may have been, so the handler may have run).
// A client whose keep-alive finds its peer stalled (no answer to a ping,
// though the peer's host acknowledged it) keeps the connection but fails
// its idempotent calls ([wire.FlagIdempotent]) with [ErrStalled], so that
// they can go elsewhere rather than wait out their deadline.
//
// # Shutdown
//
// When the ctx given to [Serve] is done, the server sends a goaway frame
// carrying the highest request id it has taken. It serves no request with
// a higher id; the client fails those calls, and new ones, with
// [ErrGoingAway] (which wraps ErrNotSent), while the calls at or below the
// id finish. Once they have (or [Options.DrainTimeout] has passed, and the
// remaining handlers are cancelled) the server flushes and closes. Where
// the stream can close its sending side alone (TCP and TLS connections),
// it does that first and closes the rest once the client has closed its
// side, or the drain timeout ends: closing outright would answer requests
// that cross the goaway with a reset, and a reset makes the client's
// kernel drop answers it has not read yet.
//
// Handlers get a context that carries the request's deadline and ends when
// the caller cancels (a cancel frame), when the connection is lost, or
// when the handler returns. Responses to no-reply requests are never sent.
//
// # Streams
//
// A stream is a call that carries any number of messages each way, over
// the stream frames of package wire (stream-open, -data, -close, -end,
// -credit, -header, and cancel). Both sides announce the streams feature
// ([wire.FeatureStreams]) in their handshake; [Client.OpenStream] to a
// server whose handshake lacks it fails at once with
// [ErrStreamsUnsupported] and sends nothing, while unary calls go on
// between old and new peers. The client opens a stream with
// [Client.OpenStream] (its id comes from the requests' id space, and it
// goes through the write queue like a request); the server runs
// [Options.ServeStream], a [StreamHandler], on a goroutine of its own
// with a [ServerStream]. The server may send its headers once, before
// any message; the client half-closes with [ClientStream.CloseSend]
// (the server's Recv then returns io.EOF); the server ends the stream
// when its handler returns: the end carries a code (0 OK, else the
// handler's [*StreamError], canceled, deadline_exceeded, unknown for
// other errors, internal for a panic) and the trailers set with
// [ServerStream.SetTrailer]. The client's Recv returns the messages sent
// before the end, then io.EOF or the *StreamError; its Send after the
// end returns io.EOF (gRPC's rule: Recv tells the outcome).
//
// The client cancels a stream with a cancel frame carrying its id:
// [ClientStream.Cancel], or when OpenStream's ctx ends (the stream then
// fails with ctx's error on the client's side at once). The deadline of
// OpenStream's ctx travels in the open frame; the server ends the
// handler's ctx at it and ends the stream with deadline_exceeded. A
// stream without a deadline has none on the server either (gRPC's: no
// ServeTimeout for streams): it lives until one side ends it or the
// connection is lost. A stream is not sent again on another connection:
// the mux never retries one.
//
// Flow control is per stream and per direction, in bytes of message
// payloads, credit based like HTTP/2's stream windows. Each side starts
// with [wire.InitialWindow] (256 KiB) of credit for its data, the
// protocol's constant, which is not sent; a side whose receive window
// ([Options.StreamWindow], at least the initial window) is larger grants
// the difference with a stream-credit frame right after the open. A
// sender spends a message's cost when it sends it (its size plus
// [wire.MessageCost], 64 bytes: a window of tiny messages holds a few
// thousand of them, not 262,144), and may send when
// the message fits its credit, or when at least half the initial window
// is free, so that a message larger than the window still goes, alone
// (messages are not split: one data frame is one message, up to the
// frame limit). The receiver keeps received messages in a queue per
// stream until Recv takes them, and grants the bytes taken back once
// they reach half its window (grpc-go grants at a quarter; a larger
// step halves the credit frames). A receiver that stops reading
// therefore stops its sender (Send blocks, honouring its ctx), and holds
// at most its window plus one message per stream; the sender's own
// queued data is bounded the same way. With the default window, a
// receiver whose Recv keeps up with messages of 8 KiB or more on
// average (nothing queued when it grants) doubles its window at each
// grant, up to flow.MaxGrown (4 MiB), as long as the connection's
// streams together grew by less than flow.Budget (16 MiB): on a
// fast link the window, not the reader, then holds a stream of large
// messages back (HTTP/2 implementations grow theirs by a
// bandwidth-delay estimate). A stream's growth goes back to the budget
// when it ends. Small messages never grow it: their cost is per message,
// and larger windows would only queue more of them.
//
// The reader never waits on a stream's consumer: credit guarantees the
// queue's room. A peer that sends data beyond its credit breaks the
// protocol for that stream only, as HTTP/2 answers a stream's
// FLOW_CONTROL_ERROR with RST_STREAM: the data is dropped and the stream
// ends with resource_exhausted (the server ends it, and cancels its
// handler; the client cancels it), while the connection, its calls and
// its other streams go on. A malformed stream-credit frame is a
// malformed frame and closes the connection. Stream frames for a stream
// a side no longer knows (ended, cancelled) are dropped.
//
// Bounds: the server serves at most [Options.MaxStreams] (1,024) streams
// at once per connection; a stream opened beyond, or to a server without
// ServeStream, ends at once, its handler never run, with
// resource_exhausted (or unimplemented) in a stream-end flagged
// [wire.FlagRefused]. A stream's handler takes neither one of the
// MaxInFlight handler slots nor a part of the caller's share
// ([Options.Share]): a stream mostly waits on its peer, and holding a
// slot would let a few idle streams stop the connection's calls;
// MaxStreams bounds the goroutines instead. So a connection's streams hold at most MaxStreams x (window +
// one message) of received messages on the server, and as much of
// queued data to send. Stream frames other than data are control frames
// of a stream's life and go to the write queue without waiting for its
// room; data is bounded by credit. With [Options.Bounds] (a QUIC
// connection), MaxStreams still counts per stream of the connection.
//
// When the connection is lost, every open stream's pending and later
// Send and Recv fail at once on both sides with a [*CallError] ([ErrConnLost],
// or [ErrNotSent] on the client when the open never left), and the
// server's handlers' ctx ends. While streams are open the client's
// keep-alive watches the server as it does while calls wait
// ([Options.BusyKeepAlive]); the server's keep-alive bounds a silent
// client's streams to KeepAlive plus KeepAliveTimeout.
//
// On a graceful shutdown the goaway's id covers the streams opened so
// far: those with a higher id fail on the client with [ErrGoingAway], the
// others go on and the server waits for them as for requests, within
// [Options.DrainTimeout]; streams still open then end with the lost
// connection on both sides (a [*CallError] of kind [ErrConnLost], which
// callers report as unavailable), as grpc-go's Stop after a
// GracefulStop that ran out of time closes its transports.
package mux
