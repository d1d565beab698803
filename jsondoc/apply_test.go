package jsondoc

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/threadcast/threadcast/codec"
)

func TestApply(t *testing.T) {
	tests := []struct {
		name    string
		give    string // document
		patch   string
		want    string // document after (semantic), when wantErr is nil
		wantErr error  // sentinel cause; document must then be byte-identical
		wantIdx int    // failing op index
	}{
		// add
		{name: "add new member", give: `{"a":1}`, patch: `[{"op":"add","path":"/b","value":2}]`, want: `{"a":1,"b":2}`},
		{name: "add replaces existing member", give: `{"a":1}`, patch: `[{"op":"add","path":"/a","value":[1]}]`, want: `{"a":[1]}`},
		{name: "add null value", give: `{}`, patch: `[{"op":"add","path":"/a","value":null}]`, want: `{"a":null}`},
		{name: "add dash is a member name on objects", give: `{}`, patch: `[{"op":"add","path":"/-","value":1}]`, want: `{"-":1}`},
		{name: "add empty key", give: `{}`, patch: `[{"op":"add","path":"/","value":1}]`, want: `{"":1}`},
		// A short value lands with a new member in one memberWithText;
		// past memberText bytes of name and value, or smallValue of value,
		// they are apart (boundaries on both sides).
		{name: "add new member, name and value fill memberWithText", give: `{}`,
			patch: `[{"op":"add","path":"/` + strings.Repeat("k", memberText-smallValue) + `","value":"` + strings.Repeat("v", smallValue-2) + `"}]`,
			want:  `{"` + strings.Repeat("k", memberText-smallValue) + `":"` + strings.Repeat("v", smallValue-2) + `"}`},
		{name: "add new member, name and value past memberWithText", give: `{}`,
			patch: `[{"op":"add","path":"/` + strings.Repeat("k", memberText-smallValue+1) + `","value":"` + strings.Repeat("v", smallValue-2) + `"}]`,
			want:  `{"` + strings.Repeat("k", memberText-smallValue+1) + `":"` + strings.Repeat("v", smallValue-2) + `"}`},
		{name: "add new member, value past smallValue", give: `{}`,
			patch: `[{"op":"add","path":"/k","value":"` + strings.Repeat("v", smallValue-1) + `"}]`,
			want:  `{"k":"` + strings.Repeat("v", smallValue-1) + `"}`},
		{name: "add new member, spaced value compacted", give: `{}`, patch: `[{"op":"add","path":"/k","value":[ 1 , {"a" : 2} ]}]`, want: `{"k":[1,{"a":2}]}`},
		{name: "add new member, then patch inside its value", give: `{}`, patch: `[{"op":"add","path":"/k","value":{"a":[]}},{"op":"add","path":"/k/a/-","value":1},{"op":"add","path":"/k/b","value":2}]`, want: `{"k":{"a":[1],"b":2}}`},
		{name: "add new member, replaced, moved away", give: `{"a":0}`, patch: `[{"op":"add","path":"/k","value":1},{"op":"replace","path":"/k","value":2},{"op":"add","path":"/m","value":3},{"op":"move","from":"/m","path":"/n"}]`, want: `{"a":0,"k":2,"n":3}`},
		{name: "add new member holding a moved value", give: `{"a":[1,2]}`, patch: `[{"op":"move","from":"/a","path":"/b"}]`, want: `{"b":[1,2]}`},
		{name: "add nested", give: `{"a":{"b":{}}}`, patch: `[{"op":"add","path":"/a/b/c","value":true}]`, want: `{"a":{"b":{"c":true}}}`},
		{name: "add array insert front", give: `[1,2]`, patch: `[{"op":"add","path":"/0","value":0}]`, want: `[0,1,2]`},
		{name: "add array insert middle", give: `[1,3]`, patch: `[{"op":"add","path":"/1","value":2}]`, want: `[1,2,3]`},
		{name: "add array index == len appends", give: `{"xs":[1,2,3]}`, patch: `[{"op":"add","path":"/xs/3","value":4}]`, want: `{"xs":[1,2,3,4]}`},
		{name: "add dash appends", give: `[1]`, patch: `[{"op":"add","path":"/-","value":2}]`, want: `[1,2]`},
		{name: "add dash to empty array", give: `{"a":[]}`, patch: `[{"op":"add","path":"/a/-","value":{"x":1}}]`, want: `{"a":[{"x":1}]}`},
		{name: "add at root replaces doc", give: `{"a":1}`, patch: `[{"op":"add","path":"","value":[1]}]`, want: `[1]`},
		{name: "add index past end fails", give: `{"xs":[1,2,3]}`, patch: `[{"op":"add","path":"/xs/9","value":9}]`, wantErr: ErrBadIndex},
		{name: "add leading zero fails", give: `[1,2]`, patch: `[{"op":"add","path":"/01","value":9}]`, wantErr: ErrBadIndex},
		{name: "add negative index fails", give: `[1,2]`, patch: `[{"op":"add","path":"/-1","value":9}]`, wantErr: ErrBadIndex},
		{name: "add non-numeric token on array fails", give: `[1,2]`, patch: `[{"op":"add","path":"/x","value":9}]`, wantErr: ErrBadIndex},
		{name: "add missing parent fails", give: `{}`, patch: `[{"op":"add","path":"/a/b","value":1}]`, wantErr: ErrNotFound},
		{name: "add through scalar fails", give: `{"a":1}`, patch: `[{"op":"add","path":"/a/b","value":1}]`, wantErr: ErrNotContainer},
		{name: "add into string root fails", give: `"s"`, patch: `[{"op":"add","path":"/a","value":1}]`, wantErr: ErrNotContainer},
		{name: "add into null root fails", give: `null`, patch: `[{"op":"add","path":"/a","value":1}]`, wantErr: ErrNotContainer},
		{name: "add huge index fails", give: `[1]`, patch: `[{"op":"add","path":"/99999999999999999999999","value":9}]`, wantErr: ErrBadIndex},
		// remove
		{name: "remove member", give: `{"a":1,"b":2}`, patch: `[{"op":"remove","path":"/a"}]`, want: `{"b":2}`},
		{name: "remove element", give: `{"xs":[1,2,3]}`, patch: `[{"op":"remove","path":"/xs/0"}]`, want: `{"xs":[2,3]}`},
		{name: "remove last element", give: `[1,2,3]`, patch: `[{"op":"remove","path":"/2"}]`, want: `[1,2]`},
		{name: "remove root yields null", give: `{"a":1}`, patch: `[{"op":"remove","path":""}]`, want: `null`},
		{name: "remove missing member fails", give: `{"a":1}`, patch: `[{"op":"remove","path":"/b"}]`, wantErr: ErrNotFound},
		{name: "remove index == len fails", give: `[1,2]`, patch: `[{"op":"remove","path":"/2"}]`, wantErr: ErrBadIndex},
		{name: "remove dash fails", give: `[1,2]`, patch: `[{"op":"remove","path":"/-"}]`, wantErr: ErrBadIndex},
		{name: "remove with extra value member applies", give: `{"a":1,"b":2}`, patch: `[{"op":"remove","path":"/a","value":"leftover"},{"op":"add","path":"/c","value":3,"x-note":"ignored"}]`, want: `{"b":2,"c":3}`},
		// replace
		{name: "replace member", give: `{"a":1,"b":2}`, patch: `[{"op":"replace","path":"/a","value":"x"}]`, want: `{"a":"x","b":2}`},
		{name: "replace element", give: `[1,2]`, patch: `[{"op":"replace","path":"/1","value":{"k":[]}}]`, want: `[1,{"k":[]}]`},
		{name: "replace root with scalar", give: `{"a":1}`, patch: `[{"op":"replace","path":"","value":42}]`, want: `42`},
		{name: "replace missing member fails", give: `{"a":1}`, patch: `[{"op":"replace","path":"/b","value":1}]`, wantErr: ErrNotFound},
		{name: "replace leading zero fails", give: `{"xs":[1,2,3]}`, patch: `[{"op":"replace","path":"/xs/01","value":9}]`, wantErr: ErrBadIndex},
		{name: "replace dash fails", give: `{"xs":[1]}`, patch: `[{"op":"replace","path":"/xs/-","value":9}]`, wantErr: ErrBadIndex},
		// move
		{name: "move member", give: `{"a":{"x":1},"b":{}}`, patch: `[{"op":"move","from":"/a/x","path":"/b/y"}]`, want: `{"a":{},"b":{"y":1}}`},
		{name: "move element within array", give: `[1,2,3,4]`, patch: `[{"op":"move","from":"/1","path":"/3"}]`, want: `[1,3,4,2]`},
		{name: "move to same location is a no-op", give: `{"a":1}`, patch: `[{"op":"move","from":"/a","path":"/a"}]`, want: `{"a":1}`},
		{name: "move to same missing location fails", give: `{"a":1}`, patch: `[{"op":"move","from":"/b","path":"/b"}]`, wantErr: ErrNotFound},
		{name: "move into own child fails", give: `{"a":{"c":1}}`, patch: `[{"op":"move","from":"/a","path":"/a/c"}]`, wantErr: ErrMoveIntoChild},
		{name: "move root into child fails", give: `{"a":{}}`, patch: `[{"op":"move","from":"","path":"/a/b"}]`, wantErr: ErrMoveIntoChild},
		{name: "move to sibling with common prefix applies", give: `{"a":1}`, patch: `[{"op":"move","from":"/a","path":"/ab"}]`, want: `{"ab":1}`},
		{name: "move missing from fails", give: `{}`, patch: `[{"op":"move","from":"/x","path":"/y"}]`, wantErr: ErrNotFound},
		{name: "move child over its parent", give: `{"a":{"b":{"c":1}}}`, patch: `[{"op":"move","from":"/a/b","path":"/a"}]`, want: `{"a":{"c":1}}`},
		{name: "move to root", give: `{"a":{"b":1}}`, patch: `[{"op":"move","from":"/a","path":""}]`, want: `{"b":1}`},
		{name: "move to bad target restores source", give: `{"a":1}`, patch: `[{"op":"move","from":"/a","path":"/x/y"}]`, wantErr: ErrNotFound},
		// copy
		{name: "copy member", give: `{"a":{"x":[1]}}`, patch: `[{"op":"copy","from":"/a","path":"/b"}]`, want: `{"a":{"x":[1]},"b":{"x":[1]}}`},
		{name: "copy is deep", give: `{"a":{"x":[1]}}`, patch: `[{"op":"copy","from":"/a","path":"/b"},{"op":"add","path":"/b/x/-","value":2}]`, want: `{"a":{"x":[1]},"b":{"x":[1,2]}}`},
		{name: "copy of modified subtree is deep", give: `{"a":{"x":[1]}}`, patch: `[{"op":"add","path":"/a/x/-","value":2},{"op":"copy","from":"/a","path":"/b"},{"op":"remove","path":"/a/x"}]`, want: `{"a":{},"b":{"x":[1,2]}}`},
		{name: "copy root into child", give: `{"a":1}`, patch: `[{"op":"copy","from":"","path":"/b"}]`, want: `{"a":1,"b":{"a":1}}`},
		{name: "copy missing from fails", give: `{}`, patch: `[{"op":"copy","from":"/x","path":"/y"}]`, wantErr: ErrNotFound},
		// test
		{name: "test equal number forms", give: `{"a":1}`, patch: `[{"op":"test","path":"/a","value":1.0}]`, want: `{"a":1}`},
		{name: "test exponent form", give: `{"a":100}`, patch: `[{"op":"test","path":"/a","value":1e2}]`, want: `{"a":100}`},
		{name: "test object unordered", give: `{"a":{"x":1,"y":[1,"s"]}}`, patch: `[{"op":"test","path":"/a","value":{"y":[1,"s"],"x":1}}]`, want: `{"a":{"x":1,"y":[1,"s"]}}`},
		{name: "test root", give: `[1,2]`, patch: `[{"op":"test","path":"","value":[1,2]}]`, want: `[1,2]`},
		{name: "test string escapes", give: `{"a":"\u0041\/"}`, patch: `[{"op":"test","path":"/a","value":"A/"}]`, want: `{"a":"A/"}`},
		{name: "test modified subtree", give: `{"a":{"x":1}}`, patch: `[{"op":"add","path":"/a/y","value":2},{"op":"test","path":"/a","value":{"y":2,"x":1}}]`, want: `{"a":{"x":1,"y":2}}`},
		{name: "test unequal fails", give: `{"a":1}`, patch: `[{"op":"test","path":"/a","value":2}]`, wantErr: ErrTestFailed},
		{name: "test string vs number fails", give: `{"a":"1"}`, patch: `[{"op":"test","path":"/a","value":1}]`, wantErr: ErrTestFailed},
		{name: "test null vs missing fails", give: `{}`, patch: `[{"op":"test","path":"/a","value":null}]`, wantErr: ErrNotFound},
		{name: "test array order matters", give: `[1,2]`, patch: `[{"op":"test","path":"","value":[2,1]}]`, wantErr: ErrTestFailed},
		// pointer escapes and odd names
		{name: "escaped slash and tilde", give: `{"a/b":1,"m~n":2}`, patch: `[{"op":"replace","path":"/a~1b","value":10},{"op":"replace","path":"/m~0n","value":20}]`, want: `{"a/b":10,"m~n":20}`},
		{name: "tilde-zero-one is tilde-one", give: `{"~1":1}`, patch: `[{"op":"remove","path":"/~01"}]`, want: `{}`},
		{name: "proto-like names are data", give: `{"constructor":{"prototype":{"v":1}}}`, patch: `[{"op":"replace","path":"/constructor/prototype/v","value":2},{"op":"add","path":"/__proto__","value":{"p":1}}]`, want: `{"constructor":{"prototype":{"v":2}},"__proto__":{"p":1}}`},
		{name: "escaped key in document", give: `{"\u00e9":1}`, patch: `[{"op":"replace","path":"/é","value":2}]`, want: `{"é":2}`},
		{name: "new key needing escapes", give: `{}`, patch: `[{"op":"add","path":"/q\"\\\n","value":1}]`, want: `{"q\"\\\n":1}`},
		{name: "numeric key on object", give: `{"0":1}`, patch: `[{"op":"replace","path":"/0","value":2}]`, want: `{"0":2}`},
		// atomicity
		{name: "second op fails, first undone", give: `{"count":1}`, patch: `[{"op":"replace","path":"/count","value":99},{"op":"remove","path":"/missing"}]`, wantErr: ErrNotFound, wantIdx: 1},
		{name: "failing test after many ops", give: `{"a":[1,2],"b":{"c":1}}`, patch: `[{"op":"add","path":"/a/0","value":0},{"op":"remove","path":"/b/c"},{"op":"move","from":"/a/2","path":"/b/d"},{"op":"copy","from":"/b","path":"/e"},{"op":"replace","path":"","value":3},{"op":"test","path":"","value":4}]`, wantErr: ErrTestFailed, wantIdx: 5},
		{name: "empty patch is a no-op", give: `{"a":1}`, patch: `[]`, want: `{"a":1}`},
	}
	// Every case runs through both entry points: the patches' values are
	// valid JSON, as ApplyDecoded's contract requires, so it must behave
	// exactly as Apply.
	entries := []struct {
		name  string
		apply func(*Doc, []codec.PatchOp) error
	}{
		{"Apply", (*Doc).Apply},
		{"ApplyDecoded", (*Doc).ApplyDecoded},
	}
	for _, entry := range entries {
		for _, tt := range tests {
			t.Run(entry.name+"/"+tt.name, func(t *testing.T) {
				testApplyCase(t, entry.apply, tt.give, tt.patch, tt.want, tt.wantErr, tt.wantIdx)
			})
		}
	}
}

// testApplyCase applies patch to give with apply and checks the outcome:
// want (semantic) on success, else the sentinel, the failing op's index
// and a byte-identical document.
func testApplyCase(t *testing.T, apply func(*Doc, []codec.PatchOp) error, give, patch, want string, wantErr error, wantIdx int) {
	t.Helper()
	d := mustParse(t, give)
	before := string(d.AppendJSON(nil))
	err := apply(d, mustPatch(t, patch))
	if wantErr == nil {
		if err != nil {
			t.Fatalf("Apply: %v", err)
		}
		assertJSON(t, d, want)
		return
	}
	var pe *PatchError
	if !errors.As(err, &pe) {
		t.Fatalf("Apply error = %v, want *PatchError", err)
	}
	if !errors.Is(err, wantErr) {
		t.Fatalf("Apply error = %v, want cause %v", err, wantErr)
	}
	if pe.Index != wantIdx {
		t.Fatalf("PatchError.Index = %d, want %d (%v)", pe.Index, wantIdx, err)
	}
	if after := string(d.AppendJSON(nil)); after != before {
		t.Fatalf("failed patch changed the document:\nbefore %s\nafter  %s", before, after)
	}
}

// TestDecodedInput: the Decoded entry points skip only the structural
// validation the codec already did. On valid text they give what the
// validating ones give (whitespace compacted); string contents are still
// checked while compacting, so a raw control character or a bad escape
// (both of which sonic.Valid lets through) is still refused, and the
// document is left as it was.
func TestDecodedInput(t *testing.T) {
	const base = `{"a":1}`
	entries := []struct {
		name string
		run  func(d *Doc, raw codec.Raw) (*Doc, error)
	}{
		{"ParseDecoded", func(_ *Doc, raw codec.Raw) (*Doc, error) { return ParseDecoded(raw) }},
		{"SetDecoded", func(d *Doc, raw codec.Raw) (*Doc, error) { return d, d.SetDecoded(raw) }},
		{"MergeShallowDecoded", func(d *Doc, raw codec.Raw) (*Doc, error) {
			return d, d.MergeShallowDecoded(codec.Raw(`{"v":` + string(raw) + `}`))
		}},
		{"ApplyDecoded", func(d *Doc, raw codec.Raw) (*Doc, error) {
			return d, d.ApplyDecoded([]codec.PatchOp{
				{Op: codec.OpAdd, Path: "/b", Value: codec.Raw(`2`)},
				{Op: codec.OpAdd, Path: "/v", Value: raw},
			})
		}},
	}
	tests := []struct {
		name    string
		give    string
		want    map[string]string // per entry, when valid
		wantBad bool
	}{
		{name: "whitespace compacted", give: "{ \"x\" : [ 1 , \"s t\" ] }", want: map[string]string{
			"ParseDecoded":        `{"x":[1,"s t"]}`,
			"SetDecoded":          `{"x":[1,"s t"]}`,
			"MergeShallowDecoded": `{"a":1,"v":{"x":[1,"s t"]}}`,
			"ApplyDecoded":        `{"a":1,"b":2,"v":{"x":[1,"s t"]}}`,
		}},
		{name: "raw control character", give: "\"a\x01b\"", wantBad: true},
		{name: "bad escape", give: `"a\xb"`, wantBad: true},
	}
	for _, e := range entries {
		for _, tt := range tests {
			t.Run(e.name+"/"+tt.name, func(t *testing.T) {
				d := mustParse(t, base)
				got, err := e.run(d, codec.Raw(tt.give))
				if tt.wantBad {
					if !errors.Is(err, ErrInvalidJSON) {
						t.Fatalf("error = %v, want ErrInvalidJSON", err)
					}
					if s := string(d.AppendJSON(nil)); s != base {
						t.Fatalf("refused input changed the document: %s", s)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if s := string(got.AppendJSON(nil)); s != tt.want[e.name] {
					t.Fatalf("got %s, want %s", s, tt.want[e.name])
				}
			})
		}
	}
}

// TestTestValue: a test op's value is validated as any other, except that
// ApplyDecoded trusts its structure and checks only its strings.
func TestTestValue(t *testing.T) {
	tests := []struct {
		name    string
		value   string
		wantErr error
	}{
		{name: "equal, spaced", value: "{ \"y\" : [ 1 , \"s t\" ] }"},
		{name: "different", value: `{"y":[1]}`, wantErr: ErrTestFailed},
		{name: "raw control character", value: "\"a\x01b\"", wantErr: ErrInvalidJSON},
		{name: "bad escape", value: `"a\xb"`, wantErr: ErrInvalidJSON},
	}
	for _, apply := range []func(*Doc, []codec.PatchOp) error{(*Doc).Apply, (*Doc).ApplyDecoded} {
		for _, tt := range tests {
			d := mustParse(t, `{"x":{"y":[1,"s t"]}}`)
			err := apply(d, []codec.PatchOp{{Op: codec.OpTest, Path: "/x", Value: codec.Raw(tt.value)}})
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("%s: error = %v, want %v", tt.name, err, tt.wantErr)
			}
		}
	}
}

// TestArrayInsertRemoveBothEnds drives a long random sequence of inserts
// and removes at the front, back and middle of one array (the deque
// paths of node.insert and node.removeAt), with failing patches mixed in
// to exercise their undo, against a plain slice.
// TestApplyCopiesPathAndValue: a new member's name and its value are
// copies, not views of the op, whose buffers the caller reuses.
func TestApplyCopiesPathAndValue(t *testing.T) {
	for _, entry := range []struct {
		name  string
		apply func(*Doc, []codec.PatchOp) error
	}{{"Apply", (*Doc).Apply}, {"ApplyDecoded", (*Doc).ApplyDecoded}} {
		t.Run(entry.name, func(t *testing.T) {
			d := mustParse(t, `{"a":1}`)
			buf := []byte(`/name"v"/long` + strings.Repeat("x", memberText))
			ops := []codec.PatchOp{
				{Op: codec.OpAdd, Path: unsafe.String(&buf[0], 5), Value: codec.Raw(buf[5:8])},
				{Op: codec.OpAdd, Path: unsafe.String(&buf[8], len(buf)-8), Value: codec.Raw(buf[5:8])}, // past memberText
			}
			want := `{"a":1,"name":"v","long` + strings.Repeat("x", memberText) + `":"v"}`
			if err := entry.apply(d, ops); err != nil {
				t.Fatal(err)
			}
			for i := range buf {
				buf[i] = '#'
			}
			assertJSON(t, d, want)
		})
	}
}

// TestSplitSizes splits arrays and objects of every size splitBatch
// distinguishes, and one past, then patches an element of each.
func TestSplitSizes(t *testing.T) {
	var elems, members []string
	for n := range 11 {
		arr, obj := "["+strings.Join(elems, ",")+"]", "{"+strings.Join(members, ",")+"}"
		elems = append(elems, fmt.Sprint(n))
		members = append(members, fmt.Sprintf(`"k%d":%d`, n, n))
		d := mustParse(t, arr)
		if err := d.Apply(mustPatch(t, fmt.Sprintf(`[{"op":"add","path":"/-","value":%d}]`, n))); err != nil {
			t.Fatalf("array of %d: %v", n, err)
		}
		assertJSON(t, d, "["+strings.Join(elems, ",")+"]")
		d = mustParse(t, obj)
		if err := d.Apply(mustPatch(t, fmt.Sprintf(`[{"op":"add","path":"/k%d","value":%d}]`, n, n))); err != nil {
			t.Fatalf("object of %d: %v", n, err)
		}
		assertJSON(t, d, "{"+strings.Join(members, ",")+"}")
		if n > 0 { // the last node of the batch
			d = mustParse(t, arr)
			if err := d.Apply(mustPatch(t, fmt.Sprintf(`[{"op":"replace","path":"/%d","value":"x"}]`, n-1))); err != nil {
				t.Fatalf("array of %d: %v", n, err)
			}
			assertJSON(t, d, "["+strings.Join(append(elems[:n-1:n-1], `"x"`), ",")+"]")
		}
	}
}

func TestArrayInsertRemoveBothEnds(t *testing.T) {
	d := mustParse(t, `{"xs":[]}`)
	var model []int
	rnd := uint32(1)
	next := func(n int) int { // xorshift: deterministic, no global rand
		rnd ^= rnd << 13
		rnd ^= rnd >> 17
		rnd ^= rnd << 5
		return int(rnd % uint32(n))
	}
	for step := range 3000 {
		var i int
		switch next(4) {
		case 0:
			i = 0
		case 1:
			i = len(model)
		default:
			i = next(len(model) + 1)
		}
		insert := len(model) == 0 || next(5) < 3
		var patch string
		if insert {
			patch = fmt.Sprintf(`[{"op":"add","path":"/xs/%d","value":%d}]`, i, step)
		} else {
			if i == len(model) {
				i--
			}
			patch = fmt.Sprintf(`[{"op":"remove","path":"/xs/%d"}]`, i)
		}
		if next(7) == 0 { // the same op, then a failing one: must be undone
			failing := strings.TrimSuffix(patch, "]") + `,{"op":"test","path":"/xs","value":0}]`
			if err := d.Apply(mustPatch(t, failing)); !errors.Is(err, ErrTestFailed) {
				t.Fatalf("step %d: %v", step, err)
			}
		}
		if err := d.Apply(mustPatch(t, patch)); err != nil {
			t.Fatalf("step %d %s: %v", step, patch, err)
		}
		if insert {
			model = slices.Insert(model, i, step)
		} else {
			model = slices.Delete(model, i, i+1)
		}
		if step%97 == 0 || step == 2999 {
			want, _ := json.Marshal(map[string][]int{"xs": model})
			if got := d.AppendJSON(nil); string(got) != string(want) {
				t.Fatalf("step %d: got %s, want %s", step, got, want)
			}
		}
	}
}

// TestDistinctDocsConcurrently patches distinct Docs from several
// goroutines at once, succeeding and failing patches mixed: they share
// only the scratch pool, which must hand each Apply that outgrows its
// local log a scratch of its own (run with -race). Every Doc must end
// exactly where its own patches take it.
func TestDistinctDocsConcurrently(t *testing.T) {
	const workers, rounds = 4, 300
	good := mustPatch(t, `[{"op":"add","path":"/a/-","value":1},{"op":"replace","path":"/n","value":{"x":[1,2]}}]`)
	bad := mustPatch(t, `[{"op":"remove","path":"/a/0"},{"op":"add","path":"/b","value":2},{"op":"remove","path":"/missing"}]`)
	// Long enough to spill (patch.local), with a test of a modified value
	// (the scratch's buffer).
	long := mustPatch(t, `[`+strings.Repeat(`{"op":"add","path":"/n/x/-","value":3},{"op":"remove","path":"/n/x/2"},{"op":"test","path":"/n","value":{"x":[1,2]}},`, 4)+
		`{"op":"remove","path":"/missing"}]`)
	docs := make([]*Doc, workers)
	errs := make(chan error, workers)
	for w := range docs {
		docs[w] = mustParse(t, `{"a":[],"n":0}`)
		go func(d *Doc) {
			for i := 0; i < rounds; i++ {
				if err := d.Apply(good); err != nil {
					errs <- err
					return
				}
				if err := d.Apply(bad); !errors.Is(err, ErrNotFound) {
					errs <- fmt.Errorf("failing patch: got %v, want ErrNotFound", err)
					return
				}
				if err := d.Apply(long); !errors.Is(err, ErrNotFound) {
					errs <- fmt.Errorf("failing long patch: got %v, want ErrNotFound", err)
					return
				}
				if _, err := d.Get(nil, "/a/0"); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}(docs[w])
	}
	for range docs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	want := `{"a":[` + strings.TrimSuffix(strings.Repeat("1,", rounds), ",") + `],"n":{"x":[1,2]}}`
	for _, d := range docs {
		assertJSON(t, d, want)
	}
}

// TestArrayBatchReleased: a split array's first element pointers live in
// its split batch (arrayBatch), which lives as long as any of its nodes.
// When inserts move the elements to a new backing array, the old one must
// hold no pointers, or elements removed later would stay reachable.
func TestArrayBatchReleased(t *testing.T) {
	for _, tt := range []struct {
		name, patch, want string
	}{
		{"append past the room", `[{"op":"add","path":"/a/-","value":2},{"op":"add","path":"/a/-","value":3},{"op":"add","path":"/a/-","value":4}]`, `[1,2,3,4]`},
		{"insert at the front", `[{"op":"add","path":"/a/1","value":2},{"op":"add","path":"/a/0","value":0}]`, `[0,1,2]`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := mustParse(t, `{"a":[1]}`)
			if _, err := d.Get(nil, "/a/0"); err != nil {
				t.Fatal(err)
			}
			a := d.root.first.val
			batch := a.back[:cap(a.back)]
			if err := d.Apply(mustPatch(t, tt.patch)); err != nil {
				t.Fatal(err)
			}
			assertJSON(t, d, `{"a":`+tt.want+`}`)
			if &a.back[:cap(a.back)][0] == &batch[0] {
				t.Fatal("the elements did not move out of the batch")
			}
			for i, p := range batch {
				if p != nil {
					t.Fatalf("old backing array still points at element %d", i)
				}
			}
		})
	}
}

// TestApplyObject: a document that must stay an object (an activity's
// content) refuses a patch whose result is not one, atomically, naming the
// last op that wrote the root; a patch that passes through a non-object
// root and ends on an object applies.
func TestApplyObject(t *testing.T) {
	tests := []struct {
		name, give, patch, want string
		wantIdx                 int // -1: applies
	}{
		{"replace root by an array", `{"k":1}`, `[{"op":"add","path":"/a","value":1},{"op":"replace","path":"","value":[1,2]}]`, "", 1},
		{"remove root", `{"k":1}`, `[{"op":"remove","path":""}]`, "", 0},
		{"move a scalar onto the root", `{"k":1}`, `[{"op":"move","from":"/k","path":""}]`, "", 0},
		{"root replaced, then an object again", `{"k":1}`, `[{"op":"replace","path":"","value":"s"},{"op":"replace","path":"","value":{"n":2}}]`, `{"n":2}`, -1},
		{"members only", `{"k":1}`, `[{"op":"add","path":"/b","value":[]}]`, `{"k":1,"b":[]}`, -1},
		{"empty patch", `{"k":1}`, `[]`, `{"k":1}`, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := mustParse(t, tt.give)
			before := string(d.AppendJSON(nil))
			err := d.ApplyObject(mustPatch(t, tt.patch))
			if tt.wantIdx < 0 {
				if err != nil {
					t.Fatal(err)
				}
				assertJSON(t, d, tt.want)
				return
			}
			var pe *PatchError
			if !errors.As(err, &pe) || !errors.Is(err, ErrNotObject) || pe.Index != tt.wantIdx {
				t.Fatalf("err %v, want ErrNotObject at op %d", err, tt.wantIdx)
			}
			if got := string(d.AppendJSON(nil)); got != before {
				t.Fatalf("document changed: %s, was %s", got, before)
			}
		})
	}
	// Apply, for state, lets the root be anything.
	d := mustParse(t, `{"k":1}`)
	if err := d.Apply(mustPatch(t, `[{"op":"replace","path":"","value":[1]}]`)); err != nil {
		t.Fatal(err)
	}
	assertJSON(t, d, `[1]`)
}

// TestLoneSurrogateName: a member whose name is a lone surrogate escape is
// found by the path that names it as the codec decodes paths (WTF-8), as
// JavaScript finds it, and keeps its name when its object is written again.
func TestLoneSurrogateName(t *testing.T) {
	d, err := Parse([]byte(`{"\ud800":1,"\udbff":2,"a":0}`))
	if err != nil {
		t.Fatal(err)
	}
	ops := []codec.PatchOp{
		{Op: codec.OpTest, Path: "/\xed\xa0\x80", Value: codec.Raw(`1`)},
		{Op: codec.OpReplace, Path: "/\xed\xa0\x80", Value: codec.Raw(`3`)},
		{Op: codec.OpRemove, Path: "/a"},
	}
	if err := d.Apply(ops); err != nil {
		t.Fatal(err)
	}
	got := d.AppendJSON(nil)
	if eq, err := Equal(got, []byte(`{"\ud800":3,"\udbff":2}`)); err != nil || !eq {
		t.Errorf("got %s (err %v), want {\"\\ud800\":3,\"\\udbff\":2}", got, err)
	}
}
