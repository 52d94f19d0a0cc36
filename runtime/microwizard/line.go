package microwizard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/wizardmesh/wizard/runtime"
)

// The kinds of MicroWizard's lines ("k").
const (
	kindAct  = "a"   // act: args is the whole message
	kindActE = "aE"  // actE: p is the pattern, d the data
	kindRes  = "res" // an answer
)

// overloadMessage is the error message MicroWizard answers while it
// closes; its callers treat it as "try another".
const overloadMessage = "retry_later_err_overload"

// line is one line of MicroWizard's TCP protocol, either way: a request
// ({id, k, sync, args | p, d}), an answer ({id, k:"res", sync, res |
// error}) or a keep-alive ({h:1} asks, {h:2} answers).
type line struct {
	ID    string          `json:"id,omitempty"`
	K     string          `json:"k,omitempty"`
	Sync  *bool           `json:"sync,omitempty"`
	Args  json.RawMessage `json:"args,omitempty"`
	P     string          `json:"p,omitempty"`
	D     json.RawMessage `json:"d,omitempty"`
	Res   json.RawMessage `json:"res,omitempty"`
	Error *lineError      `json:"error,omitempty"`
	H     int             `json:"h,omitempty"`

	// Seneca's fields: kind is its "k", act its "args"; origin is the
	// caller's instance id, track the ids of the instances the call passed.
	Kind   string          `json:"kind,omitempty"`
	Origin string          `json:"origin,omitempty"`
	Accept string          `json:"accept,omitempty"`
	Track  []string        `json:"track,omitempty"`
	Time   *senecaTime     `json:"time,omitempty"`
	Act    json.RawMessage `json:"act,omitempty"`
}

// senecaTime is the timing a Seneca message carries, in Unix ms.
type senecaTime struct {
	ClientSent int64 `json:"client_sent,omitempty"`
	ListenRecv int64 `json:"listen_recv,omitempty"`
	ListenSent int64 `json:"listen_sent,omitempty"`
}

// lineError is an error as MicroWizard puts it on the wire: the error's
// own fields plus message and name. Wizard adds the gRPC code's name and
// never a stack; a stack received is dropped.
type lineError struct {
	Message string     `json:"message"`
	Name    string     `json:"name,omitempty"`
	Code    string     `json:"code,omitempty"`
	Orig    *lineError `json:"-"` // the error a Seneca error wraps (origError)
}

// UnmarshalJSON reads an error of any shape: an object (its message, or
// Seneca's msg when the message did not cross; name and a string code;
// the error it wraps, [origError]), or a bare string (MicroWizard's own
// 'invalid_json' answers are one).
func (e *lineError) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &e.Message)
	}
	var o map[string]json.RawMessage
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	e.Message, e.Name, e.Code = strField(o, "message"), strField(o, "name"), strField(o, "code")
	if e.Message == "" {
		e.Message = strField(o, "msg") // a Seneca error whose message is not an own field
	}
	e.Orig = origError(o)
	return nil
}

var (
	errNotObject = errors.New("not a JSON object")
	errNoID      = errors.New("a request without an id")
)

// decodeLine parses one line (without its newline). An error means the
// line is not JSON, or not an object, or a field has the wrong type: the
// original ends the connection on the first two.
func decodeLine(b []byte) (line, error) {
	var l line
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return l, errNotObject
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return l, err
	}
	return l, nil
}

// sync reports whether the line asks for an answer (the default).
func (l *line) sync() bool { return l.Sync == nil || *l.Sync }

// argsPattern is the pattern an act's args route by, as MicroWizard
// routes them: every root key with a string, number or boolean value
// (a number in JavaScript's string form, as MicroWizard routes it); keys
// ending in '$', nulls, objects and lists do not route. Keys that cannot
// be a wizard pattern key (empty, or holding ',', ':', '"' or white
// space) are left out, and so are keys no pattern of the node uses, when
// s tells them ([runtime.KeyRouter]): they change no route, and the
// node's pattern bounds apply to what routes, not to the data.
func argsPattern(args json.RawMessage, s runtime.Server) (string, error) {
	kr, _ := s.(runtime.KeyRouter)
	if !json.Valid(args) {
		// A decoder would take the first value of "{}0" and leave the
		// rest: the handler would get a payload that is not JSON.
		return "", fmt.Errorf("args: %w", errNotObject)
	}
	// Root values only: nested objects and lists stay raw, unparsed.
	var o map[string]json.RawMessage
	if err := json.Unmarshal(args, &o); err != nil || o == nil {
		return "", fmt.Errorf("args: %w", errNotObject)
	}
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		if k == "" || strings.HasSuffix(k, "$") || strings.ContainsAny(k, ",:\" \t\r\n") || kr != nil && !kr.RoutesBy(k) {
			continue
		}
		v, ok := scalar(o[k])
		if !ok {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte(':')
		b.WriteString(quoteValue(v))
	}
	return b.String(), nil
}

// scalar is the routing form of a root JSON value: a string as is, a
// boolean as true or false, a number as [routeNumber] writes it;
// false for null, objects and lists.
func scalar(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 {
		return "", false
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		return s, json.Unmarshal(raw, &s) == nil
	case c == 't':
		return "true", true
	case c == 'f':
		return "false", true
	case c == '-' || c >= '0' && c <= '9':
		return routeNumber(raw), true
	}
	return "", false
}

// quoteValue quotes v for a pattern string when it needs it.
func quoteValue(v string) string {
	if v != "" && !strings.ContainsAny(v, ",:\"\\ \t\r\n") {
		return v
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
}

// ErrorName returns the name of the Node.js error err came from
// ("TypeError", "Error"), as MicroWizard or Seneca sent it, or "".
func ErrorName(err error) string {
	var e *runtime.Error
	if !errors.As(err, &e) {
		return ""
	}
	for _, d := range e.Details {
		if s, ok := d.(*structpb.Struct); ok {
			if v, ok := s.Fields["name"]; ok {
				return v.GetStringValue()
			}
		}
	}
	return ""
}

// codeByName maps a gRPC code's name back to the code.
func codeByName(s string) (runtime.Code, bool) {
	for c := runtime.CodeCanceled; c <= runtime.CodeUnauthenticated; c++ {
		if c.String() == s {
			return c, true
		}
	}
	return 0, false
}

// toLineError is what a failed reply says to MicroWizard: its message, the
// name it came with from Node.js (else "Error"), its code's name; a
// refusal says retry_later_err_overload, as a closing MicroWizard does.
func toLineError(m *runtime.Message) *lineError {
	if m.Flags&runtime.FlagRefused != 0 && (m.Code == runtime.CodeResourceExhausted || m.Code == runtime.CodeUnavailable) {
		return &lineError{Message: overloadMessage, Name: "Error", Code: m.Code.String()}
	}
	e := &lineError{Message: m.Error, Name: "Error", Code: m.Code.String()}
	if len(m.Payload) > 0 {
		if n := ErrorName(&runtime.Error{Details: decodeDetails(m.Payload)}); n != "" {
			e.Name = n
		}
	}
	return e
}

// fromLineError is the failed reply for an error MicroWizard answered.
func fromLineError(e *lineError) *runtime.Message {
	if e.Message == overloadMessage {
		return &runtime.Message{Code: runtime.CodeResourceExhausted, Error: "wizard: microwizard: the remote node is overloaded or closing (" + overloadMessage + ")", Flags: runtime.FlagRefused}
	}
	code, ok := runtime.CodeUnknown, false
	if e.Orig != nil {
		code, ok = codeByName(e.Orig.Code) // a Go error that a Seneca action passed on
	}
	if !ok {
		code, ok = codeByName(e.Code)
	}
	if !ok && e.Code == "act_not_found" {
		code, ok = runtime.CodeNotFound, true // Seneca's no-match
	}
	if !ok {
		code = runtime.CodeUnknown
	}
	m := &runtime.Message{Code: code, Error: e.Message}
	if e.Name != "" || e.Orig != nil {
		m.Payload = encodeDetails(errorDetail(e))
	}
	return m
}

// jsonOf returns a payload as JSON: JSON as is, protobuf through
// protojson (its type named by typ, which must be linked in), nothing as
// null.
func jsonOf(codec runtime.Codec, payload []byte, typ string) (json.RawMessage, error) {
	switch codec {
	case runtime.CodecNone:
		return nil, nil
	case runtime.CodecJSON:
		return payload, nil
	case runtime.CodecProto:
		mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(typ))
		if err != nil {
			return nil, fmt.Errorf("protobuf payload of unknown type %q", typ)
		}
		m := mt.New().Interface()
		if err := proto.Unmarshal(payload, m); err != nil {
			return nil, fmt.Errorf("decode %s: %w", typ, err)
		}
		return protojson.Marshal(m)
	}
	return nil, fmt.Errorf("unknown codec %d", codec)
}
