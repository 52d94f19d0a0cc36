package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"strconv"
	"strings"
)

// Match is a request matched to a route by [Table.Match].
type Match struct {
	// Route is the route matched, as the file gave it with defaults
	// applied. It belongs to the table: do not modify it.
	Route *Route
	// Pattern is the route's pattern with the variables' values filled
	// in, in canonical form: what the call is routed by (as
	// [runtime.Node.Act] takes it).
	Pattern string

	vals []string // the path variables' values, in the template's order
	room [8]string
}

// Var returns the value of the path variable name.
func (m *Match) Var(name string) (string, bool) {
	if i := m.Route.path.varIndex(name); i >= 0 {
		return m.vals[i], true
	}
	return "", false
}

// Vars returns the path variables and their values.
func (m *Match) Vars() map[string]string {
	vs := make(map[string]string, len(m.vals))
	for i, v := range m.vals {
		vs[m.Route.path.vars[i]] = v
	}
	return vs
}

// Message builds the call's message from the path variables, the query
// and the request's JSON body (nil or blank for none).
//
// Without the route's body option, the body must be a JSON object and its
// fields join the message root with the path variables and the query
// parameters (one value: a string; repeated: a list of strings). With it,
// the body (any JSON value) goes under that one field. Numbers stay
// [json.Number]. The pattern's pairs are not added: [runtime.Node.Act]
// overlays them.
//
// The client cannot set what the route fixes: a field named like a
// pattern key, a path variable or the body field is a 400
// [*RequestError] naming it, as is a field in both the query and the
// body, a field ending in '$' (wizard's metadata keys) and an empty
// field name. When several fields are wrong, the error names the first
// in byte order.
func (m *Match) Message(query url.Values, body []byte) (map[string]any, error) {
	var msg map[string]any
	r := m.Route
	if len(bytes.TrimSpace(body)) > 0 {
		v, err := decodeBody(body)
		if err != nil {
			return nil, err
		}
		if r.Body != "" {
			msg = map[string]any{r.Body: v}
		} else {
			obj, ok := v.(map[string]any)
			if !ok {
				return nil, badRequest("body must be a JSON object, not "+jsonKind(v)+": its fields join the message", "")
			}
			if err := checkFields(m, obj, nil, "body"); err != nil {
				return nil, err
			}
			msg = obj
		}
	}
	if msg == nil {
		msg = make(map[string]any, len(m.vals)+len(query))
	}
	if err := checkFields(m, query, msg, "query"); err != nil {
		return nil, err
	}
	for k, vs := range query {
		if len(vs) == 1 {
			msg[k] = vs[0]
			continue
		}
		l := make([]any, len(vs))
		for i, v := range vs {
			l[i] = v
		}
		msg[k] = l
	}
	for i, v := range m.vals {
		msg[r.path.vars[i]] = v
	}
	return msg, nil
}

// checkFields returns the error for the first field of fields (in byte
// order) that the client may not set; present holds fields set already
// (from the body), which the query may not repeat.
func checkFields[V any](m *Match, fields map[string]V, present map[string]any, from string) error {
	bad, why := "", ""
	for k := range fields {
		if why != "" && k >= bad {
			continue
		}
		if w := m.refuse(k); w != "" {
			bad, why = k, w
		} else if _, dup := present[k]; dup {
			bad, why = k, "is in both the query and the body"
		}
	}
	if why == "" {
		return nil
	}
	return badRequest(from+" field "+strconv.Quote(clip(bad))+" "+why, bad)
}

// refuse says why the client may not set field k, or "".
func (m *Match) refuse(k string) string {
	r := m.Route
	switch {
	case k == "":
		return "has no name"
	case strings.HasSuffix(k, "$"):
		return "ends in '$': such keys are wizard's metadata"
	case r.path.varIndex(k) >= 0:
		return "is set by the path's {" + k + "}"
	case r.Body != "" && k == r.Body:
		return "is the route's body field"
	}
	for _, pp := range r.pat.pairs {
		if pp.key == k {
			return "is set by the route's pattern"
		}
	}
	return ""
}

// decodeBody decodes one JSON value, numbers as json.Number.
func decodeBody(body []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, badRequest("body is not valid JSON: "+jsonError(err), "")
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, badRequest("body holds more than one JSON value", "")
	}
	return v, nil
}

// jsonError is err's text without the package's prefix.
func jsonError(err error) string {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// jsonKind names the kind of a decoded JSON value.
func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}
