package microwizard

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
)

// A JavaScript number is a float64: an integer beyond 2^53 that is not
// one of its values is rounded when Node.js parses it, silently. The
// transport refuses to send one; a 64-bit id crosses as a string (as
// protojson writes int64).

// maxExactDigits is the most digits every integer of which a float64
// holds exactly (2^53 has 16).
const maxExactDigits = 15

// checkIntegers refuses the JSON text b when it holds an integer
// JavaScript would round.
func checkIntegers(b []byte) error {
	if tok, ok := inexactInteger(b); ok {
		return fmt.Errorf("the integer %s is beyond what a JavaScript number holds exactly (2^53): send it as a string", clip(tok))
	}
	return nil
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// inexactInteger returns the first integer in the JSON text b that
// JavaScript would round, and whether there is one. Strings are skipped;
// numbers with a fraction or an exponent are left alone (JavaScript reads
// them as Go's float64 wrote them).
func inexactInteger(b []byte) (string, bool) {
	for i := 0; i < len(b); {
		switch c := b[i]; {
		case c == '"':
			i = skipString(b, i+1)
		case c == '-' || c >= '0' && c <= '9':
			j := i + 1
			for j < len(b) && (b[j] >= '0' && b[j] <= '9' || b[j] == '.' || b[j] == 'e' || b[j] == 'E' || b[j] == '+' || b[j] == '-') {
				j++
			}
			if tok := b[i:j]; !exactInteger(tok) {
				return string(tok), true
			}
			i = j
		default:
			i++
		}
	}
	return "", false
}

// skipString returns the index just past the string whose body starts
// at i.
func skipString(b []byte, i int) int {
	for {
		k := bytes.IndexAny(b[i:], `"\`)
		if k < 0 {
			return len(b)
		}
		i += k
		if b[i] == '"' {
			return i + 1
		}
		i += 2 // an escape
	}
}

// exactInteger reports whether the number tok is not an integer, or an
// integer a float64 holds exactly.
func exactInteger(tok []byte) bool {
	digits := bytes.TrimPrefix(tok, []byte("-"))
	if len(digits) <= maxExactDigits || bytes.ContainsAny(tok, ".eE") {
		return true
	}
	f, err := strconv.ParseFloat(string(digits), 64)
	return err == nil && strconv.FormatFloat(f, 'f', 0, 64) == string(digits)
}

// routeNumber is the routing form of a JSON number: written so that the
// node's pattern parser gives it JavaScript's string form, as MicroWizard
// routes it (`${v}`: 1e21 is "1e+21", 1.0 is "1", 2^53+1 is
// 9007199254740992). The parser keeps an integer literal verbatim and
// gives a number with an exponent its JavaScript form, so the number is
// written with one.
func routeNumber(raw []byte) string {
	f, err := strconv.ParseFloat(string(raw), 64)
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case err != nil:
		return string(raw)
	}
	return strconv.FormatFloat(f, 'e', -1, 64)
}
