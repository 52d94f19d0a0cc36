package quic

// MaxConnWindow is a connection's QUIC receive window at most, for the
// bounds tests.
const MaxConnWindow = maxConnWindow

// MaxStreams is how many streams a client may open at once.
const MaxStreams = maxStreams
