package codec

import (
	"testing"
)

// TestAppendViewString pins the bytes the view encoders write for a held
// string (the WTF-8 rules of envelope.md §7 note 4 included), for both
// forms of the argument.
func TestAppendViewString(t *testing.T) {
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
			if got := string(AppendViewString(nil, tt.give)); got != tt.want {
				t.Errorf("AppendViewString(%q) = %s, want %s", tt.give, got, tt.want)
			}
			if got := string(AppendViewString([]byte("x"), []byte(tt.give))); got != "x"+tt.want {
				t.Errorf("AppendViewString([]byte(%q)) = %s, want x%s", tt.give, got, tt.want)
			}
		})
	}
}

// TestAppendUnquotedRaw decodes validated literals as AppendUnquoted (and
// so the Decoder) does.
func TestAppendUnquotedRaw(t *testing.T) {
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
			if got := string(AppendUnquotedRaw([]byte("x"), []byte(tt.give))); got != "x"+tt.want {
				t.Errorf("AppendUnquotedRaw(%s) = %q, want %q", tt.give, got, "x"+tt.want)
			}
			want, err := AppendUnquoted(nil, []byte(tt.give))
			if err != nil || string(want) != tt.want {
				t.Errorf("AppendUnquoted(%s) = %q, %v; it disagrees with AppendUnquotedRaw", tt.give, want, err)
			}
		})
	}
}

// FuzzStringForms: the two escaping forms mean the same text (a literal
// either one writes decodes, by AppendUnquoted, to the same bytes); the string
// and []byte forms of AppendViewString write the same bytes; and
// AppendUnquotedRaw decodes what AppendString writes exactly as AppendUnquoted
// does.
func FuzzStringForms(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"\\\n\r\t\b\f\x00\x1f", "é😀", "\xed\xa0\xbd\xed\xb8\x80",
		"\xed\xa0\xbd", "\xed\xb8\x80\xed\xa0\xbd", "x\xffy", "\xc0\xaf", "\xf4\x90\x80\x80", "a\xe2\x82"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		view := AppendViewString(nil, s)
		js := AppendString(nil, s)
		gotText, err := AppendUnquoted(nil, view)
		if err != nil {
			t.Fatalf("AppendViewString(%q) = %s: not a JSON string: %v", s, view, err)
		}
		wantText, err := AppendUnquoted(nil, js)
		if err != nil {
			t.Fatalf("AppendString(%q) = %s: %v", s, js, err)
		}
		if string(gotText) != string(wantText) {
			t.Fatalf("%q: AppendViewString %s means %q, AppendString %s means %q", s, view, gotText, js, wantText)
		}
		if got := AppendUnquotedRaw(nil, js); string(got) != string(wantText) {
			t.Fatalf("%s: AppendUnquotedRaw %q, AppendUnquoted %q", js, got, wantText)
		}
		if got := AppendViewString(nil, []byte(s)); string(got) != string(view) {
			t.Fatalf("%q: AppendViewString of the bytes %s, of the string %s", s, got, view)
		}
	})
}
