package jsondoc

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/threadcast/threadcast/codec"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		give     string
		want     string // exact AppendJSON output
		wantKind Kind
		wantErr  bool
	}{
		{name: "object compacted", give: " { \"a\" : [ 1 , 2 ] ,\n\t\"b\" : \"x y\" } ", want: `{"a":[1,2],"b":"x y"}`, wantKind: KindObject},
		{name: "string keeps inner whitespace and escapes", give: `"a \" \\ \n b"`, want: `"a \" \\ \n b"`, wantKind: KindString},
		{name: "number text preserved", give: `12345678901234567890.123456789e-3`, want: `12345678901234567890.123456789e-3`, wantKind: KindNumber},
		{name: "null", give: `null`, want: `null`, wantKind: KindNull},
		{name: "true", give: ` true `, want: `true`, wantKind: KindBool},
		{name: "empty array", give: `[ ]`, want: `[]`, wantKind: KindArray},
		{name: "duplicate names kept verbatim", give: `{"a":1,"a":2}`, want: `{"a":1,"a":2}`, wantKind: KindObject},
		{name: "empty input", give: ``, wantErr: true},
		{name: "two values", give: `1 2`, wantErr: true},
		{name: "trailing comma", give: `[1,]`, wantErr: true},
		{name: "bare word", give: `nul`, wantErr: true},
		{name: "unterminated string", give: `"abc`, wantErr: true},
		{name: "leading zero number", give: `01`, wantErr: true},
		{name: "control character in string", give: "\"a\x01\"", wantErr: true},
		{name: "raw tab in string", give: "[\"a\tb\"]", wantErr: true},
		{name: "unknown escape", give: `{"a":"\x"}`, wantErr: true},
		{name: "short unicode escape", give: `["\u12"]`, wantErr: true},
		{name: "escape at the end", give: `"\`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Parse([]byte(tt.give))
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidJSON) {
					t.Fatalf("Parse error = %v, want ErrInvalidJSON", err)
				}
				if !strings.HasPrefix(err.Error(), "jsondoc: ") {
					t.Fatalf("error %q lacks package prefix", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := string(d.AppendJSON(nil)); got != tt.want {
				t.Fatalf("AppendJSON = %s, want %s", got, tt.want)
			}
			if d.Kind() != tt.wantKind {
				t.Fatalf("Kind = %v, want %v", d.Kind(), tt.wantKind)
			}
		})
	}
}

// TestParseCopies poisons the caller's buffer after Parse and after Apply
// (STYLE practice 5): the Doc must not keep views into either.
// TestParseTruncatedView feeds views that end inside a literal whose
// rest follows in the same array (sonic.Valid alone accepts them).
func TestParseTruncatedView(t *testing.T) {
	for _, tt := range []struct {
		buf string
		n   int
	}{
		{"null", 2}, {"true", 3}, {"false", 3}, {"[null]", 3}, {`{"a":true}`, 7},
	} {
		view := []byte(tt.buf)[:tt.n]
		if _, err := Parse(view); !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("Parse(%q) = %v, want ErrInvalidJSON", view, err)
		}
		if _, err := Equal(view, view); !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("Equal(%q) = %v, want ErrInvalidJSON", view, err)
		}
	}
}

// TestParseDepth pins the nesting limit inherited from sonic.Valid (4096
// levels; encoding/json allows 10000).
func TestParseDepth(t *testing.T) {
	tests := []struct {
		depth   int
		wantErr bool
	}{{4096, false}, {4097, true}}
	for _, tt := range tests {
		raw := strings.Repeat("[", tt.depth) + strings.Repeat("]", tt.depth)
		_, err := Parse([]byte(raw))
		if (err != nil) != tt.wantErr {
			t.Errorf("depth %d: err %v, wantErr %v", tt.depth, err, tt.wantErr)
		}
	}
}

func TestParseCopies(t *testing.T) {
	buf := []byte(`{"a":{"b":[1,2]},"c":"s"}`)
	d, err := Parse(buf)
	if err != nil {
		t.Fatal(err)
	}
	patch := []byte(`[{"op":"add","path":"/a/b/-","value":{"k":"v"}},{"op":"add","path":"/new","value":"n"}]`)
	ops := mustPatch(t, string(patch))
	if err := d.Apply(ops); err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		buf[i] = '#'
	}
	for i := range ops {
		for j := range ops[i].Value {
			ops[i].Value[j] = '#'
		}
	}
	assertJSON(t, d, `{"a":{"b":[1,2,{"k":"v"}]},"c":"s","new":"n"}`)
}

func TestAppendJSONOrderAndAppend(t *testing.T) {
	d := mustParse(t, `{"a":1,"b":2,"c":3}`)
	if err := d.Apply(mustPatch(t, `[{"op":"replace","path":"/b","value":20},{"op":"add","path":"/a","value":10},{"op":"add","path":"/d","value":4},{"op":"remove","path":"/c"},{"op":"add","path":"/c","value":30}]`)); err != nil {
		t.Fatal(err)
	}
	got := string(d.AppendJSON([]byte("prefix:")))
	if want := `prefix:{"a":10,"b":20,"d":4,"c":30}`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestDuplicateNames(t *testing.T) {
	tests := []struct {
		name  string
		give  string
		patch string
		want  string // exact output
	}{
		{"last wins at first place once modified", `{"a":1,"b":2,"a":3}`, `[{"op":"add","path":"/c","value":4}]`, `{"a":3,"b":2,"c":4}`},
		{"test sees last value", `{"a":1,"a":3}`, `[{"op":"test","path":"/a","value":3}]`, `{"a":1,"a":3}`},
		{"replace the duplicated name", `{"a":1,"a":3}`, `[{"op":"replace","path":"/a","value":5}]`, `{"a":5}`},
		{"nested duplicates untouched while clean", `{"x":{"a":1,"a":2},"y":0}`, `[{"op":"replace","path":"/y","value":1}]`, `{"x":{"a":1,"a":2},"y":1}`},
		{"escaped duplicate resolves as the same name", `{"a":1,"\u0061":2}`, `[{"op":"add","path":"/b","value":0}]`, `{"a":2,"b":0}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := mustParse(t, tt.give)
			if err := d.Apply(mustPatch(t, tt.patch)); err != nil {
				t.Fatal(err)
			}
			if got := string(d.AppendJSON(nil)); got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// TestFailedPatchByteIdentical covers what a semantic comparison cannot:
// after a failure the text is exactly what it was, even where splitting
// would have normalised it (duplicate names) or where the failed patch
// had modified, removed and re-added deep in the tree first.
func TestFailedPatchByteIdentical(t *testing.T) {
	tests := []struct {
		name  string
		give  string
		patch string
	}{
		{"duplicates split by a failing path", `{"a":{"x":1,"x":2},"a":{"y":[1,1]}}`, `[{"op":"add","path":"/a/y/-","value":2},{"op":"remove","path":"/a/nope"}]`},
		{"remove then re-add same name", `{"a":1,"b":2,"c":3}`, `[{"op":"remove","path":"/b"},{"op":"add","path":"/b","value":9},{"op":"remove","path":"/a"},{"op":"test","path":"/c","value":0}]`},
		{"array churn", `[[1,2,3],[4]]`, `[{"op":"move","from":"/0/0","path":"/1/0"},{"op":"remove","path":"/0/1"},{"op":"copy","from":"/1","path":"/-"},{"op":"add","path":"/9","value":0}]`},
		{"root replaced then failure", `{"big":[1,2,3]}`, `[{"op":"replace","path":"","value":{"a":1}},{"op":"remove","path":"/a"},{"op":"remove","path":"/a"}]`},
		{"root removed then failure", `[1]`, `[{"op":"remove","path":""},{"op":"add","path":"/x","value":1}]`},
		{"many members past the index threshold", `{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17}`,
			`[{"op":"remove","path":"/k3"},{"op":"add","path":"/k99","value":1},{"op":"move","from":"/k0","path":"/k17"},{"op":"test","path":"/k3","value":3}]`},
		// Past patch's local arrays: the log and the path continue in the
		// pooled scratch, and the rollback must walk both.
		{"undo log past the local records", `{"a":{"b":[1]},"c":{"d":{}}}`,
			`[{"op":"add","path":"/a/b/-","value":2},{"op":"add","path":"/a/b/-","value":3},{"op":"replace","path":"/a/b/0","value":9},` +
				`{"op":"add","path":"/c/d/x","value":1},{"op":"add","path":"/c/d/y","value":2},{"op":"remove","path":"/c/d/x"},` +
				`{"op":"move","from":"/a/b/0","path":"/c/d/z"},{"op":"copy","from":"/c/d","path":"/e"},{"op":"test","path":"/c","value":{"d":{"y":2,"z":9}}},` +
				`{"op":"replace","path":"/a/b/0","value":5},{"op":"remove","path":"/nope"}]`},
		{"path deeper than the local path", `{"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{"i":{"j":1}}}}}}}}},"z":[]}`,
			`[{"op":"add","path":"/a/b/c/d/e/f/g/h/i/k","value":2},{"op":"move","from":"/a/b/c/d/e/f/g/h/i/j","path":"/z/-"},{"op":"test","path":"/a/b/c/d/e/f/g/h/i","value":{"k":3}}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := mustParse(t, tt.give)
			before := string(d.AppendJSON(nil))
			if err := d.Apply(mustPatch(t, tt.patch)); err == nil {
				t.Fatal("patch applied, want failure")
			}
			if got := string(d.AppendJSON(nil)); got != before {
				t.Fatalf("got %s, want %s", got, before)
			}
			// And the document still works normally afterwards.
			if err := d.Apply(mustPatch(t, `[{"op":"test","path":"","value":`+before+`}]`)); err != nil {
				t.Fatalf("document inconsistent after rollback: %v", err)
			}
		})
	}
}

// TestMergeShallow runs each case on an unsplit target (mergeText, where
// its bounds hold) and a split one (mergeNodes), through MergeShallow and
// MergeShallowDecoded (whose small sources stay on the stack): all four
// must write the same text.
func TestMergeShallow(t *testing.T) {
	many := func(prefix string, n int) string { // an object of n members named prefix0...
		var b strings.Builder
		b.WriteByte('{')
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"%s%d":%d`, prefix, i, i)
		}
		return b.String() + "}"
	}
	wide := many("a", mergeTextMembers)
	long := `{"a":"` + strings.Repeat("x", mergeTextTarget) + `"}`
	longSrc := `{"b":"` + strings.Repeat("y", mergeStackSrc) + `"}`
	tests := []struct {
		name    string
		give    string // "" means the zero Doc
		merge   string
		want    string // exact output
		wantErr error
		// truncated marks a merge that is not structurally valid JSON,
		// which the Decoded entry points are not given by contract.
		truncated bool
	}{
		{name: "zero doc becomes object", give: "", merge: `{"a":1}`, want: `{"a":1}`},
		{name: "null becomes object", give: `null`, merge: `{"a":1}`, want: `{"a":1}`},
		{name: "empty source into null", give: `null`, merge: `{}`, want: `{}`},
		{name: "last write wins, position kept", give: `{"a":1,"b":2}`, merge: `{"a":{"x":1},"c":3}`, want: `{"a":{"x":1},"b":2,"c":3}`},
		{name: "no recursion", give: `{"a":{"x":1,"y":2}}`, merge: `{"a":{"z":3}}`, want: `{"a":{"z":3}}`},
		{name: "null values are data", give: `{"a":1}`, merge: `{"a":null}`, want: `{"a":null}`},
		{name: "duplicate names in source: last wins", give: `{}`, merge: `{"a":1,"a":2}`, want: `{"a":2}`},
		{name: "duplicate names in target: last wins, first place", give: `{"a":1,"b":2,"a":3}`, merge: `{"c":4}`, want: `{"a":3,"b":2,"c":4}`},
		{name: "empty source is a no-op", give: `{"a":1}`, merge: `{}`, want: `{"a":1}`},
		{name: "empty source keeps duplicates", give: `{"a":1,"a":2}`, merge: `{}`, want: `{"a":1,"a":2}`},
		{name: "source whitespace compacted", give: `{}`, merge: ` { "a" : [ 1 ] } `, want: `{"a":[1]}`},
		{name: "escaped names compare decoded", give: `{"\u0061":1,"b":2}`, merge: `{"a":3}`, want: `{"\u0061":3,"b":2}`},
		{name: "escaped source name", give: `{"a":1}`, merge: `{"\u0061":3,"c\n":4}`, want: `{"a":3,"c\n":4}`},
		{name: "more names than mergeText holds", give: wide, merge: `{"a0":"x","b":1}`,
			want: `{"a0":"x",` + wide[len(`{"a0":0,`):len(wide)-1] + `,"b":1}`},
		{name: "target longer than mergeText rewrites", give: long, merge: `{"b":1}`, want: long[:len(long)-1] + `,"b":1}`},
		{name: "source longer than the stack", give: `{"a":1}`, merge: longSrc, want: `{"a":1,` + longSrc[1:]},
		{name: "array source rejected", give: `{"a":1}`, merge: `[1]`, wantErr: ErrNotObject, want: `{"a":1}`},
		{name: "null source rejected", give: `{"a":1}`, merge: `null`, wantErr: ErrNotObject, want: `{"a":1}`},
		{name: "invalid source rejected", give: `{"a":1}`, merge: `{"a":`, wantErr: ErrInvalidJSON, want: `{"a":1}`, truncated: true},
		{name: "bad escape in source rejected", give: `{"a":1}`, merge: `{"a":"\x"}`, wantErr: ErrInvalidJSON, want: `{"a":1}`},
		{name: "null target, escaped source name", give: `null`, merge: `{"\u0061":1}`, want: `{"\u0061":1}`},
		{name: "array target rejected", give: `[1]`, merge: `{"a":1}`, wantErr: ErrNotObject, want: `[1]`},
		{name: "string target rejected", give: `"s"`, merge: `{"a":1}`, wantErr: ErrNotObject, want: `"s"`},
	}
	for _, tt := range tests {
		for _, split := range []bool{false, true} {
			for _, decoded := range []bool{false, true} {
				if decoded && tt.truncated {
					continue
				}
				t.Run(fmt.Sprintf("%s/split=%v/decoded=%v", tt.name, split, decoded), func(t *testing.T) {
					d := &Doc{}
					if tt.give != "" {
						d = mustParse(t, tt.give)
					}
					if split {
						d.Len()
					}
					var err error
					if decoded {
						err = d.MergeShallowDecoded(codec.Raw(tt.merge))
					} else {
						err = d.MergeShallow([]byte(tt.merge))
					}
					if !errors.Is(err, tt.wantErr) {
						t.Fatalf("MergeShallow error = %v, want %v", err, tt.wantErr)
					}
					if got := string(d.AppendJSON(nil)); got != tt.want {
						t.Fatalf("got %s, want %s", got, tt.want)
					}
				})
			}
		}
	}
}

func TestMergeShallowThenPatch(t *testing.T) {
	d := &Doc{}
	src := []byte(`{"a":{"b":1}}`)
	if err := d.MergeShallow(src); err != nil {
		t.Fatal(err)
	}
	copy(src, strings.Repeat("#", len(src))) // must not be retained
	if err := d.Apply(mustPatch(t, `[{"op":"add","path":"/a/c","value":2}]`)); err != nil {
		t.Fatal(err)
	}
	if got, want := string(d.AppendJSON(nil)), `{"a":{"b":1,"c":2}}`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestZeroDoc(t *testing.T) {
	var d Doc
	if d.Kind() != KindNull || d.Len() != 0 || string(d.AppendJSON(nil)) != "null" {
		t.Fatalf("zero Doc is %v %d %s, want null", d.Kind(), d.Len(), d.AppendJSON(nil))
	}
	if err := d.Apply(mustPatch(t, `[{"op":"add","path":"/a","value":1}]`)); !errors.Is(err, ErrNotContainer) {
		t.Fatalf("add into null: %v, want ErrNotContainer", err)
	}
	if err := d.Apply(mustPatch(t, `[{"op":"add","path":"","value":{"a":1}}]`)); err != nil {
		t.Fatal(err)
	}
	assertJSON(t, &d, `{"a":1}`)
	d.Reset()
	if string(d.AppendJSON(nil)) != "null" {
		t.Fatal("Reset did not make the Doc null")
	}
}

func TestSet(t *testing.T) {
	d := mustParse(t, `{"a":1}`)
	if err := d.Set([]byte(`[1,`)); !errors.Is(err, ErrInvalidJSON) {
		t.Fatalf("Set(invalid) = %v, want ErrInvalidJSON", err)
	}
	if got := string(d.AppendJSON(nil)); got != `{"a":1}` {
		t.Fatalf("failed Set changed the doc: %s", got)
	}
	buf := []byte(`[ 1, 2 ]`)
	if err := d.Set(buf); err != nil {
		t.Fatal(err)
	}
	buf[1] = '#'
	if got := string(d.AppendJSON(nil)); got != `[1,2]` || d.Kind() != KindArray || d.Len() != 2 {
		t.Fatalf("after Set: %s kind %v len %d", got, d.Kind(), d.Len())
	}
}

func TestLenSizeKind(t *testing.T) {
	tests := []struct {
		give     string
		wantLen  int
		wantKind Kind
	}{
		{`{"a":1,"b":[1,2]}`, 2, KindObject},
		{`[1,[2,3],{}]`, 3, KindArray},
		{`"str"`, 0, KindString},
		{`-1.5e3`, 0, KindNumber},
		{`false`, 0, KindBool},
	}
	for _, tt := range tests {
		d := mustParse(t, tt.give)
		if d.Len() != tt.wantLen || d.Kind() != tt.wantKind {
			t.Errorf("%s: Len %d Kind %v, want %d %v", tt.give, d.Len(), d.Kind(), tt.wantLen, tt.wantKind)
		}
		if s := d.Size(); s < len(tt.give) {
			t.Errorf("%s: Size %d below the text size", tt.give, s)
		}
	}
	// Size grows with content added and shrinks when it is removed.
	d := mustParse(t, `{"a":[]}`)
	s0 := d.Size()
	big := `"` + strings.Repeat("x", 10000) + `"`
	if err := d.Apply(mustPatch(t, `[{"op":"add","path":"/a/-","value":`+big+`}]`)); err != nil {
		t.Fatal(err)
	}
	s1 := d.Size()
	if s1 < s0+10000 {
		t.Fatalf("Size after adding 10000 bytes: %d -> %d", s0, s1)
	}
	if err := d.Apply(mustPatch(t, `[{"op":"remove","path":"/a/0"}]`)); err != nil {
		t.Fatal(err)
	}
	if s2 := d.Size(); s2 > s0+1000 {
		t.Fatalf("Size after removing: %d (start %d)", s2, s0)
	}
}

// TestSizeTracksContent checks that the O(1) estimate follows the JSON
// text through a mix of ops, survives a rollback unchanged, and matches a
// freshly parsed document of the same content within the node overhead.
func TestSizeTracksContent(t *testing.T) {
	d := mustParse(t, `{"a":{"x":"`+strings.Repeat("x", 5000)+`"},"b":[1,2,3],"c":"`+strings.Repeat("c", 3000)+`"}`)
	steps := []string{
		`[{"op":"add","path":"/b/-","value":"` + strings.Repeat("y", 4000) + `"}]`,
		`[{"op":"copy","from":"/a","path":"/d"}]`,
		`[{"op":"remove","path":"/c"}]`,
		`[{"op":"move","from":"/d","path":"/b/0"}]`,
		`[{"op":"replace","path":"/a/x","value":1}]`,
		`[{"op":"remove","path":"/b/0"},{"op":"remove","path":"/b/0"}]`,
	}
	for _, step := range steps {
		if err := d.Apply(mustPatch(t, step)); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		before := d.Size()
		if err := d.Apply(mustPatch(t, `[{"op":"remove","path":"/a"},{"op":"remove","path":"/nope"}]`)); err == nil {
			t.Fatal("failing patch applied")
		}
		if d.Size() != before {
			t.Fatalf("rollback changed Size: %d -> %d", before, d.Size())
		}
		text := len(d.AppendJSON(nil))
		if s := d.Size(); s < text || s > text+40*nodeOverhead {
			t.Fatalf("after %s: Size %d, text %d", step, s, text)
		}
	}
}

// TestTextLen: TextLen is the length of the text AppendJSON writes, through
// patches that split, dirty and restructure the value (duplicate and
// escaped names, names a patch adds, a failed patch rolled back), and a Doc
// set from that text reports the same length, however split the first was.
func TestTextLen(t *testing.T) {
	d := mustParse(t, `{"a":{"x":"`+strings.Repeat("x", 50)+`"},"b":[1,2,3],"d\u0075p":1,"dup":2,"e":{}}`)
	steps := []string{
		`[{"op":"add","path":"/b/-","value":"yy"}]`,
		`[{"op":"copy","from":"/a","path":"/new name"}]`,
		`[{"op":"add","path":"/dup","value":[1,{"q":"\"quoted\""}]}]`,
		`[{"op":"move","from":"/b/1","path":"/a/y"}]`,
		`[{"op":"remove","path":"/b/0"},{"op":"remove","path":"/b/0"}]`,
		`[{"op":"remove","path":"/a/x"},{"op":"remove","path":"/nope"}]`,
		`[{"op":"add","path":"/e/\u00e9\t","value":null}]`,
		`[{"op":"replace","path":"","value":[]}]`,
		`[{"op":"add","path":"/0","value":{"k":1}}]`,
	}
	for _, step := range steps {
		_ = d.Apply(mustPatch(t, step))
		text := d.AppendJSON(nil)
		if got := d.TextLen(); got != len(text) {
			t.Fatalf("after %s: TextLen %d, text %s of %d bytes", step, got, text, len(text))
		}
		if got := mustParse(t, string(text)).TextLen(); got != len(text) {
			t.Errorf("after %s: TextLen of a Doc parsed from the text %d, want %d", step, got, len(text))
		}
	}
	var zero Doc
	if got := zero.TextLen(); got != len("null") {
		t.Errorf("zero Doc: TextLen %d, want 4", got)
	}
}

func TestClone(t *testing.T) {
	d := mustParse(t, `{"a":[1,2]}`)
	c1 := d.Clone() // clean source
	if err := d.Apply(mustPatch(t, `[{"op":"add","path":"/a/-","value":3}]`)); err != nil {
		t.Fatal(err)
	}
	c2 := d.Clone() // modified source
	if err := d.Apply(mustPatch(t, `[{"op":"remove","path":"/a"}]`)); err != nil {
		t.Fatal(err)
	}
	assertJSON(t, c1, `{"a":[1,2]}`)
	assertJSON(t, c2, `{"a":[1,2,3]}`)
	assertJSON(t, d, `{}`)
	var z Doc
	assertJSON(t, z.Clone(), `null`)
}

func TestGet(t *testing.T) {
	d := mustParse(t, `{"a":{"b":[10,{"c":"x"}]},"m~n":1}`)
	tests := []struct {
		ptr     string
		want    string
		wantErr error
	}{
		{"", `{"a":{"b":[10,{"c":"x"}]},"m~n":1}`, nil},
		{"/a/b/1/c", `"x"`, nil},
		{"/a/b/0", `10`, nil},
		{"/m~0n", `1`, nil},
		{"/a/b/2", ``, ErrBadIndex},
		{"/a/b/-", ``, ErrBadIndex},
		{"/a/x", ``, ErrNotFound},
		{"/a/b/0/z", ``, ErrNotContainer},
		{"a", ``, ErrInvalidPointer},
		{"/~2", ``, ErrInvalidPointer},
	}
	for _, tt := range tests {
		got, err := d.Get(nil, tt.ptr)
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("Get(%q) error = %v, want %v", tt.ptr, err, tt.wantErr)
			continue
		}
		if err != nil && !strings.HasPrefix(err.Error(), "jsondoc: ") {
			t.Errorf("Get(%q) error %q lacks the package prefix", tt.ptr, err)
		}
		if string(got) != tt.want {
			t.Errorf("Get(%q) = %s, want %s", tt.ptr, got, tt.want)
		}
	}
}

func TestPatchErrorFields(t *testing.T) {
	d := mustParse(t, `{"a":[1]}`)
	err := d.Apply(mustPatch(t, `[{"op":"test","path":"/a/0","value":1},{"op":"move","from":"/a","path":"/a/0/x"}]`))
	var pe *PatchError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v is not a *PatchError", err)
	}
	if pe.Index != 1 || pe.Op != codec.OpMove || pe.Path != "/a/0/x" || pe.From != "/a" || !errors.Is(err, ErrMoveIntoChild) {
		t.Fatalf("PatchError = %+v", pe)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "jsondoc: op 1 (move ") || !strings.Contains(msg, "move into own child") {
		t.Fatalf("message %q", msg)
	}
}

// TestApplyDefensive covers ops the codec never produces: the applier
// still refuses them cleanly instead of corrupting the document.
func TestApplyDefensive(t *testing.T) {
	tests := []struct {
		name    string
		op      codec.PatchOp
		wantErr error
	}{
		{"path without leading slash", codec.PatchOp{Op: codec.OpAdd, Path: "a", Value: codec.Raw(`1`)}, ErrInvalidPointer},
		{"bad escape", codec.PatchOp{Op: codec.OpRemove, Path: "/a~"}, ErrInvalidPointer},
		{"bad from", codec.PatchOp{Op: codec.OpMove, From: "x", Path: "/a"}, ErrInvalidPointer},
		{"bad copy from", codec.PatchOp{Op: codec.OpCopy, From: "/~3", Path: "/a"}, ErrInvalidPointer},
		{"add without value", codec.PatchOp{Op: codec.OpAdd, Path: "/a"}, ErrBadOp},
		{"replace without value", codec.PatchOp{Op: codec.OpReplace, Path: "/a"}, ErrBadOp},
		{"test without value", codec.PatchOp{Op: codec.OpTest, Path: "/a"}, ErrBadOp},
		{"unknown kind", codec.PatchOp{Op: 0, Path: "/a"}, ErrBadOp},
		{"invalid value", codec.PatchOp{Op: codec.OpAdd, Path: "/a", Value: codec.Raw(`{"x":`)}, ErrInvalidJSON},
		{"invalid test value", codec.PatchOp{Op: codec.OpTest, Path: "/a", Value: codec.Raw(`[1`)}, ErrInvalidJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := mustParse(t, `{"a":1}`)
			ops := []codec.PatchOp{{Op: codec.OpAdd, Path: "/b", Value: codec.Raw(`2`)}, tt.op}
			err := d.Apply(ops)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Apply = %v, want %v", err, tt.wantErr)
			}
			if got := string(d.AppendJSON(nil)); got != `{"a":1}` {
				t.Fatalf("document changed: %s", got)
			}
		})
	}
}

// TestReplacedRootReleased: a Doc's first root node is part of the Doc
// (Doc.own), so whatever replaces the root must leave the old node
// holding no text or children, or the Doc would pin its first value for
// life. A patch that fails must leave the old root whole.
func TestReplacedRootReleased(t *testing.T) {
	const give = `{"a":{"b":[1,2]},"c":"s"}`
	tests := []struct {
		name    string
		replace func(*Doc) error
		want    string
	}{
		{"Set", func(d *Doc) error { return d.Set([]byte(`{"x":1}`)) }, `{"x":1}`},
		{"SetDecoded", func(d *Doc) error { return d.SetDecoded(codec.Raw(`[1]`)) }, `[1]`},
		{"Reset", func(d *Doc) error { d.Reset(); return nil }, `null`},
		{"replace root", func(d *Doc) error {
			return d.Apply(mustPatch(t, `[{"op":"replace","path":"","value":{"x":1}}]`))
		}, `{"x":1}`},
		{"add root twice", func(d *Doc) error {
			return d.ApplyDecoded(mustPatch(t, `[{"op":"add","path":"","value":1},{"op":"add","path":"","value":2}]`))
		}, `2`},
		{"remove root", func(d *Doc) error { return d.Apply(mustPatch(t, `[{"op":"remove","path":""}]`)) }, `null`},
		{"move child to root", func(d *Doc) error {
			return d.Apply(mustPatch(t, `[{"op":"move","from":"/a","path":""}]`))
		}, `{"b":[1,2]}`},
	}
	for _, tt := range tests {
		for _, split := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/split=%v", tt.name, split), func(t *testing.T) {
				d := mustParse(t, give)
				if split {
					if _, err := d.Get(nil, "/a/b/0"); err != nil {
						t.Fatal(err)
					}
				}
				old := d.root
				if err := tt.replace(d); err != nil {
					t.Fatal(err)
				}
				// Set reuses the node in place; otherwise it must be empty.
				if d.root != old && (old.raw != nil || old.split || old.kids != nil) {
					t.Fatalf("replaced root still holds %q, split %v", old.raw, old.split)
				}
				assertJSON(t, d, tt.want)
				if err := d.Apply(mustPatch(t, `[{"op":"add","path":"","value":{"y":[2]}},{"op":"add","path":"/y/-","value":3}]`)); err != nil {
					t.Fatal(err)
				}
				assertJSON(t, d, `{"y":[2,3]}`)
			})
		}
	}
	d := mustParse(t, give)
	old := d.root
	if err := d.Apply(mustPatch(t, `[{"op":"replace","path":"","value":1},{"op":"remove","path":"/x"}]`)); !errors.Is(err, ErrNotContainer) {
		t.Fatalf("failing patch: %v, want ErrNotContainer", err)
	}
	if d.root != old || string(d.AppendJSON(nil)) != give {
		t.Fatalf("failed patch changed the root: %s", d.AppendJSON(nil))
	}
}

// TestShortDocs: ParseDecoded holds text of up to shortDoc bytes in the
// Doc's own allocation (docWithText), and Clone copies such a text rather
// than share it. Either side of the bound, both must behave as Parse.
func TestShortDocs(t *testing.T) {
	for n := shortDoc - 2; n <= shortDoc+2; n++ {
		for _, give := range []string{
			`"` + strings.Repeat("s", n-2) + `"`,
			`{"a":[` + strings.Repeat(" ", n-9) + `1]}`, // compacts to 9 bytes
		} {
			d, err := ParseDecoded(codec.Raw(give))
			if err != nil {
				t.Fatalf("ParseDecoded(%s): %v", give, err)
			}
			want := string(mustParse(t, give).AppendJSON(nil))
			assertJSON(t, d, want)
			c := d.Clone()
			if len(want) <= shortDoc && &c.root.raw[0] == &d.root.raw[0] {
				t.Fatalf("Clone shares the short text %s", want)
			}
			if err := d.Set([]byte(`{"b":2}`)); err != nil {
				t.Fatal(err)
			}
			assertJSON(t, c, want)
			if err := c.Apply(mustPatch(t, `[{"op":"replace","path":"","value":[1]}]`)); err != nil {
				t.Fatal(err)
			}
			assertJSON(t, c, `[1]`)
			assertJSON(t, d, `{"b":2}`)
		}
	}
}

// TestEmptyObjectShared: every Doc set to exactly {} shares one text;
// patching one must leave the others (and later ones) empty.
func TestEmptyObjectShared(t *testing.T) {
	var a Doc
	if err := a.Set([]byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	b := mustParse(t, `{}`)
	for i, d := range []*Doc{&a, b} {
		if err := d.Apply(mustPatch(t, fmt.Sprintf(`[{"op":"add","path":"/k%d","value":%d}]`, i, i))); err != nil {
			t.Fatal(err)
		}
	}
	assertJSON(t, &a, `{"k0":0}`)
	assertJSON(t, b, `{"k1":1}`)
	assertJSON(t, mustParse(t, `{}`), `{}`)
	if !bytes.Equal(emptyObject, []byte(`{}`)) {
		t.Fatalf("shared text changed to %s", emptyObject)
	}
}

// TestSizeKeepsSplitsOfFailedPatch: a failing patch is undone, but the
// containers it split stay split, so their nodes stay in Size.
func TestSizeKeepsSplitsOfFailedPatch(t *testing.T) {
	d := mustParse(t, `{"a":{"x":1,"y":2}}`)
	before := d.Size()
	if err := d.Apply(mustPatch(t, `[{"op":"add","path":"/a/z","value":3},{"op":"remove","path":"/nope"}]`)); err == nil {
		t.Fatal("failing patch applied")
	}
	if want := before + 3*nodeOverhead; d.Size() != want { // the root's member, then /a's two
		t.Fatalf("Size after failed patch = %d, want %d", d.Size(), want)
	}
	assertJSON(t, d, `{"a":{"x":1,"y":2}}`)
}
