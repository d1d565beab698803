package jsondoc

import "testing"

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
