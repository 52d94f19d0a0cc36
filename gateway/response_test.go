package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/wizardmesh/wizard/runtime"
)

// respondGateway is the test gateway with a route to a handler on
// another node that answers with the Response its "case" names.
func respondGateway(t *testing.T) *testGateway {
	t.Helper()
	b := newBackend(t)
	cases := map[string]Response{
		"created": {
			Status:  http.StatusCreated,
			Header:  http.Header{"Location": {"/api/users/7"}, "x-custom": {"a", "b"}},
			Cookies: []*http.Cookie{{Name: "sid", Value: "abc", Path: "/", HttpOnly: true, Secure: true}},
			Body:    map[string]any{"id": 7},
		},
		"plain":        {Body: []int{1, 2}},
		"request id":   {Header: http.Header{"X-Request-Id": {"forged"}}, Body: 1},
		"cors":         {Header: http.Header{"Access-Control-Allow-Origin": {"*"}}, Body: 1},
		"content type": {Header: http.Header{"content-type": {"text/html"}}, Body: 1},
		"set-cookie":   {Header: http.Header{"Set-Cookie": {"admin=1"}}, Body: 1},
		"redirect":     {Status: http.StatusFound, Body: 1},
		"no content":   {Status: http.StatusNoContent, Body: 1},
		"error status": {Status: http.StatusTeapot, Body: 1},
		"bad cookie":   {Cookies: []*http.Cookie{{Name: "", Value: "x"}}, Body: 1},
	}
	if err := b.svc.Add("role:t,cmd:respond", func(ctx context.Context, req runtime.Request) (any, error) {
		name, _ := req.String("case")
		switch name {
		case "nested":
			return map[string]any{"data": map[string]any{"http$": map[string]any{"status": 201}}}, nil
		case "json form": // as a handler in another language writes it
			return map[string]any{"http$": map[string]any{"status": 202, "header": map[string]any{"Location": []string{"/jobs/1"}}}, "body": map[string]any{"id": 1}}, nil
		}
		return cases[name], nil
	}); err != nil {
		t.Fatal(err)
	}
	routes := append(testRoutes(), route("POST", "/respond", "role:t,cmd:respond", policy{auth: authNone}))
	return newTestGatewayOn(t, b, gatewayNode(t, b), routes, settings{})
}

// TestResponseMetadata: a handler's Response sets the status, headers and
// cookies of its successful answer, over HTTP and (the status) over a
// WebSocket; the gateway's own headers, and statuses other than a 2xx
// with a body, are refused (500); http$ elsewhere than the root is data.
func TestResponseMetadata(t *testing.T) {
	tg := respondGateway(t)
	post := func(name string) (*http.Response, string) {
		t.Helper()
		res, err := http.Post(tg.base+"/respond", "application/json", strings.NewReader(`{"case":"`+name+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	res, body := post("created")
	got := map[string]string{
		"status": res.Status, "body": body, "Location": res.Header.Get("Location"),
		"X-Custom": strings.Join(res.Header.Values("X-Custom"), ","), "Set-Cookie": res.Header.Get("Set-Cookie"),
		"Content-Type": res.Header.Get("Content-Type"), "has X-Request-Id": boolString(res.Header.Get("X-Request-Id") != ""),
	}
	want := map[string]string{
		"status": "201 Created", "body": `{"id":7}`, "Location": "/api/users/7",
		"X-Custom": "a,b", "Set-Cookie": "sid=abc; Path=/; HttpOnly; Secure",
		"Content-Type": "application/json", "has X-Request-Id": "true",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("created (-want +got):\n%s", d)
	}
	if res, body := post("json form"); res.StatusCode != 202 || res.Header.Get("Location") != "/jobs/1" || body != `{"id":1}` {
		t.Errorf("json form: %d, Location %q, %s; want 202, /jobs/1, {\"id\":1}", res.StatusCode, res.Header.Get("Location"), body)
	}
	for name, want := range map[string]string{"plain": `[1,2]`, "nested": `{"data":{"http$":{"status":201}}}`} {
		if res, body := post(name); res.StatusCode != 200 || body != want {
			t.Errorf("%s: %d %s, want 200 %s", name, res.StatusCode, body, want)
		}
	}
	for _, name := range []string{"request id", "cors", "content type", "set-cookie", "redirect", "no content", "error status", "bad cookie"} {
		if res, body := post(name); res.StatusCode != 500 || res.Header.Get("Location") != "" || strings.Contains(body, "forged") {
			t.Errorf("%s: %d %s, want 500", name, res.StatusCode, body)
		}
	}

	c := dialWS(t, tg.ws, nil)
	sendFrame(t, c, map[string]any{"type": "req", "id": "1", "method": "POST", "path": "/respond", "body": map[string]any{"case": "created"}})
	f := mustReadFrame(t, c)
	var b map[string]any
	json.Unmarshal(f.Body, &b)
	if f.Status != 201 || b["id"] != 7.0 {
		t.Errorf("over a WebSocket: %+v (body %s), want 201 with the body", f, f.Body)
	}
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// TestDateHeader: the Date of an answer is net/http's format of the
// second it is written in, made once a second.
func TestDateHeader(t *testing.T) {
	now := time.Date(2026, 12, 3, 8, 1, 2, 300, time.FixedZone("x", 3600))
	a := dateHeader(now)
	if want := now.UTC().Format(http.TimeFormat); len(a) != 1 || a[0] != want {
		t.Fatalf("Date %q, want %q", a, want)
	}
	if b := dateHeader(now.Add(500 * time.Millisecond)); &b[0] != &a[0] {
		t.Error("the same second's Date formatted again")
	}
	if c := dateHeader(now.Add(time.Second)); c[0] != now.Add(time.Second).UTC().Format(http.TimeFormat) {
		t.Errorf("the next second's Date: %q", c)
	}
	// Served: one Date, of the time of the answer.
	tg := newTestGateway(t, settings{})
	before := time.Now().Truncate(time.Second)
	res, err := http.Post(tg.base+"/echo", "application/json", strings.NewReader(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	after := time.Now()
	d, err := http.ParseTime(res.Header.Get("Date"))
	if len(res.Header["Date"]) != 1 || err != nil || d.Before(before) || d.After(after) {
		t.Errorf("served Date %q (%v), want one between %v and %v", res.Header["Date"], err, before, after)
	}
}
