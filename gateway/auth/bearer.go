package auth

import "strings"

// BearerToken returns the token of an Authorization header value
// ("Bearer <token>", the scheme case-insensitive, RFC 6750 §2.1). An empty
// value or another scheme is [ErrMissingToken]; "Bearer" without a token,
// or a token with characters outside token68, is [ErrMalformed].
func BearerToken(authorization string) (string, error) {
	scheme, token, _ := strings.Cut(strings.TrimSpace(authorization), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", ErrMissingToken
	}
	token = strings.TrimLeft(token, " ")
	if token == "" || !isToken68(token) {
		return "", ErrMalformed
	}
	return token, nil
}

// isToken68 reports whether s is RFC 7235's token68:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isToken68(s string) bool {
	end := len(s)
	for end > 0 && s[end-1] == '=' {
		end--
	}
	if end == 0 {
		return false
	}
	for i := range end {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == '_', c == '~', c == '+', c == '/':
		default:
			return false
		}
	}
	return true
}
