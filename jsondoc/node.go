package jsondoc

import (
	"strings"
	"unsafe"

	"github.com/threadcast/threadcast/internal/jsonscan"
)

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

// stackSpans is the size of ensureSplit's boundary scratch on the stack:
// three ints per member, two per element.
const stackSpans = 3 * 16

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
//
// A scalar or an unsplit container has no kids (nil): most nodes are the
// scalars a split produces, and keeping the container fields out of line
// makes them 48 bytes instead of 128, which is most of the bytes a split
// allocates and the GC scans.
type node struct {
	kind  Kind
	split bool
	raw   []byte
	*kids // non-nil exactly when split
}

// kids holds a split container's children.
type kids struct {
	// Array children: the live window back[off:] (elems) of a backing
	// array with off free slots in front, so an insert or remove moves
	// only the elements between the index and the nearer end. The window
	// is not kept as a slice of its own: most splits are objects, and 24
	// bytes more per split took a size class up.
	back []*node
	off  int

	first, last *member // object members in insertion order
	n           int     // member count
	index       map[string]*member
}

// elems returns a split array's elements.
func (k *kids) elems() []*node { return k.back[k.off:] }

// count returns the number of children of n: 0 unless n is split.
func (n *node) count() int {
	if n.kids == nil {
		return 0
	}
	return len(n.back) - n.off + n.n
}

// member is one name/value pair of an object, in a doubly linked list so
// that removal and its undo are O(1) and a replaced value keeps its place.
type member struct {
	key        string
	keyRaw     string // the name's original literal, quotes included, a view of raw text; "" for names set by a patch
	val        *node
	prev, next *member
}

var (
	nullRaw     = []byte("null")
	emptyObject = []byte("{}")
)

func rawNode(raw []byte) *node { return &node{kind: kindOf(raw), raw: raw} }

// smallValue is the longest value text smallNode holds inline.
const smallValue = 24

// nodeWithText is a node and the text it views, in one allocation: most
// patch values are short scalars, for which a separate copy of the bytes
// would double the allocations of every add and replace.
type nodeWithText struct {
	n   node
	buf [smallValue]byte
}

// smallNode is a node holding a copy of text, compact JSON of at most
// smallValue bytes.
func smallNode(text []byte) *node {
	nt := new(nodeWithText)
	b := nt.buf[:copy(nt.buf[:], text):len(text)]
	nt.n = node{kind: kindOf(b), raw: b}
	return &nt.n
}

// memberText is the room memberWithText has for a name and a value's text.
const memberText = 40

// memberWithText is a member added by a patch, its name and, when short,
// its value's node and text, in one allocation instead of three. As in a
// memberSlot, a value replaced later stays allocated with the member; it
// holds only its own text.
type memberWithText struct {
	m   member
	n   node
	buf [memberText]byte // the name, then the value's text
}

// newMember returns a member named key (copied) with value v, or if v is
// nil a node holding a copy of text, as valueAt.
func newMember(key string, v *node, text []byte) *member {
	if len(key)+len(text) > memberText {
		return &member{key: strings.Clone(key), val: valueAt(v, text)}
	}
	mt := new(memberWithText)
	k := copy(mt.buf[:], key)
	if v == nil {
		b := mt.buf[k : k+copy(mt.buf[k:], text) : k+len(text)]
		mt.n = node{kind: kindOf(b), raw: b}
		v = &mt.n
	}
	// Never written again, like raw text, so the name may view it.
	mt.m = member{key: unsafe.String(&mt.buf[0], k), val: v}
	return &mt.m
}

func nullNode() *node { return &node{kind: KindNull, raw: nullRaw} }

// ensureSplit builds n's children from its raw text, once. It is a change
// of representation only, so Apply does not log it for undo.
//
// It allocates per container, not per child: one scan records the child
// boundaries in a scratch on the stack (on the heap only past
// stackSpans/3 members, whose split then costs more anyway), then a
// container of up to 8 children gets its kids and children in one
// allocation (withKids): an array's nodes and element pointers
// (arrayBatch), an object's members and their value nodes (memberSlot),
// the names being views of the raw text. A child that outlives its
// siblings keeps the whole batch alive; it already keeps the parent's raw
// text alive (children and names are views of it), so the bound on what a
// split can pin is unchanged in kind: proportional to the text split.
func (n *node) ensureSplit() {
	if n.split || (n.kind != KindArray && n.kind != KindObject) {
		return
	}
	b := n.raw
	// Most Docs are small and split a container or two in their lifetime,
	// so a scratch kept per Doc would be allocated per split anyway.
	var stack [stackSpans]int
	sp := stack[:0]
	i := 1 // past '{' or '['
	if n.kind == KindArray {
		for b[i] != ']' {
			j := jsonscan.End(b, i)
			sp = append(sp, i, j)
			i = j
			if b[i] == ',' {
				i++
			}
		}
		kd, nodes, back := arrayBatch(len(sp) / 2)
		n.kids, n.split, kd.back = kd, true, back
		for k := range nodes {
			raw := b[sp[2*k]:sp[2*k+1]:sp[2*k+1]]
			nodes[k] = node{kind: kindOf(raw), raw: raw}
			n.back[k] = &nodes[k]
		}
		return
	}
	anyEscaped := false // then each name is looked at again
	for b[i] != '}' {
		k, escaped := scanString(b, i)
		anyEscaped = anyEscaped || escaped
		j := jsonscan.End(b, k+1)
		sp = append(sp, i, k, j)
		i = j
		if b[i] == ',' {
			i++
		}
	}
	cnt := len(sp) / 3
	var slots []memberSlot
	n.kids, slots = splitBatch(cnt)
	n.split = true
	for k := range slots {
		ks, ke, ve := sp[3*k], sp[3*k+1], sp[3*k+2]
		keyLit := b[ks:ke:ke]
		// A name without escapes (nearly all) is a view of the raw text:
		// raw bytes are never modified, and the children already keep the
		// text alive. An escaped one is decoded on its own.
		var key string
		if anyEscaped && hasEscape(keyLit) {
			key = decodeString(keyLit)
		} else if ke-ks > 2 {
			key = unsafe.String(&b[ks+1], ke-ks-2)
		}
		raw := b[ke+1 : ve : ve]
		slots[k].n = node{kind: kindOf(raw), raw: raw}
		val := &slots[k].n
		if m := n.find(key); m != nil {
			m.val = val // duplicate name: last wins, first position kept (as JSON.parse)
		} else {
			m := &slots[k].m
			m.key, m.keyRaw, m.val = key, unsafe.String(&b[ks], ke-ks), val
			n.link(m)
		}
	}
}

// memberSlot is one member of a split object and its value node, allocated
// together: a split costs one allocation for all of them.
type memberSlot struct {
	m member
	n node
}

// withKids is a split container's kids and its first children in one
// allocation: most containers split have a few children, and a second
// allocation per split was a tenth of the reducer's.
type withKids[A any] struct {
	k kids
	a A
}

// splitBatch returns new kids and cnt zeroed members, in one allocation
// up to 8 members. Sizes past 4 round up to 6 or 8, a tail no larger
// than what the allocator's size classes round up anyway.
func splitBatch(cnt int) (*kids, []memberSlot) {
	type T = memberSlot
	switch cnt {
	case 0:
		return new(kids), nil
	case 1:
		b := new(withKids[[1]T])
		return &b.k, b.a[:]
	case 2:
		b := new(withKids[[2]T])
		return &b.k, b.a[:]
	case 3:
		b := new(withKids[[3]T])
		return &b.k, b.a[:]
	case 4:
		b := new(withKids[[4]T])
		return &b.k, b.a[:]
	case 5, 6:
		b := new(withKids[[6]T])
		return &b.k, b.a[:cnt]
	case 7, 8:
		b := new(withKids[[8]T])
		return &b.k, b.a[:cnt]
	}
	return new(kids), make([]T, cnt)
}

// arraySlots are a split array's element nodes and the backing array of
// its element pointers, with room to append two more.
type arraySlots[N, P any] struct {
	nodes N
	back  P
}

// arrayBatch is splitBatch for an array of cnt elements: kids, nodes and
// element pointers (len cnt) in one allocation up to 8 elements. insert
// clears the pointers it moves out of, as this batch outlives them.
func arrayBatch(cnt int) (*kids, []node, []*node) {
	switch {
	case cnt == 0:
		return new(kids), nil, nil
	case cnt == 1:
		b := new(withKids[arraySlots[[1]node, [3]*node]])
		return &b.k, b.a.nodes[:], b.a.back[:1]
	case cnt == 2:
		b := new(withKids[arraySlots[[2]node, [4]*node]])
		return &b.k, b.a.nodes[:], b.a.back[:2]
	case cnt <= 4:
		b := new(withKids[arraySlots[[4]node, [6]*node]])
		return &b.k, b.a.nodes[:cnt], b.a.back[:cnt]
	case cnt <= 8:
		b := new(withKids[arraySlots[[8]node, [10]*node]])
		return &b.k, b.a.nodes[:cnt], b.a.back[:cnt]
	}
	return new(kids), make([]node, cnt), make([]*node, cnt)
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
	l := len(n.back) - n.off
	if i < l/2 {
		if n.off == 0 {
			// Make front room proportional to the length, so a run of
			// front inserts costs amortised O(1) each.
			slack := l/2 + 4
			nb := make([]*node, slack+l, slack+l+l/4+4)
			copy(nb[slack:], n.back)
			clear(n.back) // may be in a split batch (arrayBatch), which outlives it
			n.back, n.off = nb, slack
		}
		n.off--
		elems := n.elems()
		copy(elems[:i], elems[1:i+1])
		elems[i] = v
		return
	}
	old := n.back
	if n.back = append(n.back, nil); cap(old) < cap(n.back) {
		clear(old) // moved: see above
	}
	elems := n.elems()
	copy(elems[i+1:], elems[i:l])
	elems[i] = v
}

// removeAt removes and returns the element at i (0 <= i < len), moving
// the shorter side.
func (n *node) removeAt(i int) *node {
	elems := n.elems()
	l := len(elems)
	old := elems[i]
	if i < l/2 {
		copy(elems[1:i+1], elems[:i])
		elems[0] = nil
		n.off++
	} else {
		copy(elems[i:], elems[i+1:])
		elems[l-1] = nil
		n.back = n.back[:len(n.back)-1]
	}
	return old
}

// appendTo appends n's compact JSON: raw text when clean, else children.
func (n *node) appendTo(dst []byte) []byte {
	if n.raw != nil {
		return append(dst, n.raw...)
	}
	if n.kind == KindArray {
		dst = append(dst, '[')
		for i, e := range n.elems() {
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
		if m.keyRaw != "" {
			dst = append(dst, m.keyRaw...)
		} else {
			dst = appendQuoted(dst, m.key)
		}
		dst = append(dst, ':')
		dst = m.val.appendTo(dst)
	}
	return append(dst, '}')
}

// textLen is the length of appendTo's output, without writing it: a clean
// node's text, a dirty container's children with their separators.
func (n *node) textLen() int {
	if n.raw != nil {
		return len(n.raw)
	}
	s := 2 // brackets
	if n.kind == KindArray {
		es := n.elems()
		for _, e := range es {
			s += e.textLen()
		}
		return s + max(len(es)-1, 0)
	}
	for m := n.first; m != nil; m = m.next {
		if m.keyRaw != "" {
			s += len(m.keyRaw)
		} else {
			s += quotedLen(m.key)
		}
		s += 1 + m.val.textLen() // the colon, the value
	}
	return s + max(n.n-1, 0)
}

// size approximates n's memory: its text plus a per-node overhead, in the
// same units Doc.size accumulates. A clean node's children are views of its
// text, so only dirty nodes (those on a path that changed) are descended
// into: O(1) for the values patches usually replace or remove.
func (n *node) size() int {
	if n.raw != nil {
		return len(n.raw) + nodeOverhead*(1+n.count())
	}
	s := nodeOverhead
	for _, e := range n.elems() {
		s += e.size()
	}
	for m := n.first; m != nil; m = m.next {
		s += len(m.key) + 4 + m.val.size()
	}
	return s
}
