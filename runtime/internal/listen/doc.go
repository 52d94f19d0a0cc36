// Package listen is what the stream transports, runtime/tcp and
// runtime/quic, share: the settings that their options of the same name
// set ([Config], [Option], [Apply]) and the bookkeeping of a listener's
// connections ([Conns]): admission within the connection limits, the
// node's in-flight limit shared among connections, and the goaway, drain
// and close of a shutdown. How a transport accepts, reads and closes its
// connections stays its own.
package listen
