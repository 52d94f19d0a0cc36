package runtime

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"

	"github.com/wizardmesh/wizard/runtime/internal/patrun"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Reading a Request's fields the same way in-process and remotely: Get
// gives a map or JSON field as JSON decoding gives it, and the typed
// getters accept every representation a value may have on either side.

// Float64 returns the message's root field key as a float64, and whether
// it is a number: any Go integer or float kind (named types included), a
// json.Number, a protobuf enum's number, or a string in JSON's number
// grammar ("2", "-1.5e3"; not "007" nor " 2"), since pattern values are
// strings and 1, "1" and 1.0 route alike. A missing field, a non-number
// and a string beyond float64's range ("1e999") are not ok.
func (r Request) Float64(key string) (float64, bool) {
	return toFloat64(r.held(key))
}

// Int64 returns the message's root field key as an int64, and whether it
// is an integer within int64's range: what [Request.Float64] accepts,
// provided it has no fractional part (2.0 is 2; 2.5 is not ok).
func (r Request) Int64(key string) (int64, bool) {
	return toInt64(r.held(key))
}

// String returns the message's root field key as a string, and whether it
// is a scalar: a string as is; a number or a boolean in the form it routes
// by (2.0 is "2", true is "true"); a protobuf enum by its value name.
// Maps, lists and a missing field are not ok.
func (r Request) String(key string) (string, bool) {
	return patrun.RouteValue(r.held(key))
}

// Bool returns the message's root field key as a bool, and whether it is
// a boolean: a bool (or a named bool type) or the strings "true" and
// "false", the form a pattern's boolean value has.
func (r Request) Bool(key string) (bool, bool) {
	switch v := r.held(key).(type) {
	case bool:
		return v, true
	case string:
		switch v {
		case "true":
			return true, true
		case "false":
			return false, true
		}
		return false, false
	case nil:
		return false, false
	default:
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Bool {
			return rv.Bool(), true
		}
	}
	return false, false
}

// held is the field key as the message holds it.
func (r Request) held(key string) any {
	v, _ := r.field(key)
	return v
}

func toFloat64(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case uint32:
		return float64(x), true
	case float32:
		return float32Value(x), true
	case string:
		return parseNumber(x)
	case json.Number:
		return parseNumber(string(x))
	case nil, bool:
		return 0, false
	case protoreflect.EnumNumber:
		return float64(x), true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return float64(rv.Uint()), true
	case reflect.Float32:
		return float32Value(float32(rv.Float())), true
	case reflect.Float64:
		return rv.Float(), true
	case reflect.String:
		return parseNumber(rv.String())
	}
	return 0, false
}

func toInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case uint64:
		if x > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	case uint:
		if uint64(x) > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	case string:
		if patrun.NumberKind(x) == patrun.NumInt {
			if i, err := strconv.ParseInt(x, 10, 64); err == nil {
				return i, true
			}
		}
	case json.Number:
		if patrun.NumberKind(string(x)) == patrun.NumInt {
			if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
				return i, true
			}
		}
	}
	if rv := reflect.ValueOf(v); v != nil && rv.Kind() >= reflect.Uint && rv.Kind() <= reflect.Uintptr {
		if rv.Uint() > math.MaxInt64 {
			return 0, false
		}
		return int64(rv.Uint()), true
	}
	f, ok := toFloat64(v)
	// -2^63 is exact in a float64; 2^63 is not an int64.
	if !ok || f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 {
		return 0, false
	}
	if rv := reflect.ValueOf(v); rv.Kind() >= reflect.Int && rv.Kind() <= reflect.Int64 {
		return rv.Int(), true // exact, where the float64 may not be
	}
	return int64(f), true
}

// parseNumber parses s, in JSON's number grammar, as a float64.
func parseNumber(s string) (float64, bool) {
	if patrun.NumberKind(s) == patrun.NumNone {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, false // out of float64's range
	}
	return f, true
}

// float32Value is x as JSON carries it: its shortest digits, read back as
// a float64 (float32(0.1) is 0.1, not 0.10000000149011612).
func float32Value(x float32) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(x), 'g', -1, 32), 64)
	return f
}

// jsonValue returns v as a JSON round trip gives it, which is what a
// handler on another node reads: numbers as float64, objects as
// map[string]any, arrays as []any, strings, booleans and nil. Values
// already of that form are returned as they are; others are converted
// (composites through encoding/json, so at a cost); a value JSON cannot
// encode is returned as it is (a remote call would have failed to send
// it).
func jsonValue(v any) any {
	switch x := v.(type) {
	case nil, string, bool, float64:
		return v
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case int32:
		return float64(x)
	case uint64:
		return float64(x)
	case float32:
		return float32Value(x)
	case json.Number:
		if f, ok := parseNumber(string(x)); ok {
			return f
		}
		return v
	case map[string]any, []any:
		if isJSONShaped(v, 0) {
			return v
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}

// maxShapeDepth bounds isJSONShaped's walk; deeper values are converted.
const maxShapeDepth = 32

// isJSONShaped reports whether v holds only what JSON decoding produces.
func isJSONShaped(v any, depth int) bool {
	if depth > maxShapeDepth {
		return false
	}
	switch x := v.(type) {
	case nil, string, bool:
		return true
	case float64:
		return !math.IsNaN(x) && !math.IsInf(x, 0)
	case map[string]any:
		if x == nil {
			return false // JSON null decodes to nil, not a nil map
		}
		for _, e := range x {
			if !isJSONShaped(e, depth+1) {
				return false
			}
		}
		return true
	case []any:
		if x == nil {
			return false
		}
		for _, e := range x {
			if !isJSONShaped(e, depth+1) {
				return false
			}
		}
		return true
	}
	return false
}
