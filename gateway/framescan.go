package gateway

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// scanFrame decodes the common frame without reflection: valid JSON, one
// object whose keys are the frame's fields spelt exactly, string values
// without escapes (and valid UTF-8), an id string or null, any body, an
// integer timeout_ms. It reports false for anything else, which
// [decodeFrameJSON] then decodes (and refuses, or accepts as
// encoding/json would: another spelling of a field, escapes, a null);
// what it accepts decodes as there, FuzzScanFrame checks.
func scanFrame(data []byte) (inFrame, bool) {
	var f inFrame
	if !json.Valid(data) {
		return f, false
	}
	i := skipSpace(data, 0)
	if data[i] != '{' {
		return f, false
	}
	i = skipSpace(data, i+1)
	if data[i] == '}' {
		return f, true // valid JSON: nothing follows but space
	}
	for {
		// data is valid JSON: a key, ':', a value, then ',' or '}'.
		ks := i + 1
		i = skipString(data, i)
		key := data[ks : i-1]
		i = skipSpace(data, i)
		vs := skipSpace(data, i+1) // past ':'
		i = skipValue(data, vs)
		if !f.set(key, data[vs:i]) {
			return inFrame{}, false
		}
		i = skipSpace(data, i)
		if data[i] == '}' {
			return f, true
		}
		i = skipSpace(data, i+1) // past ','
	}
}

// set sets the field key to the JSON value v, or reports false when
// key or v is not of the common shape.
func (f *inFrame) set(key, v []byte) bool {
	switch string(key) {
	case "type":
		return plainString(v, &f.Type)
	case "id":
		if string(v) == "null" {
			f.ID = nil
			return true
		}
		var id string
		if !plainString(v, &id) {
			return false
		}
		f.ID = &id
		return true
	case "token":
		return plainString(v, &f.Token)
	case "method":
		return plainString(v, &f.Method)
	case "path":
		return plainString(v, &f.Path)
	case "body":
		f.Body = json.RawMessage(v)
		return true
	case "timeout_ms":
		for j, c := range v {
			if (c < '0' || c > '9') && (c != '-' || j > 0) {
				return false // a fraction, an exponent, null, another type
			}
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		f.TimeoutMs = n
		return err == nil
	}
	return false
}

// plainString stores the JSON string v in *dst when it has no escapes
// and is valid UTF-8 (encoding/json would replace invalid bytes).
func plainString(v []byte, dst *string) bool {
	if len(v) < 2 || v[0] != '"' {
		return false
	}
	s := v[1 : len(v)-1]
	for _, c := range s {
		if c == '\\' {
			return false
		}
	}
	if !utf8.Valid(s) {
		return false
	}
	*dst = string(s)
	return true
}

// The skips walk JSON that json.Valid accepted.

func skipSpace(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index past the string that starts at d[i].
func skipString(d []byte, i int) int {
	for i++; i < len(d); i++ {
		switch d[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(d)
}

// skipValue returns the index past the value that starts at d[i].
func skipValue(d []byte, i int) int {
	switch d[i] {
	case '"':
		return skipString(d, i)
	case '{', '[':
		depth := 0
		for i < len(d) {
			switch d[i] {
			case '"':
				i = skipString(d, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(d)
	}
	for i < len(d) { // a number, true, false or null
		switch d[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}
