package gateway

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/wizardmesh/wizard/gateway/internal/jsonscan"
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
	if !jsonscan.Valid(data) {
		return f, false
	}
	i := jsonscan.Space(data, 0)
	if data[i] != '{' {
		return f, false
	}
	i = jsonscan.Space(data, i+1)
	if data[i] == '}' {
		return f, true // valid JSON: nothing follows but space
	}
	for {
		// data is valid JSON: a key, ':', a value, then ',' or '}'.
		ks := i + 1
		i = jsonscan.String(data, i)
		key := data[ks : i-1]
		i = jsonscan.Space(data, i)
		vs := jsonscan.Space(data, i+1) // past ':'
		i = jsonscan.Value(data, vs)
		if !f.set(key, data[vs:i]) {
			return inFrame{}, false
		}
		i = jsonscan.Space(data, i)
		if data[i] == '}' {
			return f, true
		}
		i = jsonscan.Space(data, i+1) // past ','
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
	case "pattern":
		return plainString(v, &f.Pattern)
	case "route":
		return plainString(v, &f.Route)
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
