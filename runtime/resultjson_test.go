package runtime

import "testing"

// TestResultJSON checks that Result.JSON hands over a remote JSON answer's
// text, and refuses a protobuf answer, an empty one and a local value.
func TestResultJSON(t *testing.T) {
	b, ok := Result{v: &raw{codec: CodecJSON, data: []byte(`{"a":1}`)}}.JSON()
	if !ok || string(b) != `{"a":1}` {
		t.Fatalf("JSON of a remote JSON answer = %q, %v; want {\"a\":1}, true", b, ok)
	}
	for name, r := range map[string]Result{
		"protobuf": {v: &raw{codec: CodecProto, data: []byte{8, 1}, typ: "x.Y"}},
		"none":     {v: &raw{codec: CodecNone}},
		"local":    {v: map[string]any{"a": 1}},
		"nil":      {},
	} {
		if b, ok := r.JSON(); ok || b != nil {
			t.Errorf("JSON of a %s result = %q, %v; want nil, false", name, b, ok)
		}
	}
}
