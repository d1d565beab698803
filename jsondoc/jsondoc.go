package jsondoc

// Doc is one mutable JSON value of any kind. The zero Doc is JSON null and
// ready to use. A Doc is not safe for concurrent use; see the package doc.
type Doc struct {
	root *node // nil means null

	// Scratch reused across Apply calls; see apply.go.
	undo  []undoRec
	stack []*node
	buf   []byte
}

// Parse returns a Doc holding a private, compact copy of raw, which must be
// exactly one JSON value (surrounding whitespace allowed). raw is not
// retained: the caller may reuse it as soon as Parse returns. Nothing is
// split into children yet, so the cost is one validation pass and one copy.
func Parse(raw []byte) (*Doc, error) {
	b, err := ingest(raw)
	if err != nil {
		return nil, err
	}
	return &Doc{root: rawNode(b)}, nil
}

// Set replaces the whole value with a private copy of raw (a snapshot). On
// error d is unchanged.
func (d *Doc) Set(raw []byte) error {
	b, err := ingest(raw)
	if err != nil {
		return err
	}
	d.root = rawNode(b)
	return nil
}

// Reset makes d JSON null and drops everything it held.
func (d *Doc) Reset() { d.root = nil }

func (d *Doc) rootNode() *node {
	if d.root == nil {
		d.root = nullNode()
	}
	return d.root
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
func (d *Doc) Len() int { return d.rootNode().length() }

// Size approximates the memory the value holds, in bytes: its JSON text
// plus a fixed overhead per node that has been split out. It is meant for
// memory accounting, not for sizing buffers (use AppendJSON for that). It
// descends only into containers changed since they were parsed.
func (d *Doc) Size() int { return d.rootNode().size() }

// AppendJSON appends the value as compact JSON to dst and returns the
// extended slice. Unmodified subtrees are copied verbatim from the text
// they were parsed from; object members keep insertion order (a replaced
// member keeps its place). Text that had duplicate member names keeps them
// while unmodified; once an object is modified, only the last value of a
// duplicated name remains, at the first name's place (as JSON.parse does).
func (d *Doc) AppendJSON(dst []byte) []byte { return d.rootNode().appendTo(dst) }

// Clone returns an independent deep copy of d. It costs one serialisation
// of d; the copy starts unsplit.
func (d *Doc) Clone() *Doc {
	if d.root == nil {
		return &Doc{}
	}
	if d.root.raw != nil {
		return &Doc{root: rawNode(d.root.raw)} // raw bytes are immutable: share them
	}
	return &Doc{root: rawNode(d.root.appendTo(nil))}
}

// Get appends the JSON of the value at the JSON Pointer ptr (escaped, as
// in a patch) to dst. It fails with ErrInvalidPointer, ErrNotFound,
// ErrBadIndex or ErrNotContainer, wrapped.
func (d *Doc) Get(dst []byte, ptr string) ([]byte, error) {
	if !checkPointer(ptr) {
		return dst, fail(ErrInvalidPointer, "%q", ptr)
	}
	n, e := d.get(ptr)
	d.clearStack()
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
func (d *Doc) MergeShallow(obj []byte) error {
	b, err := ingest(obj)
	if err != nil {
		return err
	}
	if kindOf(b) != KindObject {
		return fail(ErrNotObject, "merge source is %s", kindOf(b))
	}
	r := d.rootNode()
	switch r.kind {
	case KindNull:
		r = &node{kind: KindObject, split: true}
		d.root = r
	case KindObject:
		r.ensureSplit()
	default:
		return fail(ErrNotObject, "merge target is %s", r.kind)
	}
	src := rawNode(b)
	src.ensureSplit()
	if src.n == 0 {
		return nil
	}
	r.raw = nil
	for m := src.first; m != nil; m = m.next {
		if old := r.find(m.key); old != nil {
			old.val = m.val
		} else {
			r.link(&member{key: m.key, keyRaw: m.keyRaw, val: m.val})
		}
	}
	return nil
}

// Error makes internal failures usable as errors outside Apply (Get,
// MergeShallow): the message carries the package prefix via the sentinel.
func (e *opError) Error() string { return e.err.Error() + ": " + e.reason }

// Unwrap returns the sentinel cause.
func (e *opError) Unwrap() error { return e.err }
