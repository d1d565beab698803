package jsondoc

import (
	"errors"
	"strings"
	"testing"
)

func TestUnescapeEscape(t *testing.T) {
	tests := []struct {
		give string // escaped token
		want string // member name
	}{
		{"", ""},
		{"abc", "abc"},
		{"a~1b", "a/b"},
		{"m~0n", "m~n"},
		{"~01", "~1"},
		{"~10", "/0"},
		{"~0~0~1~1", "~~//"},
		{"é~1ü", "é/ü"},
	}
	for _, tt := range tests {
		if got := Unescape(tt.give); got != tt.want {
			t.Errorf("Unescape(%q) = %q, want %q", tt.give, got, tt.want)
		}
		if got := Escape(tt.want); got != tt.give {
			t.Errorf("Escape(%q) = %q, want %q", tt.want, got, tt.give)
		}
	}
}

func TestCheckPointer(t *testing.T) {
	tests := []struct {
		give string
		want bool
	}{
		{"", true}, {"/", true}, {"//", true}, {"/a/b", true}, {"/~0~1", true},
		{"a", false}, {"/~", false}, {"/~2", false}, {"/a~", false}, {"#/a", false},
	}
	for _, tt := range tests {
		if got := checkPointer(tt.give); got != tt.want {
			t.Errorf("checkPointer(%q) = %v, want %v", tt.give, got, tt.want)
		}
	}
}

func TestParseIndex(t *testing.T) {
	tests := []struct {
		tok       string
		n         int
		allowDash bool
		want      int
		wantOK    bool
	}{
		{"0", 1, false, 0, true},
		{"0", 0, false, 0, false},
		{"0", 0, true, 0, true},
		{"-", 3, true, 3, true},
		{"-", 3, false, 0, false},
		{"3", 3, true, 3, true},
		{"3", 3, false, 0, false},
		{"01", 5, true, 0, false},
		{"00", 5, true, 0, false},
		{"", 5, true, 0, false},
		{"+1", 5, true, 0, false},
		{"-1", 5, true, 0, false},
		{"1e0", 5, true, 0, false},
		{" 1", 5, true, 0, false},
		{"18446744073709551616", 5, true, 0, false},
		{"12", 13, false, 12, true},
	}
	for _, tt := range tests {
		got, e := parseIndex(tt.tok, tt.n, tt.allowDash)
		if (e == nil) != tt.wantOK || (e == nil && got != tt.want) {
			t.Errorf("parseIndex(%q, %d, %v) = %d, %v; want %d ok=%v", tt.tok, tt.n, tt.allowDash, got, e, tt.want, tt.wantOK)
		}
	}
}

// TestEscapedTokensInOnePatch: escaped tokens are unescaped into a
// scratch that grows while the patch runs; every one must still name its
// member, in lookups, new names and error messages.
func TestEscapedTokensInOnePatch(t *testing.T) {
	long := strings.Repeat("~0~1", 40) // unescapes to 80 bytes: the scratch grows
	d := mustParse(t, `{"a/b":{"m~n":1}}`)
	ops := mustPatch(t, `[
		{"op":"add","path":"/a~1b/`+long+`","value":2},
		{"op":"add","path":"/x~0y","value":{"p/q":3}},
		{"op":"copy","from":"/a~1b/m~0n","path":"/x~0y/p~1q~1r"},
		{"op":"move","from":"/a~1b/`+long+`","path":"/`+long+`"},
		{"op":"test","path":"/x~0y/p~1q","value":3}]`)
	if err := d.Apply(ops); err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("~/", 40)
	assertJSON(t, d, `{"a/b":{"m~n":1},"x~y":{"p/q":3,"p/q/r":1},"`+name+`":2}`)

	err := d.Apply(mustPatch(t, `[{"op":"add","path":"/z~1z","value":1},{"op":"remove","path":"/a~1b/n~0o"}]`))
	var pe *PatchError
	if !errors.As(err, &pe) || pe.Index != 1 || pe.Reason != `no member "n~o" at "/a~1b/n~0o"` {
		t.Fatalf("err = %v, want op 1 with no member \"n~o\"", err)
	}
	assertJSON(t, d, `{"a/b":{"m~n":1},"x~y":{"p/q":3,"p/q/r":1},"`+name+`":2}`)
}
