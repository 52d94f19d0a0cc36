package gateway

import (
	"crypto/rand"
	"encoding/hex"
)

// maxRequestID bounds a client's X-Request-Id.
const maxRequestID = 64

// requestID returns the client's request id when it is well-formed (1 to
// 64 bytes of letters, digits and "-_.:"), else a new random one.
func requestID(client string) string {
	if validRequestID(client) {
		return client
	}
	return newRequestID()
}

func validRequestID(s string) bool {
	if len(s) == 0 || len(s) > maxRequestID {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.', c == ':':
		default:
			return false
		}
	}
	return true
}

// newRequestID returns 16 random bytes in hex.
func newRequestID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand's contract since Go 1.24)
	return hex.EncodeToString(b[:])
}
