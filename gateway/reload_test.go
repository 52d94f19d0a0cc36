package gateway

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/wizardmesh/wizard/gateway/config"
)

// TestReloadWhole: a reload that adds a JWT section, changes CORS, the
// body bound and a rate limit applies them all with the routes (a valid
// token passes at once, not 401 until a restart); a listener setting it
// cannot change is named, not applied; a reload whose auth does not
// build changes nothing.
func TestReloadWhole(t *testing.T) {
	tg := configGateway(t, `
cors: {origins: ["https://a.example"]}
routes:
  - {name: echo, method: POST, path: /api/echo, pattern: "role:t,cmd:echo", auth: none}
`)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hs.key"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	parse := func(yaml string) *config.Config {
		t.Helper()
		cfg, err := config.Parse("new.yaml", []byte(strings.ReplaceAll(yaml, "$DIR", dir)))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	restart, err := tg.Reload(parse(`
server: {listen: ":9999", max_body: 16B}
auth:
  jwt: {keys: ["$DIR/hs.key"], algorithms: [HS256]}
cors: {origins: ["https://b.example"]}
rate_limits: {per_subject: {rate: 1/m, burst: 1}}
routes:
  - {name: echo, method: POST, path: /api/echo, pattern: "role:t,cmd:echo", auth: required}
`))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"server.listen"}, restart); d != "" {
		t.Errorf("needs a restart (-want +got):\n%s", d)
	}
	token := signHS(t, jwt.MapClaims{"sub": "u1", "exp": time.Now().Add(time.Hour).Unix()})
	type answer struct {
		Status int
		Origin string
	}
	post := func(token, body string) answer {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "POST", tg.base+"/api/echo", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", "https://b.example")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return answer{res.StatusCode, res.Header.Get("Access-Control-Allow-Origin")}
	}
	got := []answer{post("", `{}`), post(token, `{}`), post(token, `{"long":"longer than 16B"}`), post(token, `{}`)}
	want := []answer{
		{401, "https://b.example"}, // auth: required, from the new routes
		{200, "https://b.example"}, // the new verifier knows the token; the new CORS
		{413, "https://b.example"}, // the new max_body
		{429, "https://b.example"}, // the new per-subject limit
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("after the reload (-want +got):\n%s", d)
	}
	if _, err := tg.Reload(parse(`
auth:
  jwt: {keys: ["$DIR/absent.key"], algorithms: [HS256]}
routes:
  - {name: echo, method: POST, path: /api/echo, pattern: "role:t,cmd:echo", auth: none}
`)); err == nil {
		t.Error("a reload whose key file is absent: no error")
	}
	if got := post("", `{}`); got.Status != 401 {
		t.Errorf("after a failed reload: %d, want the old routes' 401", got.Status)
	}
}
