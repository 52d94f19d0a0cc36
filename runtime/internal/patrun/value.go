package patrun

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// RouteValue converts a message value to the string it routes by. Only
// scalars route: strings, booleans, integers and floats (and json.Number).
// nil, maps, slices and structs do not.
func RouteValue(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		if x {
			return "true", true
		}
		return "false", true
	case int:
		return strconv.FormatInt(int64(x), 10), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case int32:
		return strconv.FormatInt(int64(x), 10), true
	case int16:
		return strconv.FormatInt(int64(x), 10), true
	case int8:
		return strconv.FormatInt(int64(x), 10), true
	case uint:
		return strconv.FormatUint(uint64(x), 10), true
	case uint64:
		return strconv.FormatUint(x, 10), true
	case uint32:
		return strconv.FormatUint(uint64(x), 10), true
	case uint16:
		return strconv.FormatUint(uint64(x), 10), true
	case uint8:
		return strconv.FormatUint(uint64(x), 10), true
	case float64:
		return FormatNumber(x), true
	case float32:
		return formatNumber32(x), true
	case json.Number:
		return normalizeBare(string(x)), true
	case nil:
		return "", false
	}
	return namedValue(v)
}

// namedValue routes values of named scalar types (type Cmd string) by their
// underlying kind; a protobuf enum routes by its value name, as in protobuf
// messages.
func namedValue(v any) (string, bool) {
	if e, ok := v.(protoreflect.Enum); ok {
		if ev := e.Descriptor().Values().ByNumber(e.Number()); ev != nil {
			return string(ev.Name()), true
		}
		return strconv.FormatInt(int64(e.Number()), 10), true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.String:
		return rv.String(), true
	case reflect.Bool:
		return strconv.FormatBool(rv.Bool()), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(rv.Int(), 10), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(rv.Uint(), 10), true
	case reflect.Float32:
		return formatNumber32(float32(rv.Float())), true
	case reflect.Float64:
		return FormatNumber(rv.Float()), true
	}
	return "", false
}

// normalizeBare normalises an unquoted pattern value: JSON numbers take
// their JavaScript form, anything else is returned unchanged.
func normalizeBare(s string) string {
	switch NumberKind(s) {
	case NumInt:
		if s == "-0" {
			return "0"
		}
		return s
	case NumFloat:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil && !math.IsInf(f, 0) {
			return s
		}
		return FormatNumber(f)
	}
	return s
}

const (
	NumNone = iota
	NumInt
	NumFloat
)

// NumberKind classifies s by JSON's number grammar:
// -?(0|[1-9]digits)[.digits][(e|E)[+-]digits]. Like JSON, a leading zero
// followed by a digit is not a number (007 stays the string "007").
func NumberKind(s string) int {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	start := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	if i == start || (s[start] == '0' && i-start > 1) {
		return NumNone
	}
	if i == len(s) {
		return NumInt
	}
	if s[i] == '.' {
		i++
		fs := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == fs {
			return NumNone
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		es := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == es {
			return NumNone
		}
	}
	if i != len(s) {
		return NumNone
	}
	return NumFloat
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// formatNumber32 formats a float32 by its own shortest digits, so
// float32(0.1) routes as "0.1", like the float64 0.1.
func formatNumber32(x float32) string {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(x), 'g', -1, 32), 64)
	return FormatNumber(f)
}

// FormatNumber formats f as JavaScript's Number.prototype.toString does, so
// that values sent by Seneca or MicroWizard peers compare equal.
func FormatNumber(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		return "0"
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	// Shortest round-trip digits and exponent, then JavaScript's layout.
	e := strconv.FormatFloat(f, 'e', -1, 64) // [-]d[.ddd]e±xx
	neg := e[0] == '-'
	if neg {
		e = e[1:]
	}
	ePos := strings.IndexByte(e, 'e')
	mant, exp := e[:ePos], e[ePos+1:]
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	k := len(digits)
	n := x + 1 // position of the decimal point relative to the digits
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	switch {
	case k <= n && n <= 21:
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", n-k))
	case 0 < n && n <= 21:
		b.WriteString(digits[:n])
		b.WriteByte('.')
		b.WriteString(digits[n:])
	case -6 < n && n <= 0:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -n))
		b.WriteString(digits)
	default:
		b.WriteByte(digits[0])
		if k > 1 {
			b.WriteByte('.')
			b.WriteString(digits[1:])
		}
		b.WriteByte('e')
		if n-1 >= 0 {
			b.WriteByte('+')
		}
		b.WriteString(strconv.Itoa(n - 1))
	}
	return b.String()
}

// GlobMatch reports whether s matches glob, where * matches any run of
// characters (including none) and ? exactly one character.
func GlobMatch(glob, s string) bool {
	gi, si := 0, 0
	starG, starS := -1, 0
	for si < len(s) {
		if gi < len(glob) {
			switch glob[gi] {
			case '*':
				starG, starS = gi, si
				gi++
				continue
			case '?':
				_, w := utf8.DecodeRuneInString(s[si:])
				gi++
				si += w
				continue
			default:
				if glob[gi] == s[si] {
					gi++
					si++
					continue
				}
			}
		}
		if starG < 0 {
			return false
		}
		// Let the last star swallow one more character and retry.
		_, w := utf8.DecodeRuneInString(s[starS:])
		starS += w
		gi, si = starG+1, starS
	}
	for gi < len(glob) && glob[gi] == '*' {
		gi++
	}
	return gi == len(glob)
}
