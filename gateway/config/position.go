package config

import "strconv"

// pos is a position in the file: line and column, from 1. The zero pos
// is unknown.
type pos struct{ line, col int }

func (p pos) String() string { return strconv.Itoa(p.line) + ":" + strconv.Itoa(p.col) }

// node records where a mapping of the file stands and where its keys'
// values do; the decoder fills it in every struct that embeds it.
type node struct {
	start  pos
	keys   map[string]pos
	bad    map[string]bool // keys whose values were of the wrong type
	broken bool            // the value was not a mapping
}

func (n *node) setStart(p pos) { n.start = p }

func (n *node) setBroken() { n.broken = true }

func (n *node) setBad(key string) {
	if n.bad == nil {
		n.bad = make(map[string]bool)
	}
	n.bad[key] = true
}

func (n *node) setKey(key string, p pos) {
	if n.keys == nil {
		n.keys = make(map[string]pos)
	}
	n.keys[key] = p
}

// at returns the position of key's value, or the mapping's when the key
// is absent.
func (n *node) at(key string) pos {
	if p, ok := n.keys[key]; ok {
		return p
	}
	return n.start
}

// has reports whether the file gave key a value of the right type.
func (n *node) has(key string) bool {
	_, ok := n.keys[key]
	return ok && !n.bad[key]
}

// given reports whether the file gave key, rightly typed or not.
func (n *node) given(key string) bool {
	_, ok := n.keys[key]
	return ok
}

// positioned is what the decoder looks for in the structs it fills.
type positioned interface {
	setStart(pos)
	setKey(string, pos)
	setBad(string)
	setBroken()
}
