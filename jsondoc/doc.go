// Package jsondoc keeps one mutable JSON document and patches it with RFC
// 6902 JSON Patch in time proportional to the patch, not to the document.
//
// Its one job: hold a thread's agent state or an activity message's
// content, apply STATE_DELTA / ACTIVITY_DELTA patches to it atomically, and
// write it out as compact JSON. It also provides Equal, the semantic JSON
// equality the project's tests compare with.
//
// It does not decode patches (codec does: ops arrive as codec.PatchOp with
// syntax already checked and unknown ops already dropped), does not decide
// what a failing patch means for a run (the reducer warns and keeps the
// prior value, patterns.md §4.3), and does not merge recursively.
//
// # Lazy parsing
//
// Every byte entering a Doc (Parse, Set, MergeShallow, an op's value) is
// validated with sonic.Valid (unless the codec did already: see Decoded
// input) and copied once into a private compact buffer.
// Nothing is decoded then: the value is a single raw node over that text.
// A container is split into child nodes only when a patch path goes
// through it, and only one level: its children start raw. So a 10 MB
// snapshot costs one validation pass and one copy; the first delta
// touching /a/b scans the root's text once to find its members and the
// text of /a once; later deltas along known paths cost O(depth).
//
// Invariants, per node:
//   - a scalar is always raw; numbers keep their literal text, so nothing
//     is lost to float64 round-tripping;
//   - a container is raw, split, or both; when both, the raw text is still
//     exactly its value ("clean"), and AppendJSON writes it verbatim;
//   - modifying anything under a container clears the raw text of every
//     container on the path (O(depth)); unaffected siblings stay raw;
//   - raw bytes are never written after creation, so nodes (and copies
//     made by the copy op or Clone) may share them.
//
// Objects keep members in insertion order in a linked list (a replaced
// member keeps its place; an object over 16 members also gets a name
// index). Duplicate names in parsed text resolve as JSON.parse does: the
// last value wins at the first name's place. Unmodified text keeps its
// duplicates verbatim, so any last-wins reader sees the same value.
//
// Arrays are deques over a backing slice with free room at both ends, so
// inserting or removing at either end is O(1) amortised and in the middle
// moves half the element pointers (never any text).
//
// Splitting allocates per container, not per child: a container of up to
// 8 children gets its kids, nodes, members and element pointers in one
// batch, names without escapes are views of its text, and a scalar node is
// 48 bytes (container fields live apart, in kids). A child that outlives
// its siblings keeps its batch alive, as it keeps the parent's text alive.
// A member a patch adds comes with its name and, when short, its value in
// one allocation. The root node lives in the Doc, and ParseDecoded puts a
// short text there too, so a small document starts as one allocation.
//
// MergeShallow into null or a small unsplit object writes the merged text
// instead of splitting both sides: the document stays one raw node.
//
// Size is an O(1) running estimate (text length plus a fixed cost per
// split node) for memory accounting.
//
// # Atomicity
//
// Apply mutates in place and logs for each mutation the record that
// reverses it (old root, old member value, unlinked member, removed
// element, cleared raw text). If an op fails the log is replayed backwards
// and the document is byte-identical to before: no deep copy is ever
// taken. Splitting is not logged, as it does not change the value.
//
// # Sonic
//
// Sonic does the validation (sonic.Valid, SIMD on amd64) on a zero-padded
// private copy — its validator reads past the end of a slice that stops
// inside a literal — and a SWAR pass over that copy compacts it in place
// and checks string contents, which sonic.Valid does not (raw control
// characters and bad escapes pass it). Together they accept exactly what
// encoding/json.Valid accepts (FuzzParse checks this), except that nesting
// deeper than 4096 levels, sonic's limit, is rejected (encoding/json
// allows 10000).
//
// Sonic's lazy ast.Node was the alternative. It parses on demand too, and
// a bare in-place Set is as fast as Apply; but it has no rollback (an
// atomic patch would need a copy of every container it touches), and
// writing out a modified ast.Node re-encodes the loaded nodes instead of
// copying untouched text. Measured with BenchmarkVsSonicAST (one deep
// replace, then the whole document written out, as the reducer does to
// publish a view), one run on a loaded 2-core machine (runs vary ±2x),
// sonic vs jsondoc: 10 KB 11.6 µs vs 1.7 µs; 1 MB 3.6 ms vs 1.3 ms; 10 MB
// 38 ms and 43 MB allocated per delta vs 8.2 ms and 0.16 MB.
//
// # Decoded input
//
// ParseDecoded, SetDecoded, MergeShallowDecoded and ApplyDecoded take text
// a codec.Decoder produced (a codec.Raw, an Event.Clone of one, or a
// PatchOp's Value), which the codec has already validated as one complete
// JSON value: that is codec.Raw's contract, and the trust boundary. They
// skip sonic.Valid and only copy, compact and check string contents, which
// cannot read out of bounds on any input. Text from anywhere else must go
// through Parse, Set, MergeShallow and Apply: the scanners that split
// containers rely on the document's text being valid.
//
// Finding value boundaries in text already known to be valid and compact
// needs no validation, so a small Go scanner does it.
//
// # Concurrency
//
// A Doc is not safe for concurrent use, including concurrent reads: Len
// and Get split containers, and any read of the zero Doc materialises its
// null. The reducer owns each Doc from one goroutine (DESIGN.md contract
// 1). Distinct Docs, Clones included, share only immutable bytes and may be
// used from different goroutines; Equal and the pointer helpers are pure
// functions.
package jsondoc
