package connset

import "time"

// The defaults of [Resolve].
const (
	// DefaultIdle is how long a connection may stay without a request in
	// flight by default.
	DefaultIdle = 10 * time.Minute

	// defaultMaxCap bounds the default maximum: an idle connection costs
	// some 70 KB (its buffers and goroutines), so 4096 of them about
	// 300 MB, which a small node can spare.
	defaultMaxCap = 4096

	// reserveShare is the part of the maximum (one in reserveShare) kept
	// for IPs with few connections.
	reserveShare = 8
)

// DefaultMax returns the default maximum number of connections of a
// listener: half the process's file-descriptor limit (the soft
// RLIMIT_NOFILE, which Go raises to the hard limit at start on Linux and
// macOS), leaving the other half to outgoing connections, gossip and
// files; at most 4096, at least 1. Where the limit cannot be read it is
// 4096.
func DefaultMax() int {
	n, ok := fileLimit()
	if !ok {
		return defaultMaxCap
	}
	return int(max(1, min(n/2, defaultMaxCap)))
}

// Resolve returns the limits for a listener's options, 0 meaning the
// default for each: max [DefaultMax], perIP a quarter of the maximum
// (at least 1), idle [DefaultIdle] (negative: no idle timeout). perIP is
// at most the maximum. An eighth of the maximum is kept in reserve for
// IPs with fewer than [FewConns] connections.
func Resolve(maxConns, perIP int, idle time.Duration) Limits {
	if maxConns == 0 {
		maxConns = DefaultMax()
	}
	if perIP == 0 {
		perIP = max(1, maxConns/4)
	}
	switch {
	case idle == 0:
		idle = DefaultIdle
	case idle < 0:
		idle = 0
	}
	return Limits{Max: maxConns, MaxPerIP: min(perIP, maxConns), Reserve: maxConns / reserveShare, Idle: idle}
}
