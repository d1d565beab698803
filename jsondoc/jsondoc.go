package jsondoc

import (
	"bytes"
	"slices"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/internal/jsonscan"
)

// Doc is one mutable JSON value of any kind. The zero Doc is JSON null and
// ready to use. A Doc is not safe for concurrent use; see the package doc.
// A Doc must not be copied after first use (the copy would share the
// tree); Clone makes an independent one.
type Doc struct {
	root *node // nil means null
	size int   // approximate bytes held; see Size

	// own is the root node until something replaces the root: most Docs
	// are parsed or set once and never replaced whole, so a Doc and its
	// root take one allocation, or none in a struct (a thread's state). A
	// root that is replaced is overwritten or zeroed (set, Reset, commit),
	// so own never holds a replaced value's text or children.
	own node
}

// Parse returns a Doc holding a private, compact copy of raw, which must be
// exactly one JSON value (surrounding whitespace allowed). raw is not
// retained: the caller may reuse it as soon as Parse returns. Nothing is
// split into children yet, so the cost is one validation pass and one copy.
func Parse(raw []byte) (*Doc, error) { return parse(raw, false) }

// ParseDecoded is Parse for a codec.Raw a codec.Decoder produced: see
// Decoded input in the package doc.
func ParseDecoded(raw codec.Raw) (*Doc, error) { return parse(raw, true) }

func parse(raw []byte, decoded bool) (*Doc, error) {
	if decoded && len(raw) <= shortDoc {
		if d := newShortDoc(raw); d != nil {
			return d, nil
		}
		return nil, errInvalidJSON(raw)
	}
	b, err := ingestAs(raw, decoded)
	if err != nil {
		return nil, err
	}
	return newDoc(b), nil
}

func newDoc(b []byte) *Doc {
	d := new(Doc)
	d.init(b)
	return d
}

// init makes d the document of text b, its root held in d itself.
func (d *Doc) init(b []byte) {
	*d = Doc{own: node{kind: kindOf(b), raw: b}, size: len(b) + nodeOverhead}
	d.root = &d.own
}

// shortDoc is the longest text newShortDoc holds inline: most metadata and
// activity content of short threads fits.
const shortDoc = 56

// docWithText is a Doc and its text in one allocation. Only this Doc's
// nodes may view buf (Clone copies a text this short rather than share
// it), so the text pins nothing but its own Doc; once replaced it is at
// most shortDoc dead bytes.
type docWithText struct {
	d   Doc
	buf [shortDoc]byte
}

// newShortDoc is ingestDecoded+newDoc for text of at most shortDoc bytes,
// in one allocation. It returns nil if compactInPlace refuses the text.
func newShortDoc(raw []byte) *Doc {
	dt := new(docWithText)
	b, ok := compactInPlace(dt.buf[:copy(dt.buf[:], raw)])
	if !ok {
		return nil
	}
	dt.d.init(b[:len(b):len(b)])
	return &dt.d
}

// Set replaces the whole value with a private copy of raw (a snapshot). On
// error d is unchanged.
func (d *Doc) Set(raw []byte) error { return d.set(raw, false) }

// SetDecoded is Set for a codec.Raw a codec.Decoder produced: see Decoded
// input in the package doc.
func (d *Doc) SetDecoded(raw codec.Raw) error { return d.set(raw, true) }

func (d *Doc) set(raw []byte, decoded bool) error {
	b, err := ingestAs(raw, decoded)
	if err != nil {
		return err
	}
	// The root node is referenced by d alone, so it is reused in place.
	if d.root == nil {
		d.root = &d.own
	}
	*d.root = node{kind: kindOf(b), raw: b}
	d.size = len(b) + nodeOverhead
	return nil
}

// Reset makes d JSON null and drops everything it held.
func (d *Doc) Reset() {
	if d.root != nil {
		*d.root = node{} // see own
	}
	d.root, d.size = nil, 0
}

func (d *Doc) rootNode() *node {
	if d.root == nil {
		d.own = node{kind: KindNull, raw: nullRaw}
		d.root = &d.own
		d.size = len(nullRaw) + nodeOverhead
	}
	return d.root
}

// split splits n if it is an unsplit container, accounting for the nodes
// it creates, and returns what it added to the size.
func (d *Doc) split(n *node) int {
	if n.split || (n.kind != KindArray && n.kind != KindObject) {
		return 0
	}
	n.ensureSplit()
	grown := nodeOverhead * n.count()
	d.size += grown
	return grown
}

// grow adjusts the size estimate; it never goes negative.
func (d *Doc) grow(delta int) {
	if d.size += delta; d.size < 0 {
		d.size = 0
	}
}

// Kind returns the JSON kind of the whole value.
func (d *Doc) Kind() Kind {
	if d.root == nil {
		return KindNull
	}
	return d.root.kind
}

// Len returns the number of elements (array) or members (object) of the
// value, 0 for a scalar. It splits the top-level container if it was not
// split yet (one scan of its text).
func (d *Doc) Len() int {
	r := d.rootNode()
	d.split(r)
	return r.count()
}

// Size approximates the memory the value holds, in bytes: the length of
// its JSON text plus a fixed overhead for every node split out so far. It
// is kept up to date by every change, so it costs O(1); it is meant for
// memory accounting, not for sizing buffers (AppendJSON sizes its own).
// It can overstate what is live: a subtree still shares the buffer it was
// parsed from after its siblings are removed.
func (d *Doc) Size() int {
	if d.root == nil {
		return 0
	}
	return d.size
}

// TextLen returns the length of the value's compact JSON text: what
// AppendJSON appends. Unlike Size, it does not depend on how much of the
// value has been split into nodes, so a Doc and one set from its text
// report the same. It is O(1) for a value not changed since it was set;
// after patches it walks the containers they changed (their unchanged
// children count by their text), so a caller measures it once per change,
// not per read.
func (d *Doc) TextLen() int {
	if d.root == nil {
		return len(nullRaw)
	}
	return d.root.textLen()
}

// AppendJSON appends the value as compact JSON to dst and returns the
// extended slice. Unmodified subtrees are copied verbatim from the text
// they were parsed from; object members keep insertion order (a replaced
// member keeps its place). Text that had duplicate member names keeps them
// while unmodified; once an object is modified, only the last value of a
// duplicated name remains, at the first name's place (as JSON.parse does).
func (d *Doc) AppendJSON(dst []byte) []byte {
	r := d.rootNode()
	if r.raw == nil {
		// Size is at least the text length in practice (it adds per-node
		// overhead), so writing into a nil dst allocates once, not log(n) times.
		dst = slices.Grow(dst, d.size)
	}
	return r.appendTo(dst)
}

// Clone returns an independent deep copy of d. It costs one serialisation
// of d; the copy starts unsplit.
func (d *Doc) Clone() *Doc {
	if d.root == nil {
		return &Doc{}
	}
	raw := d.root.raw
	switch {
	case raw == nil:
		return newDoc(d.root.appendTo(nil))
	case len(raw) <= shortDoc: // may be a docWithText's: see there
		return newShortDoc(raw)
	}
	return newDoc(raw) // raw bytes are immutable: share them
}

// Get appends the JSON of the value at the JSON Pointer ptr (escaped, as
// in a patch) to dst. It fails with ErrInvalidPointer, ErrNotFound,
// ErrBadIndex or ErrNotContainer, wrapped.
func (d *Doc) Get(dst []byte, ptr string) ([]byte, error) {
	if !checkPointer(ptr) {
		return dst, fail(ErrInvalidPointer, "%q", ptr)
	}
	p := patch{d: d}
	n, e := p.get(ptr)
	p.done()
	if e != nil {
		return dst, e
	}
	return n.appendTo(dst), nil
}

// MergeShallow sets each top-level member of obj, which must be a JSON
// object, on d: the last write wins per name, values (null included) are
// taken whole, nothing is merged recursively. d must hold an object, or
// null, which becomes an empty object first. obj is copied, not retained.
// On error d is unchanged.
func (d *Doc) MergeShallow(obj []byte) error { return d.mergeShallow(obj, false) }

// MergeShallowDecoded is MergeShallow for a codec.Raw a codec.Decoder
// produced: see Decoded input in the package doc.
func (d *Doc) MergeShallowDecoded(obj codec.Raw) error { return d.mergeShallow(obj, true) }

func (d *Doc) mergeShallow(obj []byte, decoded bool) error {
	// A small decoded source is compacted on the stack: mergeText copies
	// what it needs into the merged text, so the usual metadata merge costs
	// one allocation. mergeNodes keeps views of the source, so it gets a
	// heap copy.
	if decoded && len(obj) <= mergeStackSrc {
		var stack [mergeStackSrc]byte
		b, ok := compactInPlace(stack[:copy(stack[:], obj)])
		if !ok {
			return errInvalidJSON(obj)
		}
		r, err := d.mergeTarget(b)
		if err != nil || d.mergeText(r, b) {
			return err
		}
		d.mergeNodes(r, bytes.Clone(b))
		return nil
	}
	b, err := ingestAs(obj, decoded)
	if err != nil {
		return err
	}
	r, err := d.mergeTarget(b)
	if err != nil || d.mergeText(r, b) {
		return err
	}
	d.mergeNodes(r, b)
	return nil
}

// mergeTarget checks that src, compact text, and d are both objects (or d
// null) and returns d's root.
func (d *Doc) mergeTarget(src []byte) (*node, error) {
	if kindOf(src) != KindObject {
		return nil, fail(ErrNotObject, "merge source is %s", kindOf(src))
	}
	r := d.rootNode()
	if r.kind != KindNull && r.kind != KindObject {
		return nil, fail(ErrNotObject, "merge target is %s", r.kind)
	}
	return r, nil
}

// mergeNodes merges src, a private compact object, into the root r by
// splitting both. src's members and nodes become part of d.
func (d *Doc) mergeNodes(r *node, src []byte) {
	if r.kind == KindNull {
		*r = node{kind: KindObject, split: true, kids: new(kids)}
		d.size = nodeOverhead
	} else {
		d.split(r)
	}
	s := rawNode(src)
	s.ensureSplit()
	if s.n == 0 {
		return
	}
	r.raw = nil
	// s is private and dropped after the loop, so its members move into
	// r as they are (link rewrites their list pointers; next is read first).
	for m, next := s.first, (*member)(nil); m != nil; m = next {
		next = m.next
		if old := r.find(m.key); old != nil {
			d.grow(m.val.size() - old.val.size())
			old.val = m.val
		} else {
			d.grow(len(m.keyRaw) + m.val.size())
			r.link(m)
		}
	}
}

// Bounds of mergeText's fast path: the source bytes compacted on the
// stack, the target text rescanned and rewritten per merge, and the
// distinct names of both (a linear scan each, so quadratic in this
// bound). Past them a split target merges faster: BenchmarkMergeShallow's
// 10-member target took 1.5x as long rewritten as split.
const (
	mergeStackSrc    = 512
	mergeTextTarget  = 256
	mergeTextMembers = 8
)

// textMember is one name/value pair found in compact object text: in
// texts[in] (0 the target, 1 the source), the name's literal (quotes
// included) is [ks:ke] and the value is [ke+1:ve]. Offsets, not views,
// so that the source can stay on mergeShallow's stack.
type textMember struct{ in, ks, ke, ve int }

// mergeText merges src, a compact object, into r, the root, when r is
// null or an unsplit object of at most mergeTextTarget bytes and both hold
// at most mergeTextMembers distinct names, none escaped: it writes the
// merged text and r stays one raw node. That is what metadata merges are,
// and splitting both sides into nodes cost six allocations where this
// costs one. The text is what mergeNodes would write out: the target's
// names in first-occurrence order, then the new ones, each with its last
// value. It reports false, changing nothing, when the bounds do not hold.
func (d *Doc) mergeText(r *node, src []byte) bool {
	if r.split || len(r.raw) > mergeTextTarget {
		return false
	}
	if len(src) == 2 && r.kind == KindObject { // {}: nothing to merge; keep r's text as it is
		return true
	}
	texts := [2][]byte{nil, src}
	var stack [mergeTextMembers]textMember
	ms := stack[:0]
	ok := true
	if r.kind == KindObject {
		texts[0] = r.raw
		ms, ok = appendTextMembers(ms, &texts, 0)
	}
	if !ok {
		return false
	}
	if ms, ok = appendTextMembers(ms, &texts, 1); !ok {
		return false
	}
	n := 2 + max(len(ms)-1, 0) // braces and commas
	for _, m := range ms {
		n += m.ve - m.ks
	}
	out := make([]byte, 0, n)
	out = append(out, '{')
	for i, m := range ms {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, texts[m.in][m.ks:m.ve]...)
	}
	out = append(out, '}')
	r.kind, r.raw = KindObject, out
	d.size = len(out) + nodeOverhead
	return true
}

// appendTextMembers adds the members of texts[in], a compact object, to
// ms: a name already in ms takes the new value in place. It reports false
// when a name is escaped (equal names could then differ in text) or ms
// would outgrow its capacity.
func appendTextMembers(ms []textMember, texts *[2][]byte, in int) ([]textMember, bool) {
	obj := texts[in]
	for i := 1; obj[i] != '}'; {
		k, escaped := scanString(obj, i)
		j := jsonscan.End(obj, k+1)
		key := obj[i:k]
		if escaped {
			return ms, false
		}
		found := false
		for x := range ms {
			if m := &ms[x]; m.ke-m.ks == len(key) && string(texts[m.in][m.ks:m.ke]) == string(key) {
				*m, found = textMember{in, i, k, j}, true // same name text, so it may come from here too
				break
			}
		}
		if !found {
			if len(ms) == cap(ms) {
				return ms, false
			}
			ms = append(ms, textMember{in, i, k, j})
		}
		if i = j; obj[i] == ',' {
			i++
		}
	}
	return ms, true
}

// Error makes internal failures usable as errors outside Apply (Get,
// MergeShallow): the message carries the package prefix via the sentinel.
func (e *opError) Error() string { return e.err.Error() + ": " + e.reason }

// Unwrap returns the sentinel cause.
func (e *opError) Unwrap() error { return e.err }
