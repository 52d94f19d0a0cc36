package connset

// links are a connection's place in one list.
type links struct{ prev, next *Conn }

// linkSel picks the links of one list.
type linkSel func(*Conn) *links

func byAll(c *Conn) *links { return &c.all }
func byIP(c *Conn) *links  { return &c.ip }

// list is a doubly linked list of connections, through the links which
// selects.
type list struct{ head, tail *Conn }

func (l *list) pushBack(c *Conn, which linkSel) {
	lc := which(c)
	lc.prev, lc.next = l.tail, nil
	if l.tail != nil {
		which(l.tail).next = c
	} else {
		l.head = c
	}
	l.tail = c
}

func (l *list) remove(c *Conn, which linkSel) {
	lc := which(c)
	if lc.prev != nil {
		which(lc.prev).next = lc.next
	} else {
		l.head = lc.next
	}
	if lc.next != nil {
		which(lc.next).prev = lc.prev
	} else {
		l.tail = lc.prev
	}
	lc.prev, lc.next = nil, nil
}
