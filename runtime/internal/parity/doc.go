// Package parity holds the in-process/remote matrix: one handler suite
// served in-process, over TCP and over QUIC, called the same way in each,
// whose outcomes (the values a handler reads, error codes, messages and
// details, empty replies, panics) must be identical. It has tests only.
package parity
