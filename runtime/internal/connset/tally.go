package connset

// tally keeps the IPs (groups) by how many connections each has, so that
// the set finds the IP with the most in constant time: one list per
// count, and the highest count that has a group. Its memory grows with
// the highest count reached, at most the per-IP limit.
type tally struct {
	byN []list[group] // byN[k]: the groups with k connections; byN[0] unused
	top int           // the highest k with a group, 0 when there is none
}

// up records that g gained a connection: g.n is one more than when g was
// last placed (0 for a new group).
func (t *tally) up(g *group) {
	if g.n > 1 {
		t.byN[g.n-1].remove(g)
	}
	for len(t.byN) <= g.n {
		t.byN = append(t.byN, list[group]{which: byTally})
	}
	t.byN[g.n].pushBack(g)
	t.top = max(t.top, g.n)
}

// down records that g lost a connection: g.n is one less than when g was
// last placed (0 when it has none left, and leaves the tally).
func (t *tally) down(g *group) {
	t.byN[g.n+1].remove(g)
	if g.n > 0 {
		t.byN[g.n].pushBack(g)
	}
	for t.top > 0 && t.byN[t.top].head == nil {
		t.top--
	}
}

// heaviest returns a group with the most connections, the one that has
// had that many longest, or nil when there is none.
func (t *tally) heaviest() *group {
	if t.top == 0 {
		return nil
	}
	return t.byN[t.top].head
}
