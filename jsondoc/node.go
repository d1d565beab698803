package jsondoc

// NOTE: this file holds the tree. A node is a JSON value that is either
// raw (its compact text, never modified in place) or split (children built)
// or both: a split container keeps its raw text until something below it
// changes, so a path that was only read, or a patch that failed and was
// undone, costs nothing when the document is written out again.

// Kind is the JSON type of a value.
type Kind uint8

// The six JSON kinds. The zero Kind is null, matching the zero Doc.
const (
	KindNull Kind = iota
	KindBool
	KindNumber
	KindString
	KindArray
	KindObject
)

func (k Kind) String() string {
	switch k {
	case KindNull:
		return "null"
	case KindBool:
		return "boolean"
	case KindNumber:
		return "number"
	case KindString:
		return "string"
	case KindArray:
		return "array"
	case KindObject:
		return "object"
	}
	return "invalid"
}

// indexThreshold is the member count above which an object gets a map
// from name to member; below it a linear scan of the list is cheaper.
const indexThreshold = 16

// nodeOverhead approximates the heap cost of one node (or member) for Size.
const nodeOverhead = 64

// node is one JSON value.
//
// Invariants:
//   - scalars always have raw and are never split;
//   - a container with split == false has raw and no children;
//   - a split container with raw != nil is clean: raw is exactly the
//     compact encoding of its children (modulo duplicate names, which raw
//     keeps and the children resolve last-wins);
//   - raw bytes are immutable once created, so nodes may share them.
type node struct {
	kind  Kind
	split bool
	raw   []byte

	// Array children: elems is the live window back[off:] of a backing
	// array with off free slots in front, so an insert or remove moves
	// only the elements between the index and the nearer end.
	elems []*node
	back  []*node
	off   int

	first, last *member // object members in insertion order
	n           int     // member count
	index       map[string]*member
}

// member is one name/value pair of an object, in a doubly linked list so
// that removal and its undo are O(1) and a replaced value keeps its place.
type member struct {
	key        string
	keyRaw     []byte // the name's original literal, quotes included; nil for names set by a patch
	val        *node
	prev, next *member
}

var nullRaw = []byte("null")

func rawNode(raw []byte) *node { return &node{kind: kindOf(raw), raw: raw} }

func nullNode() *node { return &node{kind: KindNull, raw: nullRaw} }

// ensureSplit builds n's children from its raw text, once. It is a change
// of representation only, so Apply does not log it for undo.
func (n *node) ensureSplit() {
	if n.split || (n.kind != KindArray && n.kind != KindObject) {
		return
	}
	n.split = true
	b := n.raw
	i := 1 // past '{' or '['
	if n.kind == KindArray {
		for b[i] != ']' {
			j := skipValue(b, i)
			n.back = append(n.back, rawNode(b[i:j:j]))
			i = j
			if b[i] == ',' {
				i++
			}
		}
		n.elems = n.back
		return
	}
	for b[i] != '}' {
		k := skipString(b, i)
		keyLit := b[i:k:k]
		i = k + 1 // past ':'
		j := skipValue(b, i)
		val := rawNode(b[i:j:j])
		key := decodeString(keyLit)
		if m := n.find(key); m != nil {
			m.val = val // duplicate name: last wins, first position kept (as JSON.parse)
		} else {
			n.link(&member{key: key, keyRaw: keyLit, val: val})
		}
		i = j
		if b[i] == ',' {
			i++
		}
	}
}

// find returns the member named key, building the index when the object
// has grown past indexThreshold.
func (n *node) find(key string) *member {
	if n.index != nil {
		return n.index[key]
	}
	if n.n > indexThreshold {
		n.index = make(map[string]*member, n.n)
		for m := n.first; m != nil; m = m.next {
			n.index[m.key] = m
		}
		return n.index[key]
	}
	for m := n.first; m != nil; m = m.next {
		if m.key == key {
			return m
		}
	}
	return nil
}

// link appends m at the end of the member list.
func (n *node) link(m *member) {
	m.prev, m.next = n.last, nil
	if n.last == nil {
		n.first = m
	} else {
		n.last.next = m
	}
	n.last = m
	n.n++
	if n.index != nil {
		n.index[m.key] = m
	}
}

// unlink removes m from the list but leaves m.prev and m.next as they were,
// so relink can put it back while every later change has been undone.
func (n *node) unlink(m *member) {
	if m.prev == nil {
		n.first = m.next
	} else {
		m.prev.next = m.next
	}
	if m.next == nil {
		n.last = m.prev
	} else {
		m.next.prev = m.prev
	}
	n.n--
	if n.index != nil {
		delete(n.index, m.key)
	}
}

// relink undoes unlink(m). Valid only in LIFO order.
func (n *node) relink(m *member) {
	if m.prev == nil {
		n.first = m
	} else {
		m.prev.next = m
	}
	if m.next == nil {
		n.last = m
	} else {
		m.next.prev = m
	}
	n.n++
	if n.index != nil {
		n.index[m.key] = m
	}
}

// insert puts v at index i (0 <= i <= len), moving the shorter side.
func (n *node) insert(i int, v *node) {
	l := len(n.elems)
	if i < l/2 {
		if n.off == 0 {
			// Make front room proportional to the length, so a run of
			// front inserts costs amortised O(1) each.
			slack := l/2 + 4
			nb := make([]*node, slack+l, slack+l+l/4+4)
			copy(nb[slack:], n.elems)
			n.back, n.off = nb, slack
		}
		n.off--
		n.elems = n.back[n.off:]
		copy(n.elems[:i], n.elems[1:i+1])
		n.elems[i] = v
		return
	}
	n.back = append(n.back, nil)
	n.elems = n.back[n.off:]
	copy(n.elems[i+1:], n.elems[i:l])
	n.elems[i] = v
}

// removeAt removes and returns the element at i (0 <= i < len), moving
// the shorter side.
func (n *node) removeAt(i int) *node {
	l := len(n.elems)
	old := n.elems[i]
	if i < l/2 {
		copy(n.elems[1:i+1], n.elems[:i])
		n.elems[0] = nil
		n.off++
	} else {
		copy(n.elems[i:], n.elems[i+1:])
		n.elems[l-1] = nil
		n.back = n.back[:len(n.back)-1]
	}
	n.elems = n.back[n.off:]
	return old
}

// appendTo appends n's compact JSON: raw text when clean, else children.
func (n *node) appendTo(dst []byte) []byte {
	if n.raw != nil {
		return append(dst, n.raw...)
	}
	if n.kind == KindArray {
		dst = append(dst, '[')
		for i, e := range n.elems {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = e.appendTo(dst)
		}
		return append(dst, ']')
	}
	dst = append(dst, '{')
	for m := n.first; m != nil; m = m.next {
		if m != n.first {
			dst = append(dst, ',')
		}
		if m.keyRaw != nil {
			dst = append(dst, m.keyRaw...)
		} else {
			dst = appendQuoted(dst, m.key)
		}
		dst = append(dst, ':')
		dst = m.val.appendTo(dst)
	}
	return append(dst, '}')
}

// size approximates n's memory: its text plus a per-node overhead, in the
// same units Doc.size accumulates. A clean node's children are views of its
// text, so only dirty nodes (those on a path that changed) are descended
// into: O(1) for the values patches usually replace or remove.
func (n *node) size() int {
	if n.raw != nil {
		return len(n.raw) + nodeOverhead*(1+len(n.elems)+n.n)
	}
	s := nodeOverhead
	for _, e := range n.elems {
		s += e.size()
	}
	for m := n.first; m != nil; m = m.next {
		s += len(m.key) + 4 + m.val.size()
	}
	return s
}
