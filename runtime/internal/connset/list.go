package connset

// links are an element's place in one list.
type links[T any] struct{ prev, next *T }

// list is a doubly linked list of T (connections, or the groups of one
// tally), through the links which selects.
type list[T any] struct {
	head, tail *T
	which      func(*T) *links[T]
}

func (l *list[T]) pushBack(e *T) {
	le := l.which(e)
	le.prev, le.next = l.tail, nil
	if l.tail != nil {
		l.which(l.tail).next = e
	} else {
		l.head = e
	}
	l.tail = e
}

func (l *list[T]) remove(e *T) {
	le := l.which(e)
	if le.prev != nil {
		l.which(le.prev).next = le.next
	} else {
		l.head = le.next
	}
	if le.next != nil {
		l.which(le.next).prev = le.prev
	} else {
		l.tail = le.prev
	}
	le.prev, le.next = nil, nil
}

// moveBack moves e, in l, behind the others.
func (l *list[T]) moveBack(e *T) {
	l.remove(e)
	l.pushBack(e)
}

func byAll(c *Conn) *links[Conn]     { return &c.all }
func byIP(c *Conn) *links[Conn]      { return &c.ip }
func byTally(g *group) *links[group] { return &g.tally }
