package jsondoc

import (
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/threadcast/threadcast/codec"
)

// NOTE: Apply runs ops in order against the live tree and logs, for every
// mutation, the record that reverses it. On the first failure the log is
// replayed backwards, which restores every pointer, member link and raw
// text exactly, so the document is byte-identical to before. Splitting a
// container is not logged: it changes representation, not value, and the
// container keeps its raw text until it is really modified.

type undoKind uint8

const (
	undoRoot      undoKind = iota // d.root = val
	undoRaw                       // n.raw = raw
	undoMemberVal                 // m.val = val
	undoLink                      // n.unlink(m)
	undoUnlink                    // n.relink(m)
	undoElemSet                   // n.elems[i] = val
	undoInsert                    // remove n.elems[i]
	undoRemove                    // insert val at n.elems[i]
)

type undoRec struct {
	kind undoKind
	i    int
	n    *node
	m    *member
	val  *node
	raw  []byte
}

// maxKeptUndo and maxKeptBuf bound the scratch the pool keeps, so one
// huge patch does not pin a large slice forever.
const (
	maxKeptUndo = 1024
	maxKeptBuf  = 64 << 10
)

// Apply applies an RFC 6902 patch atomically: either every op applies, or
// the document is left exactly as it was (byte-identical AppendJSON) and
// a *PatchError names the first op that failed and why (errors.Is against
// the sentinel causes). ops are not retained: values are copied and
// validated when inserted.
//
// Cost per op: O(path depth) lookups (O(1) per object level past
// indexThreshold members, else a short scan), plus O(size of the op's
// value), plus, the first time a container is traversed, one scan of its
// text to split it. Never O(document). The exceptions are inherent or
// bounded: copy and test cost O(size of the value copied or compared);
// replacing or removing a subtree that earlier patches modified walks it
// once to keep Size current; inserting into or removing from an array
// moves the element pointers between the index and the nearer end, so
// both ends are O(1) (amortised) and the middle O(length/2).
func (d *Doc) Apply(ops []codec.PatchOp) error { return d.apply(ops, false, false) }

// ApplyDecoded is Apply for ops a codec.Decoder produced: see Decoded
// input in the package doc. Values are copied, compacted and their strings
// checked, but not validated again.
func (d *Doc) ApplyDecoded(ops []codec.PatchOp) error { return d.apply(ops, true, false) }

// ApplyObject is Apply for a document that must stay an object (an
// activity's content): a patch whose result is not an object fails with
// ErrNotObject, naming the last op that wrote the root, and changes
// nothing.
func (d *Doc) ApplyObject(ops []codec.PatchOp) error { return d.apply(ops, false, true) }

// ApplyObjectDecoded is ApplyObject for ops a codec.Decoder produced.
func (d *Doc) ApplyObjectDecoded(ops []codec.PatchOp) error { return d.apply(ops, true, true) }

// patchError is the *PatchError of op, ops[i], with private copies of its
// pointers.
func patchError(i int, op *codec.PatchOp, reason string, err error) *PatchError {
	return &PatchError{
		Index: i, Op: op.Op,
		Path: strings.Clone(op.Path), From: strings.Clone(op.From),
		Reason: reason, Err: err,
	}
}

func (d *Doc) apply(ops []codec.PatchOp, decoded, object bool) error {
	p := patch{d: d}
	err := p.applyAll(ops, decoded, object)
	p.done() // not deferred: a defer cost more than the rest of a one-op patch's bookkeeping
	return err
}

func (p *patch) applyAll(ops []codec.PatchOp, decoded, object bool) error {
	d := p.d
	size := d.size
	for i := range ops {
		op := &ops[i]
		if e := p.applyOne(op, decoded); e != nil {
			p.rollback()
			d.size = size + p.splitSize
			return patchError(i, op, e.reason, e.err)
		}
	}
	if object && len(ops) > 0 && d.Kind() != KindObject {
		kind := d.Kind()
		p.rollback()
		d.size = size + p.splitSize
		i := len(ops) - 1
		for i > 0 && ops[i].Path != "" { // only an op on "" writes the root
			i--
		}
		return patchError(i, &ops[i], "the result is "+kind.String()+", and this document must stay an object", ErrNotObject)
	}
	// A root the patch replaced is referenced by nothing now (no op can
	// make an old root a value again) but may share the Doc's allocation:
	// zero it, so that it pins no text or children (see Doc.own).
	if p.rootSet {
		for k := range p.n {
			if r := p.rec(k); r.kind == undoRoot && r.val != nil {
				*r.val = node{}
			}
		}
	}
	return nil
}

// patch is what one Apply (or Get) needs while it runs and nothing keeps
// after: the undo log, the containers the current path went through, and
// the test op's buffer. It lives on the caller's stack, with the first
// localUndo records and localPath containers in arrays of its own: a
// delta of an op or two, most of them, then touches no pool and no heap
// for its bookkeeping. Arrays and counts, not slices of them, because a
// struct holding a slice of itself escapes to the heap (golang.org/issue
// 35518). What does not fit goes to a pooled scratch, so a long patch does
// not grow a log from nothing every time either.
type patch struct {
	d     *Doc
	n     int // undo records logged: local, then s.undo
	depth int // containers on the current path: path, then s.path
	s     *scratch
	// splitSize is what splits added to the size: splits survive a
	// rollback, so their accounting must too. It lives here, not in each
	// Doc, since no Doc needs it outside Apply.
	splitSize int
	rootSet   bool // an undoRoot record was logged

	local [localUndo]undoRec
	path  [localPath]*node
}

// localUndo and localPath size patch's arrays: one op at depth 2 logs up
// to three records (two cleared raw texts, one change) and a record is 64
// bytes, so the frame stays well under a kilobyte.
const (
	localUndo = 8
	localPath = 8
)

// scratch holds what outgrew a patch's arrays. Docs are many — every
// activity message's content and every item's metadata is one — and most
// are patched rarely or never, so it lives in a pool, not in each Doc.
type scratch struct {
	undo []undoRec
	path []*node
	buf  []byte
	tok  []byte // unescaped tokens; see unescape
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// scratch returns p's pooled scratch, taking one on first use.
func (p *patch) scratch() *scratch {
	if p.s == nil {
		p.s = scratchPool.Get().(*scratch)
	}
	return p.s
}

// log appends r to the undo log. The common case is small enough to be
// inlined at each of its dozen call sites.
func (p *patch) log(r undoRec) {
	if p.n < localUndo {
		p.local[p.n] = r
		p.n++
		return
	}
	p.logScratch(r)
}

func (p *patch) logScratch(r undoRec) {
	s := p.scratch()
	s.undo = append(s.undo, r)
	p.n++
}

// unescape is Unescape(tok) for a token with escapes, in p's scratch
// instead of a new string: a token is used only while its op runs (a
// member's name is copied, an error message formatted), and the scratch
// is only appended to until done, so no token's bytes change under it.
func (p *patch) unescape(tok string) string {
	s := p.scratch()
	start := len(s.tok)
	s.tok = appendUnescaped(s.tok, tok)
	return unsafe.String(unsafe.SliceData(s.tok[start:]), len(s.tok)-start)
}

// rec returns the k-th undo record, k < p.n.
func (p *patch) rec(k int) *undoRec {
	if k < localUndo {
		return &p.local[k]
	}
	return &p.s.undo[k-localUndo]
}

// push appends n to the current path. Like log, its common case inlines.
func (p *patch) push(n *node) {
	if p.depth < localPath {
		p.path[p.depth] = n
		p.depth++
		return
	}
	p.pushScratch(n)
}

func (p *patch) pushScratch(n *node) {
	s := p.scratch()
	s.path = append(s.path, n)
	p.depth++
}

// resetPath empties the current path.
func (p *patch) resetPath() {
	p.depth = 0
	if p.s != nil {
		clear(p.s.path)
		p.s.path = p.s.path[:0]
	}
}

// pathAt returns the k-th container of the current path, k < p.depth.
func (p *patch) pathAt(k int) *node {
	if k < localPath {
		return p.path[k]
	}
	return p.s.path[k-localPath]
}

// done clears the pooled scratch, if one was taken (its records point
// into the document), and returns it to the pool, unless one huge patch
// grew it past what is worth keeping.
func (p *patch) done() {
	if p.s != nil {
		p.release()
	}
}

func (p *patch) release() {
	s := p.s
	clear(s.undo)
	clear(s.path)
	s.undo, s.path, s.buf, s.tok = s.undo[:0], s.path[:0], s.buf[:0], s.tok[:0]
	if cap(s.undo) > maxKeptUndo || cap(s.buf) > maxKeptBuf || cap(s.tok) > maxKeptBuf {
		return
	}
	scratchPool.Put(s)
}

func (p *patch) applyOne(op *codec.PatchOp, decoded bool) *opError {
	if !checkPointer(op.Path) {
		return fail(ErrInvalidPointer, "path %s", quoteStr(op.Path))
	}
	switch op.Op {
	case codec.OpAdd, codec.OpReplace:
		if op.Value == nil {
			return fail(ErrBadOp, "%s without value", OpName(op.Op))
		}
		// A short decoded value, most of them, is compacted on the stack
		// and becomes a node only where it lands (valueAt), so that a new
		// member and its value take one allocation.
		var stack [smallValue]byte
		var v *node
		var text []byte
		if decoded && len(op.Value) <= smallValue {
			var ok bool
			if text, ok = compactInPlace(stack[:copy(stack[:], op.Value)]); !ok {
				return fail(ErrInvalidJSON, "value %s", quoteTrunc(op.Value))
			}
		} else {
			b, err := ingestAs(op.Value, decoded)
			if err != nil {
				return fail(ErrInvalidJSON, "value %s", quoteTrunc(op.Value))
			}
			v = rawNode(b)
		}
		if op.Op == codec.OpAdd {
			return p.add(op.Path, v, text, false)
		}
		return p.replace(op.Path, v, text)
	case codec.OpRemove:
		_, e := p.remove(op.Path, false)
		return e
	case codec.OpMove:
		return p.move(op.From, op.Path)
	case codec.OpCopy:
		return p.copy(op.From, op.Path)
	case codec.OpTest:
		if op.Value == nil {
			return fail(ErrBadOp, "test without value")
		}
		return p.test(op.Path, op.Value, decoded)
	}
	return fail(ErrBadOp, "unknown op kind %d", op.Op)
}

// valueAt is the node of an add or replace value: v, or if v is nil a node
// holding a copy of text, compact JSON of at most smallValue bytes.
func valueAt(v *node, text []byte) *node {
	if v != nil {
		return v
	}
	return smallNode(text)
}

// walk resolves every token of p but the last, leaving the containers it
// went through (root first, parent last) on p's path. path must not be
// "".
func (p *patch) walk(path string) (parent *node, last string, e *opError) {
	p.resetPath()
	cur := p.d.rootNode()
	i := 0
	for {
		tok, next, esc := nextToken(path, i)
		if esc {
			tok = p.unescape(tok)
		}
		if cur.kind != KindObject && cur.kind != KindArray {
			return nil, "", fail(ErrNotContainer, "%s at %s is not a container", cur.kind, quoteStr(path[:i]))
		}
		if !cur.split {
			p.splitSize += p.d.split(cur)
		}
		p.push(cur)
		if next == len(path) {
			return cur, tok, nil
		}
		child, e := cur.child(tok)
		if e != nil {
			e.reason += " at " + quoteStr(path[:next])
			return nil, "", e
		}
		cur = child
		i = next
	}
}

// child returns the existing child named by tok in split container c.
func (c *node) child(tok string) (*node, *opError) {
	if c.kind == KindObject {
		m := c.find(tok)
		if m == nil {
			return nil, fail(ErrNotFound, "no member %q", tok)
		}
		return m.val, nil
	}
	i, e := parseIndex(tok, len(c.elems()), false)
	if e != nil {
		return nil, e
	}
	return c.elems()[i], nil
}

// get returns the existing value at path.
func (p *patch) get(path string) (*node, *opError) {
	if path == "" {
		return p.d.rootNode(), nil
	}
	parent, tok, e := p.walk(path)
	if e != nil {
		return nil, e
	}
	n, e := parent.child(tok)
	if e != nil {
		e.reason += " at " + quoteStr(path)
	}
	return n, e
}

// markDirty drops the raw text of every container on p's path: they are
// about to change below or at themselves.
func (p *patch) markDirty() {
	for k := range p.depth {
		n := p.pathAt(k)
		if n.raw == nil {
			continue // already dirty (a clean child may sit below a dirty parent, so no early exit)
		}
		p.log(undoRec{kind: undoRaw, n: n, raw: n.raw})
		n.raw = nil
	}
}

func (p *patch) setRoot(v *node) {
	p.rootSet = true
	p.log(undoRec{kind: undoRoot, val: p.d.root})
	p.d.root = v
	p.d.size = v.size()
}

// add and remove keep Size current. A moved value stays in the document,
// so move passes moved=true and its size is neither subtracted nor added:
// measuring a modified subtree walks it, and a move must stay O(depth).
func (p *patch) add(path string, v *node, text []byte, moved bool) *opError {
	if path == "" {
		p.setRoot(valueAt(v, text))
		return nil
	}
	parent, tok, e := p.walk(path)
	if e != nil {
		return e
	}
	if parent.kind == KindObject {
		p.markDirty()
		if m := parent.find(tok); m != nil {
			v = valueAt(v, text)
			p.log(undoRec{kind: undoMemberVal, m: m, val: m.val})
			p.d.grow(valSize(v, moved) - m.val.size())
			m.val = v
			return nil
		}
		m := newMember(tok, v, text)
		p.d.grow(len(m.key) + 3 + valSize(m.val, moved))
		parent.link(m)
		p.log(undoRec{kind: undoLink, n: parent, m: m})
		return nil
	}
	i, e := parseIndex(tok, len(parent.elems()), true)
	if e != nil {
		e.reason += " at " + quoteStr(path)
		return e
	}
	v = valueAt(v, text)
	p.markDirty()
	p.d.grow(valSize(v, moved))
	parent.insert(i, v)
	p.log(undoRec{kind: undoInsert, n: parent, i: i})
	return nil
}

func valSize(v *node, moved bool) int {
	if moved {
		return 0
	}
	return v.size()
}

func (p *patch) remove(path string, moving bool) (*node, *opError) {
	if path == "" {
		old := p.d.rootNode()
		p.setRoot(nullNode()) // RFC-ambiguous; the reference consumer yields null
		return old, nil
	}
	parent, tok, e := p.walk(path)
	if e != nil {
		return nil, e
	}
	if parent.kind == KindObject {
		m := parent.find(tok)
		if m == nil {
			return nil, fail(ErrNotFound, "no member %q at %s", tok, quoteStr(path))
		}
		p.markDirty()
		p.d.grow(-(len(m.key) + 3 + valSize(m.val, moving)))
		parent.unlink(m)
		p.log(undoRec{kind: undoUnlink, n: parent, m: m})
		return m.val, nil
	}
	i, e := parseIndex(tok, len(parent.elems()), false)
	if e != nil {
		e.reason += " at " + quoteStr(path)
		return nil, e
	}
	p.markDirty()
	old := parent.removeAt(i)
	p.d.grow(-valSize(old, moving))
	p.log(undoRec{kind: undoRemove, n: parent, i: i, val: old})
	return old, nil
}

func (p *patch) replace(path string, v *node, text []byte) *opError {
	if path == "" {
		p.setRoot(valueAt(v, text))
		return nil
	}
	parent, tok, e := p.walk(path)
	if e != nil {
		return e
	}
	if parent.kind == KindObject {
		m := parent.find(tok)
		if m == nil {
			return fail(ErrNotFound, "no member %q at %s", tok, quoteStr(path))
		}
		v = valueAt(v, text)
		p.markDirty()
		p.log(undoRec{kind: undoMemberVal, m: m, val: m.val})
		p.d.grow(v.size() - m.val.size())
		m.val = v
		return nil
	}
	i, e := parseIndex(tok, len(parent.elems()), false)
	if e != nil {
		e.reason += " at " + quoteStr(path)
		return e
	}
	v = valueAt(v, text)
	p.markDirty()
	elems := parent.elems()
	p.log(undoRec{kind: undoElemSet, n: parent, i: i, val: elems[i]})
	p.d.grow(v.size() - elems[i].size())
	elems[i] = v
	return nil
}

func (p *patch) move(from, path string) *opError {
	if !checkPointer(from) {
		return fail(ErrInvalidPointer, "from %s", quoteStr(from))
	}
	if from == path { // RFC 6902 §4.4: from must exist; moving onto itself is a no-op
		_, e := p.get(from)
		return e
	}
	// Pointer escaping is canonical, so a textual prefix ending at a '/'
	// is exactly a token prefix; "" is a prefix of every other pointer.
	if len(path) > len(from) && path[len(from)] == '/' && path[:len(from)] == from {
		return fail(ErrMoveIntoChild, "from %s is a proper prefix of path", quoteStr(from))
	}
	v, e := p.remove(from, true)
	if e != nil {
		return e
	}
	return p.add(path, v, nil, true)
}

func (p *patch) copy(from, path string) *opError {
	if !checkPointer(from) {
		return fail(ErrInvalidPointer, "from %s", quoteStr(from))
	}
	src, e := p.get(from)
	if e != nil {
		return e
	}
	// Raw bytes are immutable, so a clean source shares them; a modified
	// one is written out once into fresh bytes. Either way the copy is a
	// separate node tree. A short one is passed as text, as an add's
	// value is: a new member then holds it, in one allocation, not two.
	raw := src.raw
	if raw == nil {
		raw = src.appendTo(nil)
	}
	if len(raw) <= smallValue {
		return p.add(path, nil, raw, false)
	}
	return p.add(path, rawNode(raw), nil, false)
}

func (p *patch) test(path string, want []byte, decoded bool) *opError {
	n, e := p.get(path)
	if e != nil {
		return e
	}
	got := n.raw
	if got == nil {
		s := p.scratch()
		s.buf = n.appendTo(s.buf[:0])
		got = s.buf
	}
	// Only want needs validating: the document's text is valid already,
	// and decoded text is structurally valid by codec.Raw's contract.
	valid := validJSON
	if decoded {
		valid = validStrings
	}
	if !valid(want) {
		return fail(ErrInvalidJSON, "test value %s", quoteTrunc(want))
	}
	if !equalValid(got, trimSpace(want)) {
		return fail(ErrTestFailed, "value at %s is %s, not %s", quoteStr(path), quoteTrunc(got), quoteTrunc(want))
	}
	return nil
}

func (p *patch) rollback() {
	for k := p.n - 1; k >= 0; k-- {
		r := p.rec(k)
		switch r.kind {
		case undoRoot:
			p.d.root = r.val
		case undoRaw:
			r.n.raw = r.raw
		case undoMemberVal:
			r.m.val = r.val
		case undoLink:
			r.n.unlink(r.m)
		case undoUnlink:
			r.n.relink(r.m)
		case undoElemSet:
			r.n.elems()[r.i] = r.val
		case undoInsert:
			r.n.removeAt(r.i)
		case undoRemove:
			r.n.insert(r.i, r.val)
		}
	}
}

// quoteStr quotes a pointer for an error message, truncated like
// quoteTrunc so a huge path does not make a huge error.
func quoteStr(s string) string {
	const max = 64
	if len(s) > max {
		return strconv.Quote(s[:max]) + "…"
	}
	return strconv.Quote(s)
}
