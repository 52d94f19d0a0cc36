package config

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// TestExampleFile loads the documented example (docs/gateway.md's) and
// compares every effective setting, defaults applied, with
// testdata/gateway.golden (go test -run TestExampleFile -update
// rewrites it).
func TestExampleFile(t *testing.T) {
	c, err := Load("testdata/gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	dump(&b, "", reflect.ValueOf(c).Elem())
	got := b.String()
	golden := filepath.Join("testdata", "gateway.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("effective settings (-%s +got):\n%s", golden, diff)
	}
}

// TestExampleFileMatches runs requests docs/gateway.md shows against the
// example file.
func TestExampleFileMatches(t *testing.T) {
	c, err := Load("testdata/gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ method, path, route, pattern string }{
		{"POST", "/api/users/create", "users", "cmd:create,role:users"},
		{"GET", "/api/users/me", "me", "cmd:me,role:users"},
		{"POST", "/api/matchmaking/search", "search", "cmd:search,role:matchmaking"},
		{"PUT", "/api/shoe-items/42.json", "items", "cmd:put_v2,kind:shoe,role:items"},
		{"GET", "/api/ping", "health", "role:ping"},
	} {
		m, err := c.Table().Match(tc.method, tc.path)
		if err != nil {
			t.Errorf("%s %s: %v", tc.method, tc.path, err)
			continue
		}
		if m.Route.Name != tc.route || m.Pattern != tc.pattern {
			t.Errorf("%s %s: route %q pattern %q, want %q %q", tc.method, tc.path, m.Route.Name, m.Pattern, tc.route, tc.pattern)
		}
	}
}

// dump writes the exported settings of v, one "path = value" a line.
func dump(b *strings.Builder, path string, v reflect.Value) {
	switch x := v.Interface().(type) {
	case time.Duration, Size, Rate, fmt.Stringer:
		fmt.Fprintf(b, "%s = %v\n", path, x)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			fmt.Fprintf(b, "%s = (none)\n", path)
			return
		}
		dump(b, path, v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if tag := f.Tag.Get("yaml"); tag != "" {
				dump(b, join(path, tag), v.Field(i))
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.String {
			fmt.Fprintf(b, "%s = %q\n", path, v.Interface())
			return
		}
		for i := range v.Len() {
			dump(b, fmt.Sprintf("%s[%d]", path, i), v.Index(i))
		}
	case reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			dump(b, join(path, k.String()), v.MapIndex(k))
		}
	default:
		fmt.Fprintf(b, "%s = %#v\n", path, v.Interface())
	}
}

// TestCheck checks what `wizard-gateway check-config FILE` prints: every
// problem, one a line, FILE:LINE:COL: WHERE: REASON.
func TestCheck(t *testing.T) {
	if err := Check("testdata/gateway.yaml"); err != nil {
		t.Errorf("Check(example) = %v", err)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "gateway.yaml")
	src := `server:
  listen: ":8080"
  max_bdy: 1MiB
routes:
  - name: users
    method: POST
    path: /api/users/{action}
    pattern: "role:users,cmd:{action}"
  - name: users
    method: POST
    path: /api/users/{verb}
    pattern: "role:users"
`
	if err := os.WriteFile(bad, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Check(bad)
	if err == nil {
		t.Fatal("Check(bad) = nil")
	}
	want := []string{
		bad + `:3:3: server: unknown key "max_bdy"; did you mean "max_body"?`,
		bad + `:8:14: routes[0].pattern: {action} fills the pattern: give vars.action an allow list, a regex, or allow: "*"`,
		bad + `:9:11: routes[1].name: route name "users" is taken by the route at line 5`,
		bad + `:11:11: routes[1].path: POST /api/users/{verb} and route "users" (line 5), POST /api/users/{action}, match the same paths`,
	}
	if diff := cmp.Diff(want, strings.Split(err.Error(), "\n")); diff != "" {
		t.Errorf("Check (-want +got):\n%s", diff)
	}
	if err := Check(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml: no such file") {
		t.Errorf("Check(missing) = %v", err)
	}
	if err := Check(dir); err == nil || !strings.HasSuffix(err.Error(), "is a directory") {
		t.Errorf("Check(dir) = %v", err)
	}
}
