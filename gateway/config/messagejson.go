package config

import (
	"encoding/json"
	"net/url"
	"unicode/utf8"

	"github.com/wizardmesh/wizard/gateway/internal/jsonscan"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// AppendMessageJSON appends to dst, as one JSON object, the message
// [Match.Message] builds, with the pattern's pairs added as
// [runtime.Node.Act] overlays them: what a handler in another process
// receives. It writes the body's own JSON text instead of decoding and
// encoding it again, and only for the common request: no body, or a
// valid JSON object whose keys need no unescaping and appear once, no
// field the client may not set. For anything else it reports false and
// dst unchanged: call Message then, which builds the message or says
// what is wrong.
//
// The two agree on the message (FuzzAppendMessageJSON checks it): the
// same fields and values, numbers in the body's own text.
func (m *Match) AppendMessageJSON(dst []byte, query url.Values, body []byte) ([]byte, bool) {
	r := m.Route
	p, pairs := r.pat.fixedPat, r.pat.fixedPairs
	if r.pat.fixed == "" {
		var err error
		if p, err = pattern.Parse(m.Pattern); err != nil {
			return dst, false
		}
		pairs = p.Pairs()
	}
	out := append(dst, '{')
	n := 0 // fields written
	field := func(k string) {
		if n > 0 {
			out = append(out, ',')
		}
		n++
		out = appendJSONString(out, k)
		out = append(out, ':')
	}
	// The body's keys, for the query's duplicates: slices of the body, in
	// room on the stack for the common few.
	var room [16][]byte
	keys := room[:0]
	if b := jsonscan.Trim(body); len(b) > 0 {
		if !jsonscan.Valid(b) {
			return dst, false
		}
		if r.Body != "" {
			field(r.Body)
			out = append(out, b...)
		} else {
			if b[0] != '{' {
				return dst, false
			}
			var ok bool
			if out, keys, ok = appendMembers(out, b, m, keys); !ok {
				return dst, false
			}
			n += len(keys)
		}
	}
	for k, vs := range query {
		if m.refuse(k) != "" || contains(keys, k) || (r.Body != "" && k == r.Body) {
			return dst, false
		}
		field(k)
		if len(vs) == 1 {
			out = appendJSONString(out, vs[0])
			continue
		}
		out = append(out, '[')
		for i, v := range vs {
			if i > 0 {
				out = append(out, ',')
			}
			out = appendJSONString(out, v)
		}
		out = append(out, ']')
	}
	for i, v := range m.vals {
		k := r.path.vars[i]
		if _, inPattern := p.Get(k); inPattern {
			continue // the pattern's pair is written below, and wins
		}
		field(k)
		out = appendJSONString(out, v)
	}
	if r.pat.fixed != "" && len(r.pat.fixedJSON) > 0 {
		if n > 0 {
			out = append(out, ',')
		}
		return append(append(out, r.pat.fixedJSON...), '}'), true
	}
	for _, pr := range pairs {
		field(pr.Key)
		out = appendJSONString(out, pr.Value)
	}
	return append(out, '}'), true
}

// appendMembers appends the members of the JSON object obj (valid JSON)
// to out, each key checked against what m refuses, and returns the keys
// (slices of obj) appended to keys; false for a key that needs
// unescaping, appears twice or is refused.
func appendMembers(out, obj []byte, m *Match, keys [][]byte) ([]byte, [][]byte, bool) {
	i := jsonscan.Space(obj, 1)
	if obj[i] == '}' {
		return out, keys, true
	}
	first := len(keys)
	for {
		ks := i
		i = jsonscan.String(obj, i)
		raw := obj[ks+1 : i-1]
		for _, c := range raw {
			if c == '\\' {
				return out, nil, false
			}
		}
		if !utf8.Valid(raw) {
			return out, nil, false // encoding/json would replace the bytes
		}
		// string(raw) in the call, not kept: no copy for a short key.
		if m.refuse(string(raw)) != "" || containsBytes(keys[first:], raw) {
			return out, nil, false
		}
		keys = append(keys, raw)
		i = jsonscan.Space(obj, i)
		vs := jsonscan.Space(obj, i+1) // past ':'
		i = jsonscan.Value(obj, vs)
		if len(keys) > first+1 {
			out = append(out, ',')
		}
		out = append(append(append(out, obj[ks:ks+len(raw)+2]...), ':'), obj[vs:i]...)
		i = jsonscan.Space(obj, i)
		if obj[i] == '}' {
			return out, keys, true
		}
		i = jsonscan.Space(obj, i+1) // past ','
	}
}

func contains(keys [][]byte, k string) bool {
	for _, s := range keys {
		if string(s) == k {
			return true
		}
	}
	return false
}

func containsBytes(keys [][]byte, k []byte) bool {
	for _, s := range keys {
		if string(s) == string(k) {
			return true
		}
	}
	return false
}

// appendJSONString appends s as a JSON string, as json.Marshal writes it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	return append(append(append(b, '"'), s...), '"')
}
