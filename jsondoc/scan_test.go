package jsondoc

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/bytedance/sonic"

	"github.com/threadcast/threadcast/codec"
)

func TestAppendQuoted(t *testing.T) {
	tests := []struct {
		give string
		want string // the string JSON decoding of the output must yield
	}{
		{"plain", "plain"},
		{"", ""},
		{`q"b\s`, `q"b\s`},
		{"nl\n cr\r tab\t bs\b ff\f nul\x00 us\x1f", "nl\n cr\r tab\t bs\b ff\f nul\x00 us\x1f"},
		{"é ü 世界 🙂", "é ü 世界 🙂"},
		{"bad\xffutf8\xc3", "bad\ufffdutf8\ufffd"},
		{"\u2028\u2029</script>", "\u2028\u2029</script>"},
	}
	for _, tt := range tests {
		out := appendQuoted([]byte("x"), tt.give)[1:]
		if !json.Valid(out) {
			t.Errorf("appendQuoted(%q) = %s, invalid JSON", tt.give, out)
			continue
		}
		var got string
		if err := json.Unmarshal(out, &got); err != nil || got != tt.want {
			t.Errorf("appendQuoted(%q) = %s, decodes to %q (%v), want %q", tt.give, out, got, err, tt.want)
		}
	}
}

// TestNewKeysRoundTrip: names set by a patch (encoded by appendQuoted)
// come back out as the same names.
func TestNewKeysRoundTrip(t *testing.T) {
	d := mustParse(t, `{}`)
	keys := []string{"a/b", "m~n", "ctl\x01", `q"`, "世界", ""}
	var ops []codec.PatchOp
	for i, k := range keys {
		ops = append(ops, codec.PatchOp{Op: codec.OpAdd, Path: "/" + Escape(k), Value: codec.Raw(strings.Repeat("1", i+1))})
	}
	if err := d.Apply(ops); err != nil {
		t.Fatal(err)
	}
	var got map[string]int
	if err := json.Unmarshal(d.AppendJSON(nil), &got); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		want := 0
		for range i + 1 {
			want = want*10 + 1
		}
		if got[k] != want {
			t.Errorf("member %q = %d, want %d (%s)", k, got[k], want, d.AppendJSON(nil))
		}
	}
}

func TestNames(t *testing.T) {
	ops := map[codec.OpKind]string{codec.OpAdd: "add", codec.OpRemove: "remove", codec.OpReplace: "replace",
		codec.OpMove: "move", codec.OpCopy: "copy", codec.OpTest: "test", 0: "op(0)"}
	for k, want := range ops {
		if got := OpName(k); got != want {
			t.Errorf("OpName(%d) = %q, want %q", k, got, want)
		}
	}
	kinds := map[Kind]string{KindNull: "null", KindBool: "boolean", KindNumber: "number", KindString: "string",
		KindArray: "array", KindObject: "object", Kind(99): "invalid"}
	for k, want := range kinds {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
}

// compactCases are texts whose clean prefix ends at every kind of place:
// in a string or not, at a word boundary or in the tail, under 8 bytes.
var compactCases = []string{
	``, `1`, `""`, `" "`, `"a b c d e f g h i"`, `{"a":1}`, `{"x y":"on search is"}`,
	`{"acme.model":true,"acme.finish":[7],"acme.tokens":true}`,
	`{"acme.model":true, "acme.finish":[7]}`, `{"acme.model":"tr\"ue","b":1}`,
	`{"abcdefg":"hijklmn\u00e9op"}`, "{\"abcdefghijkl\":\"x\ty\"}", "[1,2,3,4,5,6,7,\n8]",
	`"abcdefgh`, `"abcdefghijklmno`, `"abc`, `["a","b"] `, ` [1]`, `"\\"`, `["a",  "b"]`,
	"\"abcdefg\x01\"", `{"abcdefghijklmnop":[  ]}`, `"abcdefghijklmnopqrstuvw\/"`,
}

func TestCompactInPlace(t *testing.T) {
	for _, s := range compactCases {
		checkCompact(t, []byte(s))
	}
}

// FuzzCompactInPlace: on text sonic.Valid accepts (what compactInPlace
// may be given), it accepts exactly what encoding/json does and yields
// json.Compact's output.
func FuzzCompactInPlace(f *testing.F) {
	for _, s := range compactCases {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if sonic.Valid(paddedCopy(raw)) {
			checkCompact(t, raw)
		}
	})
}

func checkCompact(t *testing.T, raw []byte) {
	t.Helper()
	got, ok := compactInPlace(bytes.Clone(raw))
	var want bytes.Buffer
	err := json.Compact(&want, raw)
	if len(raw) == 0 {
		err = nil // compactInPlace is never given nothing; it passes it through
	}
	if ok != (err == nil) || ok && !bytes.Equal(got, want.Bytes()) {
		t.Errorf("compactInPlace(%q) = %q, %v; want %q (%v)", raw, got, ok, want.Bytes(), err)
	}
}

// TestAppendCompact: the compact form is appended after what dst holds, and
// text compactInPlace refuses leaves dst as it was.
func TestAppendCompact(t *testing.T) {
	got, ok := AppendCompact([]byte("x"), []byte("{ \"a b\" : [ 1 ,\n\t\"\\\" \" ] }"))
	if want := `x{"a b":[1,"\" "]}`; !ok || string(got) != want {
		t.Errorf("AppendCompact = %q, %v; want %q, true", got, ok, want)
	}
	got, ok = AppendCompact([]byte("x"), []byte("[\"a\x01\"]"))
	if ok || string(got) != "x" {
		t.Errorf("AppendCompact of a control character = %q, %v; want \"x\", false", got, ok)
	}
}
