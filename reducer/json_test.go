package reducer

import (
	"testing"

	"github.com/threadcast/threadcast/codec"
)

// TestAppendString pins the bytes the view encoders write for a held string
// (the WTF-8 rules of envelope.md §7 note 4 included).
func TestAppendString(t *testing.T) {
	tests := []struct {
		name, give, want string
	}{
		{"empty", "", `""`},
		{"plain", "hello", `"hello"`},
		{"quote and backslash", `a"b\c`, `"a\"b\\c"`},
		{"newline, return, tab", "a\nb\rc\td", `"a\nb\rc\td"`},
		{"backspace and form feed as \\u", "a\bb\fc", `"a\u0008b\u000cc"`},
		{"other controls", "\x00\x01\x1f", `"\u0000\u0001\u001f"`},
		{"DEL and slash pass", "\x7f/", "\"\x7f/\""},
		{"multibyte passes", "é€😀", `"é€😀"`},
		{"WTF-8 pair joined", "\xed\xa0\xbd\xed\xb8\x80", `"😀"`},
		{"lone high surrogate", "x\xed\xa0\xbdy", `"x\ud83dy"`},
		{"lone low surrogate", "\xed\xb8\x80", `"\ude00"`},
		{"high then high", "\xed\xa0\xbd\xed\xa0\xbd", `"\ud83d\ud83d"`},
		{"low then high is not a pair", "\xed\xb8\x80\xed\xa0\xbd", `"\ude00\ud83d"`},
		{"high at the end, too short for a pair", "\xed\xa0\xbdab", `"\ud83dab"`},
		{"invalid byte", "x\xffy", "\"x\ufffdy\""},
		{"truncated sequence", "a\xe2\x82", "\"a\ufffd\ufffd\""},
		{"overlong", "\xc0\xaf", "\"\ufffd\ufffd\""},
		{"above U+10FFFF", "\xf4\x90\x80\x80", "\"\ufffd\ufffd\ufffd\ufffd\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(appendString(nil, tt.give)); got != tt.want {
				t.Errorf("appendString(%q) = %s, want %s", tt.give, got, tt.want)
			}
			if got := string(appendStringBytes([]byte("x"), []byte(tt.give))); got != "x"+tt.want {
				t.Errorf("appendStringBytes(%q) = %s, want x%s", tt.give, got, tt.want)
			}
		})
	}
}

// TestAppendUnquoted decodes validated literals as the codec's Decoder does.
func TestAppendUnquoted(t *testing.T) {
	tests := []struct {
		name, give, want string
	}{
		{"empty", `""`, ""},
		{"no escapes", `"héllo"`, "héllo"},
		{"simple escapes", `"\"\\\/\b\f\n\r\t"`, "\"\\/\b\f\n\r\t"},
		{"unicode escape", `"\u00e9\u20AC"`, "é€"},
		{"escaped pair joined", `"\ud83d\ude00"`, "😀"},
		{"lone high to WTF-8", `"a\ud83db"`, "a\xed\xa0\xbdb"},
		{"lone low to WTF-8", `"\ude00"`, "\xed\xb8\x80"},
		{"high then non-low escape", `"\ud83d\u0041"`, "\xed\xa0\xbdA"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(appendUnquoted([]byte("x"), []byte(tt.give))); got != "x"+tt.want {
				t.Errorf("appendUnquoted(%s) = %q, want %q", tt.give, got, "x"+tt.want)
			}
			want, err := codec.AppendUnquoted(nil, []byte(tt.give))
			if err != nil || string(want) != tt.want {
				t.Errorf("codec.AppendUnquoted(%s) = %q, %v; the copies disagree", tt.give, want, err)
			}
		})
	}
}

// FuzzJSONHelpersMatchCodec: reducer's copies of the codec's string
// helpers (kept for speed; see json.go) mean the same as the codec's: a
// literal either one writes decodes to the same text, and appendUnquoted
// decodes what codec.AppendString writes exactly as codec.AppendUnquoted does.
func FuzzJSONHelpersMatchCodec(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"\\\n\r\t\b\f\x00\x1f", "é😀", "\xed\xa0\xbd\xed\xb8\x80",
		"\xed\xa0\xbd", "\xed\xb8\x80\xed\xa0\xbd", "x\xffy", "\xc0\xaf", "\xf4\x90\x80\x80", "a\xe2\x82"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ours := appendString(nil, s)
		theirs := codec.AppendString(nil, s)
		gotText, err := codec.AppendUnquoted(nil, ours)
		if err != nil {
			t.Fatalf("appendString(%q) = %s: not a JSON string: %v", s, ours, err)
		}
		wantText, err := codec.AppendUnquoted(nil, theirs)
		if err != nil {
			t.Fatalf("codec.AppendString(%q) = %s: %v", s, theirs, err)
		}
		if string(gotText) != string(wantText) {
			t.Fatalf("%q: appendString %s means %q, codec.AppendString %s means %q", s, ours, gotText, theirs, wantText)
		}
		if got := appendUnquoted(nil, theirs); string(got) != string(wantText) {
			t.Fatalf("%s: appendUnquoted %q, codec.AppendUnquoted %q", theirs, got, wantText)
		}
		if got := appendStringBytes(nil, []byte(s)); string(got) != string(ours) {
			t.Fatalf("%q: appendStringBytes %s, appendString %s", s, got, ours)
		}
	})
}
