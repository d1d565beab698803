package wire

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// hostileIDs are thread ids that would change a subject's meaning if used
// raw, plus edge cases of the encoding itself.
var hostileIDs = []string{
	"", ".", "..", "a.b", "*", ">", "a.>", "a.*.b", " ", "a b", "\t", "\r\n",
	"=", "=abc", "==", "ü", "日本語", "\x00", "\xff\xfe", "a/b", "a\\b",
	"$JS.API", "_INBOX.x", strings.Repeat("x", MaxThreadIDLen), "-", "_",
}

func TestEncodeThread(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{give: "t1", want: "t1"},
		{give: "550e8400-e29b-41d4-a716-446655440000", want: "550e8400-e29b-41d4-a716-446655440000"},
		{give: "A_z-9", want: "A_z-9"},
		{give: "", want: "="},
		{give: "a.b", want: "=YS5i"},
		{give: "*", want: "=Kg"},
		{give: ">", want: "=Pg"},
		{give: "a b", want: "=YSBi"},
		{give: "=", want: "=PQ"},
		{give: "ü", want: "=w7w"},
		{give: "\xff", want: "=_w"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.give), func(t *testing.T) {
			if got := EncodeThread(tt.give); got != tt.want {
				t.Errorf("EncodeThread(%q) = %q, want %q", tt.give, got, tt.want)
			}
			if got := string(AppendThreadToken([]byte("x"), tt.give)); got != "x"+tt.want {
				t.Errorf("AppendThreadToken = %q, want %q", got, "x"+tt.want)
			}
			back, err := DecodeThread(tt.want)
			if ValidThread(tt.give) != nil {
				// An id no thread may have: its token is refused.
				if !errors.Is(err, ErrBadThread) {
					t.Errorf("DecodeThread(%q) = %q, %v; want ErrBadThread", tt.want, back, err)
				}
				return
			}
			if err != nil || back != tt.give {
				t.Errorf("DecodeThread(%q) = %q, %v; want %q", tt.want, back, err, tt.give)
			}
		})
	}
}

// TestValidThread: the ids no thread may have, and the error each gets.
func TestValidThread(t *testing.T) {
	tests := []struct {
		give string
		want error
	}{
		{"t1", nil},
		{"a.b *", nil},
		{"日本語", nil},
		{strings.Repeat("x", MaxThreadIDLen), nil},
		{"", ErrBadThread},
		{"\xff\xfe", ErrBadThread},
		{"ok\xc3", ErrBadThread},
		{strings.Repeat("x", MaxThreadIDLen+1), ErrThreadLen},
	}
	for _, tt := range tests {
		err := ValidThread(tt.give)
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("ValidThread(%.20q) = %v, want %v", tt.give, err, tt.want)
		}
		_, serr := EventSubject("acme", tt.give)
		if (serr == nil) != (tt.want == nil) {
			t.Errorf("EventSubject(%.20q) = %v, want an error: %v", tt.give, serr, tt.want != nil)
		}
		if tt.want != nil {
			if _, err := DecodeThread(EncodeThread(tt.give)); err == nil {
				t.Errorf("DecodeThread(EncodeThread(%.20q)) accepted", tt.give)
			}
		}
	}
}

func TestDecodeThreadRejectsNonCanonical(t *testing.T) {
	for _, give := range []string{
		"a.b", "*", ">", "a b", "ü", // not token-safe, not escaped
		"=YS5i=", // padding
		"=YR",    // non-canonical trailing bits
		"=dDE",   // escapes "t1", which is token-safe: only "t1" is canonical
		"=a.b",   // not base64url
		"=+/",    // std alphabet
		"x=y",    // marker inside
	} {
		if got, err := DecodeThread(give); !errors.Is(err, ErrBadThread) {
			t.Errorf("DecodeThread(%q) = %q, %v; want ErrBadThread", give, got, err)
		}
	}
}

func TestValidTenant(t *testing.T) {
	tests := []struct {
		give string
		want bool
	}{
		{"acme", true}, {"a", true}, {"0", true}, {"a-b_c9", true},
		{strings.Repeat("a", 63), true}, {strings.Repeat("a", 64), false},
		{"", false}, {"-a", false}, {"_a", false}, {"Acme", false}, {"a.b", false},
		{"*", false}, {">", false}, {"a b", false}, {"ü", false}, {"a=b", false},
	}
	for _, tt := range tests {
		if got := ValidTenant(tt.give) == nil; got != tt.want {
			t.Errorf("ValidTenant(%q) ok = %v, want %v", tt.give, got, tt.want)
		}
	}
}

func TestSubjects(t *testing.T) {
	s, err := EventSubject("acme", "a.b")
	if err != nil || s != "agui.acme.=YS5i.events" {
		t.Fatalf("EventSubject = %q, %v", s, err)
	}
	if _, err := EventSubject("ACME", "t"); !errors.Is(err, ErrBadTenant) {
		t.Errorf("EventSubject(ACME) err = %v, want ErrBadTenant", err)
	}
	if _, err := EventSubject("acme", strings.Repeat("x", MaxThreadIDLen+1)); !errors.Is(err, ErrThreadLen) {
		t.Errorf("EventSubject(long) err = %v, want ErrThreadLen", err)
	}
	tenant, tok, err := ParseEventSubject("agui.acme.=YS5i.events")
	if err != nil || tenant != "acme" || tok != "=YS5i" {
		t.Errorf("ParseEventSubject = %q %q %v", tenant, tok, err)
	}
	p, tenant, tok, err := ParseStoredSubject("aguip.17.acme.t1")
	if err != nil || p != 17 || tenant != "acme" || tok != "t1" {
		t.Errorf("ParseStoredSubject = %d %q %q %v", p, tenant, tok, err)
	}
	for _, bad := range []string{"agui.acme.t1", "agui.acme.t1.x.events", "agui.ACME.t1.events", "agui.acme.a b.events", "x.acme.t1.events"} {
		if _, _, err := ParseEventSubject(bad); err == nil {
			t.Errorf("ParseEventSubject(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"aguip.x.acme.t1", "aguip.-1.acme.t1", "aguip.1.acme", "aguip.1.acme.t1.x", "aguip.1.Acme.t1"} {
		if _, _, _, err := ParseStoredSubject(bad); err == nil {
			t.Errorf("ParseStoredSubject(%q) accepted", bad)
		}
	}
	p, tenant, tok, err = ParseSnapSubject(SnapSubject(3, "acme", "=YS5i"))
	if err != nil || p != 3 || tenant != "acme" || tok != "=YS5i" {
		t.Errorf("ParseSnapSubject = %d %q %q %v", p, tenant, tok, err)
	}
	for _, bad := range []string{"tc.snap.x.acme.t1", "tc.snap.-1.acme.t1", "tc.snap.1.acme", "tc.snap.1.acme.*", "tc.snap.1.acme.>", "tc.snap.1.Acme.t1", "aguip.1.acme.t1"} {
		if _, _, _, err := ParseSnapSubject(bad); !errors.Is(err, ErrBadSubject) && !errors.Is(err, ErrBadTenant) && !errors.Is(err, ErrBadThread) {
			t.Errorf("ParseSnapSubject(%q) err = %v, want a subject error", bad, err)
		}
	}
	for _, tt := range []struct{ give, want string }{
		{ViewSubject("acme", "t1"), "view.acme.t1"},
		{SnapSubject(3, "acme", "t1"), "tc.snap.3.acme.t1"},
		{SnapPartitionWildcard(3), "tc.snap.3.*.*"},
		{DLQSubject("acme", "t1"), "dlq.acme.t1"},
		{TapSubject("acme", "RUN_STARTED", "t1"), "tap.acme.RUN_STARTED.t1"},
		{CheckpointKey("acme", "=YS5i"), "acme.=YS5i"},
		{PartitionFilter(5), "aguip.5.>"},
		{StoredSubject(5, "acme", "t1"), "aguip.5.acme.t1"},
		{StreamSubjectTransform(64), "aguip.{{partition(64,1,2)}}.{{wildcard(1)}}.{{wildcard(2)}}"},
	} {
		if tt.give != tt.want {
			t.Errorf("got %q, want %q", tt.give, tt.want)
		}
	}
}

// tokenOK is the property every thread token must have: one subject token,
// never a wildcard, valid in a KV key.
func tokenOK(tok string) error {
	if tok == "" {
		return errors.New("empty token")
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '=') {
			return fmt.Errorf("byte %q at %d", c, i)
		}
	}
	return nil
}

func FuzzThreadToken(f *testing.F) {
	for _, id := range hostileIDs {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		tok := EncodeThread(id)
		if err := tokenOK(tok); err != nil {
			t.Fatalf("EncodeThread(%q) = %q: %v", id, tok, err)
		}
		back, err := DecodeThread(tok)
		if verr := ValidThread(id); verr != nil {
			if err == nil {
				t.Fatalf("DecodeThread(%q) of the refused id %q = %q, no error (%v)", tok, id, back, verr)
			}
			if _, err := EventSubject("acme", id); err == nil {
				t.Fatalf("EventSubject accepted the refused id %q", id)
			}
			return
		}
		if err != nil || back != id {
			t.Fatalf("round trip %q -> %q -> %q, %v", id, tok, back, err)
		}
		// Decoding arbitrary input either fails or is canonical.
		if got, err := DecodeThread(id); err == nil && EncodeThread(got) != id {
			t.Fatalf("DecodeThread(%q) = %q, which encodes to %q", id, got, EncodeThread(got))
		}
		if utf8.ValidString(id) && len(id) <= MaxThreadIDLen {
			subj, err := EventSubject("acme", id)
			if err != nil || strings.Count(subj, ".") != 3 {
				t.Fatalf("EventSubject(%q) = %q, %v", id, subj, err)
			}
		}
	})
}

func TestInboxPrefix(t *testing.T) {
	for _, tt := range []struct{ give, want string }{{"acme", "_INBOX_acme"}, {"a_b-1", "_INBOX_a_b-1"}} {
		if got, err := InboxPrefix(tt.give); err != nil || got != tt.want {
			t.Errorf("InboxPrefix(%q) = %q, %v; want %q", tt.give, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "ACME", "a.b", "a*", ">"} {
		if _, err := InboxPrefix(bad); err == nil {
			t.Errorf("InboxPrefix(%q): no error", bad)
		}
	}
}
