package config

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const messageRoutes = `
routes:
  - {name: users, method: POST, path: "/api/users/{action}", pattern: "role:users,cmd:{action}",
     vars: {action: {allow: [create]}}}
  - {name: items, method: PUT, path: "/api/items/{id}", pattern: "role:items,cmd:put", body: item}
`

// TestMessage checks how path variables, query and body merge, and that
// the client cannot set what the route fixes.
func TestMessage(t *testing.T) {
	table := mustParse(t, messageRoutes).Table()
	for _, tc := range []struct {
		name    string
		method  string
		path    string
		query   url.Values
		body    string
		want    map[string]any
		wantErr string // the 400's message
		field   string
	}{
		{
			name: "merged", method: "POST", path: "/api/users/create",
			query: url.Values{"a": {"1"}, "tags": {"x", "y"}},
			body:  `{"b": 2, "n": 1.50, "o": {"cmd": "nested keys are free"}}`,
			want: map[string]any{
				"action": "create", "a": "1", "tags": []any{"x", "y"},
				"b": json.Number("2"), "n": json.Number("1.50"), "o": map[string]any{"cmd": "nested keys are free"},
			},
		},
		{name: "no body", method: "POST", path: "/api/users/create", want: map[string]any{"action": "create"}},
		{name: "blank body", method: "POST", path: "/api/users/create", body: " \n\t", want: map[string]any{"action": "create"}},
		{name: "empty object", method: "POST", path: "/api/users/create", body: "{}", want: map[string]any{"action": "create"}},
		{
			name: "pattern key in body", method: "POST", path: "/api/users/create", body: `{"cmd": "delete"}`,
			wantErr: `body field "cmd" is set by the route's pattern`, field: "cmd",
		},
		{
			name: "path variable in body", method: "POST", path: "/api/users/create", body: `{"action": "delete"}`,
			wantErr: `body field "action" is set by the path's {action}`, field: "action",
		},
		{
			name: "pattern key in query", method: "POST", path: "/api/users/create", query: url.Values{"role": {"admin"}},
			wantErr: `query field "role" is set by the route's pattern`, field: "role",
		},
		{
			name: "first bad field named", method: "POST", path: "/api/users/create", body: `{"role": 1, "cmd": 2, "action": 3}`,
			wantErr: `body field "action" is set by the path's {action}`, field: "action",
		},
		{
			name: "in query and body", method: "POST", path: "/api/users/create", query: url.Values{"x": {"1"}}, body: `{"x": 2}`,
			wantErr: `query field "x" is in both the query and the body`, field: "x",
		},
		{
			name: "metadata key", method: "POST", path: "/api/users/create", body: `{"timeout$": 1}`,
			wantErr: `body field "timeout$" ends in '$': such keys are wizard's metadata`, field: "timeout$",
		},
		{
			name: "empty key", method: "POST", path: "/api/users/create", query: url.Values{"": {"1"}},
			wantErr: `query field "" has no name`,
		},
		{name: "array body", method: "POST", path: "/api/users/create", body: `[1]`, wantErr: "body must be a JSON object, not an array: its fields join the message"},
		{name: "string body", method: "POST", path: "/api/users/create", body: `"x"`, wantErr: "body must be a JSON object, not a string: its fields join the message"},
		{name: "null body", method: "POST", path: "/api/users/create", body: `null`, wantErr: "body must be a JSON object, not null: its fields join the message"},
		{name: "bad JSON", method: "POST", path: "/api/users/create", body: `{"a":`, wantErr: "body is not valid JSON: unexpected end"},
		{name: "bad JSON token", method: "POST", path: "/api/users/create", body: `{a}`, wantErr: "body is not valid JSON: invalid character 'a' looking for beginning of object key string"},
		{name: "two values", method: "POST", path: "/api/users/create", body: `{} {}`, wantErr: "body holds more than one JSON value"},
		// The body option: any JSON value under one field.
		{
			name: "body under field", method: "PUT", path: "/api/items/7", query: url.Values{"v": {"2"}}, body: `[1, {"cmd": "x"}]`,
			want: map[string]any{"id": "7", "v": "2", "item": []any{json.Number("1"), map[string]any{"cmd": "x"}}},
		},
		{
			name: "object under field", method: "PUT", path: "/api/items/7", body: `{"role": "admin"}`,
			want: map[string]any{"id": "7", "item": map[string]any{"role": "admin"}},
		},
		{
			name: "body field in query", method: "PUT", path: "/api/items/7", query: url.Values{"item": {"x"}}, body: `1`,
			wantErr: `query field "item" is the route's body field`, field: "item",
		},
		{
			name: "body field in query without body", method: "PUT", path: "/api/items/7", query: url.Values{"item": {"x"}},
			wantErr: `query field "item" is the route's body field`, field: "item",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := table.Match(tc.method, tc.path)
			if err != nil {
				t.Fatal(err)
			}
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			got, err := m.Message(tc.query, body)
			if tc.wantErr != "" {
				re, ok := err.(*RequestError)
				if !ok {
					t.Fatalf("Message = %v, %v; want a *RequestError", got, err)
				}
				if re.Status != 400 || re.Message != tc.wantErr || re.Field != tc.field {
					t.Errorf("error %d %q field %q, want 400 %q field %q", re.Status, re.Message, re.Field, tc.wantErr, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}
