package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
)

// decoder fills the config's structs from the YAML tree, strictly: an
// unknown key, or a value of the wrong type, is a problem at its
// position. It goes on after a problem, so one pass reports them all.
type decoder struct {
	ps      *problems
	anchors map[string][]anchorAt
	budget  int // nodes left to visit, aliases expanded
	over    bool
	where   map[string]pos // the position of each value, by its path
}

type anchorAt struct {
	offset int
	value  ast.Node
}

// Limits of the decoder: the nodes visited with aliases expanded (a
// billion laughs stops here) and the nesting of the tree.
const (
	maxNodes = 1_000_000
	maxDepth = 32
)

// scalar is a type that reads itself from a scalar's text; the error's
// text is the reason of the problem.
type scalar interface {
	decodeScalar(text string) error
}

var durationType = reflect.TypeFor[time.Duration]()

func newDecoder(ps *problems, root ast.Node) *decoder {
	d := &decoder{ps: ps, anchors: make(map[string][]anchorAt), budget: maxNodes, where: make(map[string]pos)}
	ast.Walk(anchorVisitor(d.anchors), root)
	return d
}

// anchorVisitor records the anchors of the tree by name, in the order of
// the file.
type anchorVisitor map[string][]anchorAt

func (a anchorVisitor) Visit(n ast.Node) ast.Visitor {
	if an, ok := n.(*ast.AnchorNode); ok && an.Name != nil && an.Value != nil {
		name := an.Name.String()
		a[name] = append(a[name], anchorAt{offset(an), an.Value})
	}
	return a
}

func posOf(n ast.Node) pos {
	if n == nil {
		return pos{}
	}
	if m, ok := n.(*ast.MappingNode); ok && !m.IsFlowStyle && len(m.Values) > 0 {
		return posOf(m.Values[0].Key) // a block mapping starts at its first key
	}
	return tokenPos(n.GetToken())
}

func tokenPos(tk *token.Token) pos {
	if tk == nil || tk.Position == nil {
		return pos{}
	}
	return pos{tk.Position.Line, tk.Position.Column}
}

func offset(n ast.Node) int {
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Offset
	}
	return 0
}

// resolve strips tags and anchors and follows aliases: an alias names the
// last anchor of its name before it.
func (d *decoder) resolve(n ast.Node, where string) ast.Node {
	for range maxDepth {
		switch v := n.(type) {
		case *ast.TagNode:
			n = v.Value
		case *ast.MappingKeyNode:
			n = v.Value
		case *ast.MappingValueNode:
			return &ast.MappingNode{BaseNode: v.BaseNode, Start: v.Start, Values: []*ast.MappingValueNode{v}}
		case *ast.AnchorNode:
			n = v.Value
		case *ast.AliasNode:
			if v.Value == nil {
				return nil
			}
			name, at := v.Value.String(), offset(v)
			var target ast.Node
			for _, a := range d.anchors[name] {
				if a.offset < at {
					target = a.value
				}
			}
			if target == nil {
				d.ps.add(posOf(v), where, "alias %s names no anchor before it", strconv.Quote("*"+name))
				return nil
			}
			n = target
		default:
			return n
		}
	}
	d.ps.add(posOf(n), where, "aliases nest too deep")
	return nil
}

// decode fills v from n. where names v in problems ("routes[2].path").
func (d *decoder) decode(n ast.Node, v reflect.Value, where string, depth int) {
	if d.over {
		return
	}
	if d.budget--; d.budget < 0 || depth > maxDepth {
		d.over = true
		d.ps.add(posOf(n), where, "too large: more than %d values with aliases expanded, or nested deeper than %d", maxNodes, maxDepth)
		return
	}
	at := posOf(n)
	if _, seen := d.where[where]; !seen {
		d.where[where] = at
	}
	n = d.resolve(n, where)
	if n == nil {
		return
	}
	if _, null := n.(*ast.NullNode); null && v.Kind() != reflect.Pointer {
		return // "key:" alone: as if not given
	}
	if s, ok := v.Addr().Interface().(scalar); ok {
		text, ok := scalarText(n)
		if !ok {
			d.ps.add(at, where, "want a scalar, got %s", kindOf(n))
			return
		}
		if err := s.decodeScalar(text); err != nil {
			d.ps.add(at, where, "%v", err)
		}
		return
	}
	if v.Type() == durationType {
		d.duration(n, v, at, where)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		if _, null := n.(*ast.NullNode); null {
			return
		}
		d.decode(n, v.Elem(), where, depth)
	case reflect.Struct:
		d.object(n, v, at, where, depth)
	case reflect.Map:
		d.mapping(n, v, at, where, depth)
	case reflect.Slice:
		d.list(n, v, at, where, depth)
	case reflect.String:
		text, ok := scalarText(n)
		if !ok {
			d.ps.add(at, where, "want a string, got %s", kindOf(n))
			return
		}
		v.SetString(text)
	case reflect.Bool:
		b, ok := n.(*ast.BoolNode)
		if !ok {
			d.ps.add(at, where, "want true or false, got %s", describe(n))
			return
		}
		v.SetBool(b.Value)
	case reflect.Int:
		text, _ := scalarText(n)
		i, err := strconv.ParseInt(text, 10, 0)
		if _, isInt := n.(*ast.IntegerNode); !isInt || err != nil {
			d.ps.add(at, where, "want an integer, got %s", describe(n))
			return
		}
		v.SetInt(i)
	default:
		panic("config: no decoding for " + v.Type().String())
	}
}

func (d *decoder) duration(n ast.Node, v reflect.Value, at pos, where string) {
	text, ok := scalarText(n)
	if !ok {
		d.ps.add(at, where, "want a duration like 2s or 500ms, got %s", kindOf(n))
		return
	}
	dur, err := time.ParseDuration(text)
	if err != nil {
		d.ps.add(at, where, "want a duration like 2s or 500ms, got %s", strconv.Quote(text))
		return
	}
	if dur < 0 {
		d.ps.add(at, where, "negative duration %s", text)
		return
	}
	v.SetInt(int64(dur))
}

// object fills the struct v from a mapping, by the fields' yaml tags.
func (d *decoder) object(n ast.Node, v reflect.Value, at pos, where string, depth int) {
	p, _ := v.Addr().Interface().(positioned)
	m, ok := n.(*ast.MappingNode)
	if !ok {
		d.ps.add(at, where, "want a mapping, got %s", kindOf(n))
		if p != nil {
			p.setStart(at)
			p.setBroken()
		}
		return
	}
	if p != nil {
		p.setStart(at)
	}
	d.pairs(m, where, depth, func(key string, kpos pos, value ast.Node) {
		if where == "" && strings.HasPrefix(key, "x-") {
			return // extension keys, a place for anchors
		}
		f, ok := fieldByTag(v, key)
		if !ok {
			d.ps.add(kpos, where, "unknown key %s%s", strconv.Quote(key), suggest(key, tagsOf(v.Type())))
			return
		}
		if _, null := value.(*ast.NullNode); p != nil && !null {
			p.setKey(key, posOf(value))
		}
		before := len(d.ps.list)
		d.decode(value, f, join(where, key), depth+1)
		if p != nil && len(d.ps.list) > before {
			p.setBad(key)
		}
	})
}

// mapping fills the map v (string keys) from a mapping.
func (d *decoder) mapping(n ast.Node, v reflect.Value, at pos, where string, depth int) {
	m, ok := n.(*ast.MappingNode)
	if !ok {
		d.ps.add(at, where, "want a mapping, got %s", kindOf(n))
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	d.pairs(m, where, depth, func(key string, kpos pos, value ast.Node) {
		e := reflect.New(v.Type().Elem()).Elem()
		if old := v.MapIndex(reflect.ValueOf(key)); old.IsValid() {
			e.Set(old) // a merge key filled it before
		}
		d.decode(value, e, join(where, key), depth+1)
		if p, ok := e.Addr().Interface().(positioned); ok {
			p.setStart(kpos)
		}
		v.SetMapIndex(reflect.ValueOf(key), e)
	})
}

// pairs calls f for each key of m, the keys of merge keys ("<<: *base")
// first so that m's own keys override them.
func (d *decoder) pairs(m *ast.MappingNode, where string, depth int, f func(key string, at pos, value ast.Node)) {
	for _, mv := range m.Values {
		if _, merge := mv.Key.(*ast.MergeKeyNode); !merge {
			continue
		}
		src := d.resolve(mv.Value, where)
		var srcs []ast.Node
		if s, ok := src.(*ast.SequenceNode); ok {
			srcs = s.Values
		} else if src != nil {
			srcs = []ast.Node{src}
		}
		for _, s := range srcs {
			sm, ok := d.resolve(s, where).(*ast.MappingNode)
			if !ok {
				d.ps.add(posOf(mv.Value), where, "a merge key (<<) takes a mapping or a list of mappings")
				continue
			}
			if d.budget -= len(sm.Values) + 1; d.budget < 0 || depth > maxDepth {
				if !d.over {
					d.over = true
					d.ps.add(posOf(mv.Value), where, "too large: more than %d values with aliases expanded, or nested deeper than %d", maxNodes, maxDepth)
				}
				return
			}
			d.pairs(sm, where, depth+1, f)
		}
	}
	for _, mv := range m.Values {
		if _, merge := mv.Key.(*ast.MergeKeyNode); merge {
			continue
		}
		kn := d.resolve(mv.Key, where)
		if kn == nil {
			continue // the alias's problem is reported
		}
		key, ok := scalarText(kn)
		if !ok {
			d.ps.add(posOf(mv.Key), where, "want a string key, got %s", kindOf(kn))
			continue
		}
		f(key, posOf(mv.Key), mv.Value)
	}
}

// list fills the slice v from a sequence; a scalar where a list of
// scalars is wanted is a list of one.
func (d *decoder) list(n ast.Node, v reflect.Value, at pos, where string, depth int) {
	s, ok := n.(*ast.SequenceNode)
	if !ok {
		if _, isScalar := scalarText(n); isScalar && v.Type().Elem().Kind() == reflect.String {
			e := reflect.New(v.Type().Elem()).Elem()
			d.decode(n, e, where, depth+1)
			v.Set(reflect.Append(reflect.MakeSlice(v.Type(), 0, 1), e))
			return
		}
		d.ps.add(at, where, "want a list, got %s", kindOf(n))
		return
	}
	out := reflect.MakeSlice(v.Type(), 0, len(s.Values))
	for i, item := range s.Values {
		e := reflect.New(v.Type().Elem()).Elem()
		d.decode(item, e, where+"["+strconv.Itoa(i)+"]", depth+1)
		out = reflect.Append(out, e)
	}
	v.Set(out)
}

// scalarText returns the text of a scalar: a string's value, or the
// source text of a number or boolean.
func scalarText(n ast.Node) (string, bool) {
	switch v := n.(type) {
	case *ast.StringNode:
		return v.Value, true
	case *ast.LiteralNode:
		if v.Value == nil {
			return "", true
		}
		return v.Value.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return n.GetToken().Value, true
	}
	return "", false
}

// kindOf names the kind of a node for a problem.
func kindOf(n ast.Node) string {
	switch n.(type) {
	case nil:
		return "nothing"
	case *ast.MappingNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.NullNode:
		return "null"
	case *ast.StringNode, *ast.LiteralNode:
		return "a string"
	case *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	case *ast.BoolNode:
		return "a boolean"
	}
	return "a " + strings.ToLower(n.Type().String())
}

// describe names a scalar by its text, anything else by its kind.
func describe(n ast.Node) string {
	if t, ok := scalarText(n); ok {
		return strconv.Quote(t)
	}
	return kindOf(n)
}

func join(where, key string) string {
	if where == "" {
		return key
	}
	return where + "." + key
}

func fieldByTag(v reflect.Value, key string) (reflect.Value, bool) {
	if key == "" {
		return reflect.Value{}, false // untagged fields are not the file's
	}
	t := v.Type()
	for i := range t.NumField() {
		if t.Field(i).Tag.Get("yaml") == key {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

func tagsOf(t reflect.Type) []string {
	var tags []string
	for i := range t.NumField() {
		if tag := t.Field(i).Tag.Get("yaml"); tag != "" {
			tags = append(tags, tag)
		}
	}
	return tags
}

// suggest returns "; did you mean "x"?" for the known key nearest to
// key, when one is near, else the list of known keys.
func suggest(key string, known []string) string {
	best, dist := "", 3
	for _, k := range known {
		if d := editDistance(key, k); d < dist && d < len(key) {
			best, dist = k, d
		}
	}
	if best != "" {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	known = slices.Clone(known)
	slices.Sort(known)
	return "; known keys: " + strings.Join(known, ", ")
}

// editDistance is Levenshtein's distance between a and b, in bytes.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
