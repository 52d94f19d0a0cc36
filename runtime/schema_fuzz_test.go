package runtime

import "testing"

// FuzzDecodeSchema: any answer on introspect.DescribePattern decodes to a schema or
// an error, never a panic, and a schema decoded builds or fails to build
// with an error.
func FuzzDecodeSchema(f *testing.F) {
	f.Add([]byte(`{"id":"a","digest":"d","methods":{"a:1":"p.S/M"},"files":"CgA="}`))
	f.Add([]byte(`{"have":"d","id":"a"}`))
	f.Add([]byte(`{"methods":{"a:1":"nope"}}`))
	have := &Schema{Digest: "d"}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeSchema(b, have)
		if err != nil {
			return
		}
		if _, err := s.Registry(); err != nil {
			return
		}
		for k := range s.Methods {
			_, _ = s.Method(k)
		}
	})
}
