package main

import (
	"regexp"
)

// networkError matches what the go tool prints when it cannot reach a
// proxy or the checksum database.
var networkError = regexp.MustCompile(`dial tcp|no such host|network is unreachable|connection refused|i/o timeout|TLS handshake timeout`)
