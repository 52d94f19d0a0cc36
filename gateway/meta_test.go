package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMetadata: the handler reads the request id and the verified
// identity as call metadata, and the deadline as its ctx's; what the
// client sends as headers or fields never becomes metadata.
func TestMetadata(t *testing.T) {
	tg := newTestGateway(t, settings{})
	read := func(t *testing.T, body json.RawMessage) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		dl, _ := m["deadline_ms"].(float64)
		if dl <= 0 || dl > 3000 {
			t.Errorf("the handler's deadline is %vms away, want within the route's 3s", m["deadline_ms"])
		}
		delete(m, "deadline_ms")
		return m
	}
	want := map[string]any{"request-id": "client-id.1", "auth-subject": "u1", "auth-issuer": "test", "auth-scopes": "read"}
	t.Run("http", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", tg.base+"/meta", strings.NewReader(`{"x":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer good")
		req.Header.Set("X-Request-Id", "client-id.1")
		req.Header.Set("Auth-Subject", "root")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body json.RawMessage
		json.NewDecoder(res.Body).Decode(&body)
		if d := cmp.Diff(want, read(t, body)); d != "" {
			t.Errorf("metadata (-want +got):\n%s", d)
		}
		if got := res.Header.Get("X-Request-Id"); got != "client-id.1" {
			t.Errorf("X-Request-Id %q", got)
		}
	})
	t.Run("http anonymous, bad request id", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", tg.base+"/meta", nil)
		req.Header.Set("X-Request-Id", "bad id with spaces")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body json.RawMessage
		json.NewDecoder(res.Body).Decode(&body)
		got := read(t, body)
		rid := res.Header.Get("X-Request-Id")
		if d := cmp.Diff(map[string]any{"request-id": rid}, got); d != "" || rid == "bad id with spaces" || !validRequestID(rid) {
			t.Errorf("metadata (-want +got):\n%s (X-Request-Id %q)", d, rid)
		}
	})
	t.Run("websocket", func(t *testing.T) {
		c := dialWS(t, tg.ws, nil)
		sendFrame(t, c, map[string]any{"type": "auth", "id": "a", "token": "good"})
		mustReadFrame(t, c)
		sendFrame(t, c, map[string]any{"type": "req", "id": "m", "method": "GET", "path": "/meta"})
		f := mustReadFrame(t, c)
		got := read(t, f.Body)
		w := map[string]any{"request-id": f.RequestID, "auth-subject": "u1", "auth-issuer": "test", "auth-scopes": "read"}
		if d := cmp.Diff(w, got); d != "" {
			t.Errorf("metadata (-want +got):\n%s", d)
		}
	})
}
