package runtime

// Result is the answer of a call. Read it with [Result.Value], or decode it
// into a typed value with [Result.Decode]:
//
//	res, err := node.Act(ctx, "role:math,cmd:sum", map[string]any{"a": 1, "b": 2})
//	var out struct{ R float64 }
//	err = res.Decode(&out)
type Result struct {
	v any
}

// Value returns the result as the handler returned it (nil for a [NoReply]
// call or a handler that returned nil).
//
// A result from another node is decoded on demand: JSON into maps, slices
// and float64s, protobuf into a message of its registered type.
func (r Result) Value() any {
	if rw, ok := r.v.(*raw); ok {
		return rw.value()
	}
	return r.v
}

// Decode stores the result into dst, a pointer: to the handler's own result
// type (assigned as is), a protobuf message, a struct or map (through JSON),
// or *any.
func (r Result) Decode(dst any) error { return decode(r.v, dst) }
