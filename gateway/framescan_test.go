package gateway

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// scanSeeds are frames of the common shape and near it.
var scanSeeds = []string{
	`{}`, ` { } `, `{"type":"req","id":"42","method":"POST","path":"/a?b=c","body":{"x":[1,"}"]},"timeout_ms":3000}`,
	`{"type":"auth","id":"a1","token":"t"}`, `{"type":"cancel","id":"42"}`, `{"id":null}`, `{"body":null}`,
	`{"type":"req","id":"1","method":"GET","path":"/","timeout_ms":-0}`, `{"timeout_ms":1.5}`, `{"timeout_ms":99999999999999999999}`,
	`{"Type":"req"}`, `{"type":"r\u0065q"}`, "{\"type\":\"\xff\"}", `{"id":"1","id":"2"}`, `{"id":"1","id":null}`,
	`{"extra":1}`, `[]`, `"x"`, `{"type":1}`, `{"body":"a\"b"}`, `{"type":"req"} {}`,
	`{"type":"sub","id":"m","route":"matches"}`, `{"type":"sub","id":"m","pattern":"role:match,user:\"4 2\""}`, `{"type":"unsub","id":"m"}`,
}

// TestScanFrame: the frames of the common shape are scanned, the rest
// left to encoding/json, and what is scanned decodes as encoding/json
// decodes it.
func TestScanFrame(t *testing.T) {
	for _, tc := range []struct {
		in      string
		scanned bool
	}{
		{`{}`, true},
		{`{"type":"req","id":"42","method":"POST","path":"/a","body":{"x":1},"timeout_ms":3000}`, true},
		{`{"id":null}`, true},
		{`{"Type":"req","id":"1"}`, false},      // encoding/json matches case-insensitively
		{`{"type":"r\u0065q","id":"1"}`, false}, // an escape
		{`{"timeout_ms":1.5}`, false},
		{`{"extra":1}`, false},
		{`{"type":"req"} {}`, false},
		{`[]`, false},
	} {
		f, ok := scanFrame([]byte(tc.in))
		if ok != tc.scanned {
			t.Errorf("scanFrame(%s) scanned %v, want %v", tc.in, ok, tc.scanned)
			continue
		}
		if ok {
			want, fe := decodeFrameJSON([]byte(tc.in))
			if fe != nil {
				t.Errorf("%s: scanned, but encoding/json refuses it: %s", tc.in, fe.msg)
			} else if d := cmp.Diff(want, f); d != "" {
				t.Errorf("%s: scanned (-encoding/json +scan):\n%s", tc.in, d)
			}
		}
	}
}

// FuzzScanFrame: a frame scanFrame accepts decodes by encoding/json to
// the same fields; it never panics.
func FuzzScanFrame(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := scanFrame(data)
		if !ok {
			return
		}
		want, fe := decodeFrameJSON(data)
		if fe != nil {
			t.Fatalf("%q scanned as %+v, but encoding/json refuses it: %s", data, got, fe.msg)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("%q (-encoding/json +scan):\n%s", data, d)
		}
	})
}
