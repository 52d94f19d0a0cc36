package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Response is a handler's answer with what HTTP says besides its body:
// the status of a successful answer, headers and cookies. A handler
// returns it (or, in any language, its JSON form) and the gateway answers
// with Body as the JSON body:
//
//	return gateway.Response{Status: http.StatusCreated, Header: http.Header{"Location": {"/api/users/7"}}, Body: user}, nil
//
// Its JSON form is the response metadata envelope, an object of exactly
// two keys (http$ is metadata, as every key ending in '$'):
//
//	{"http$": {"status": 201, "header": {"Location": ["/api/users/7"]},
//	           "cookies": ["sid=abc; Path=/; HttpOnly; Secure"]},
//	 "body": {...}}
//
// Status is a 2xx with a body (not 204 or 205); 0 is 200. Cookies are
// Set-Cookie values. The gateway's own headers cannot be set: the
// framing and hop-by-hop headers, Content-Type, X-Request-Id, Vary,
// Retry-After, WWW-Authenticate, the Access-Control-* headers, and
// Set-Cookie (give Cookies). An envelope that breaks these rules is the
// handler's error: the client gets 500 and the log says why. Over a
// WebSocket the status is the res frame's; headers and cookies have no
// place there and are left out.
type Response struct {
	Status  int
	Header  http.Header
	Cookies []*http.Cookie
	Body    any
}

// responseKey is the envelope's metadata key.
const responseKey = "http$"

// responseMeta is the envelope's http$ object.
type responseMeta struct {
	Status  int         `json:"status,omitempty"`
	Header  http.Header `json:"header,omitempty"`
	Cookies []string    `json:"cookies,omitempty"`
}

// MarshalJSON returns the envelope.
func (r Response) MarshalJSON() ([]byte, error) {
	m := responseMeta{Status: r.Status, Header: r.Header}
	for _, c := range r.Cookies {
		m.Cookies = append(m.Cookies, c.String())
	}
	return json.Marshal(struct {
		Meta responseMeta `json:"http$"`
		Body any          `json:"body"`
	}{m, r.Body})
}

// reply is a successful answer: its JSON body and, from an envelope, its
// status (0: 200), headers and cookies.
type reply struct {
	body    json.RawMessage
	status  int
	header  http.Header
	cookies []string
	// streamed says the answer was a stream, written already.
	streamed bool
}

// replyOf reads an answer: an envelope's body and metadata, checked, or
// any other JSON as the body.
func replyOf(out json.RawMessage) (reply, error) {
	if !bytes.Contains(out, []byte(`"`+responseKey+`"`)) {
		return reply{body: out}, nil
	}
	var env map[string]json.RawMessage
	if json.Unmarshal(out, &env) != nil || len(env) != 2 || env[responseKey] == nil || env["body"] == nil {
		return reply{body: out}, nil // not an envelope: http$ is nested, or beside other keys
	}
	var m responseMeta
	dec := json.NewDecoder(bytes.NewReader(env[responseKey]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return reply{}, fmt.Errorf("the response metadata (%s) does not decode: %w", responseKey, err)
	}
	if err := m.check(); err != nil {
		return reply{}, err
	}
	return reply{body: env["body"], status: m.Status, header: m.Header, cookies: m.Cookies}, nil
}

// check refuses a status that is not a successful answer with a body,
// a header of the gateway's own, and a cookie that does not parse.
func (m *responseMeta) check() error {
	if m.Status != 0 && (m.Status < 200 || m.Status > 299 || m.Status == http.StatusNoContent || m.Status == http.StatusResetContent) {
		return fmt.Errorf("status %d: a handler's answer may be a 2xx with a body only (errors are returned as errors)", m.Status)
	}
	for k := range m.Header {
		if protectedHeader(k) {
			return fmt.Errorf("header %q is the gateway's own", k)
		}
	}
	for _, c := range m.Cookies {
		if _, err := http.ParseSetCookie(c); err != nil {
			return fmt.Errorf("cookie %q: %w", clipString(c, 64), err)
		}
	}
	return nil
}

// protectedHeaders are the headers a handler cannot set (canonical).
var protectedHeaders = map[string]bool{
	"Content-Type": true, "Content-Length": true, "Content-Encoding": true, "Transfer-Encoding": true,
	"Connection": true, "Keep-Alive": true, "Upgrade": true, "Te": true, "Trailer": true,
	"Proxy-Authenticate": true, "Proxy-Connection": true, "Date": true,
	"X-Request-Id": true, "Vary": true, "Retry-After": true, "Www-Authenticate": true, "Set-Cookie": true,
}

func protectedHeader(k string) bool {
	k = http.CanonicalHeaderKey(k)
	return protectedHeaders[k] || strings.HasPrefix(k, "Access-Control-")
}

// setHeaders adds the reply's headers and cookies to h.
func (r *reply) setHeaders(h http.Header) {
	for k, vs := range r.header {
		k = http.CanonicalHeaderKey(k)
		h[k] = append(h[k], vs...)
	}
	for _, c := range r.cookies {
		h.Add("Set-Cookie", c)
	}
}

// statusOr is the reply's status, 200 by default.
func (r *reply) statusOr() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// dateValue is the Date header's value for one second.
type dateValue struct {
	sec int64
	v   []string // shared by the answers of that second: never modified
}

// dates holds the Date value of the second an answer was last written in.
var dates atomic.Pointer[dateValue]

// dateHeader returns the Date header's value for now, formatted once a
// second instead of once an answer (net/http formats it for every answer
// that has none).
func dateHeader(now time.Time) []string {
	sec := now.Unix()
	if d := dates.Load(); d != nil && d.sec == sec {
		return d.v
	}
	d := &dateValue{sec: sec, v: []string{now.UTC().Format(http.TimeFormat)}}
	dates.Store(d)
	return d.v
}
