package jsonscan

// maxDepth is encoding/json's nesting bound: Valid refuses text nested
// deeper, as json.Valid does.
const maxDepth = 10000

// Valid reports whether d is one JSON value, with white space around it
// at most: what [encoding/json.Valid] reports (FuzzValid checks that they
// agree), without its scanner, which steps each byte through a function
// value. Like json.Valid it does not check that strings are UTF-8. It
// walks the text once, iteratively: the kinds of the open containers are
// bits of a stack (on the goroutine's stack for the first 128 levels).
func Valid(d []byte) bool {
	var room [2]uint64
	open := room[:] // bit i of the stack: 1 for an object at depth i
	depth := 0
	i := Space(d, 0)
	for {
		// A value starts at d[i].
		if i >= len(d) {
			return false
		}
		switch c := d[i]; c {
		case '{', '[':
			if depth == maxDepth {
				return false
			}
			if depth/64 == len(open) {
				open = append(open, 0)
			}
			if c == '{' {
				open[depth/64] |= 1 << (depth % 64)
			} else {
				open[depth/64] &^= 1 << (depth % 64)
			}
			depth++
			i = Space(d, i+1)
			if i < len(d) && d[i] == "}]"[1-(open[(depth-1)/64]>>((depth-1)%64))&1] {
				depth-- // empty
				i++
				break
			}
			if c == '{' {
				if i = member(d, i); i < 0 {
					return false
				}
			}
			continue
		case '"':
			if i = str(d, i); i < 0 {
				return false
			}
		case 't':
			if i = literal(d, i, "true"); i < 0 {
				return false
			}
		case 'f':
			if i = literal(d, i, "false"); i < 0 {
				return false
			}
		case 'n':
			if i = literal(d, i, "null"); i < 0 {
				return false
			}
		default:
			if i = number(d, i); i < 0 {
				return false
			}
		}
		// A value ended at d[i]: what follows it in its container.
		for {
			i = Space(d, i)
			if depth == 0 {
				return i == len(d)
			}
			if i >= len(d) {
				return false
			}
			object := open[(depth-1)/64]>>((depth-1)%64)&1 == 1
			switch {
			case d[i] == ',':
				i = Space(d, i+1)
				if object {
					if i = member(d, i); i < 0 {
						return false
					}
				}
			case object && d[i] == '}', !object && d[i] == ']':
				depth--
				i++
				continue
			default:
				return false
			}
			break
		}
	}
}

// member checks an object member's key and colon at d[i] and returns the
// index of its value, or -1.
func member(d []byte, i int) int {
	if i >= len(d) || d[i] != '"' {
		return -1
	}
	if i = str(d, i); i < 0 {
		return -1
	}
	i = Space(d, i)
	if i >= len(d) || d[i] != ':' {
		return -1
	}
	return Space(d, i+1)
}

// str checks the string at d[i] and returns the index past it, or -1.
func str(d []byte, i int) int {
	for i++; i < len(d); i++ {
		switch c := d[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			i++
			if i >= len(d) {
				return -1
			}
			switch d[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(d) {
					return -1
				}
				for _, h := range d[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

// literal checks that d[i:] starts with lit and returns the index past
// it, or -1.
func literal(d []byte, i int, lit string) int {
	if len(d)-i < len(lit) || string(d[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// number checks the number at d[i] and returns the index past it, or -1.
func number(d []byte, i int) int {
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i >= len(d):
		return -1
	case d[i] == '0':
		i++
	case '1' <= d[i] && d[i] <= '9':
		i = digits(d, i)
	default:
		return -1
	}
	if i < len(d) && d[i] == '.' {
		if i++; i >= len(d) || !isDigit(d[i]) {
			return -1
		}
		i = digits(d, i)
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || !isDigit(d[i]) {
			return -1
		}
		i = digits(d, i)
	}
	return i
}

func digits(d []byte, i int) int {
	for i < len(d) && isDigit(d[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
