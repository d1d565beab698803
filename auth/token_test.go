package auth

import (
	"encoding/base64"
	"errors"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	testKey = []byte("0123456789abcdef-test-key")
	t0      = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
)

func mustMint(t *testing.T, key []byte, c Claims) string {
	t.Helper()
	tok, err := Mint(key, c)
	if err != nil {
		t.Fatalf("Mint: %v", err)
	}
	return tok
}

func TestMintVerifyRoundTrip(t *testing.T) {
	give := Claims{Tenant: "acme", Threads: []string{"t-1", "run-*"}, Expiry: t0.Add(time.Hour).Unix(), IssuedAt: t0.Unix()}
	tok := mustMint(t, testKey, give)
	got, err := Verify(testKey, tok, t0)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if got.Tenant != give.Tenant || got.Expiry != give.Expiry || got.IssuedAt != give.IssuedAt ||
		strings.Join(got.Threads, ",") != "t-1,run-*" {
		t.Fatalf("claims = %+v, want %+v", got, give)
	}
	// The header is the standard HS256 JWT header, so jwt tooling can read it.
	h, _, _ := strings.Cut(tok, ".")
	if h != "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9" {
		t.Fatalf("header = %q", h)
	}
}

// forge builds a token with an arbitrary header and payload, signed with key.
func forge(hs256Header, payload string, key []byte) string {
	signed := b64.EncodeToString([]byte(hs256Header)) + "." + b64.EncodeToString([]byte(payload))
	return signed + "." + b64.EncodeToString(sign(key, signed))
}

func TestVerifyFailures(t *testing.T) {
	valid := mustMint(t, testKey, Claims{Tenant: "acme", Expiry: t0.Add(time.Minute).Unix()})
	h, rest, _ := strings.Cut(valid, ".")
	p, s, _ := strings.Cut(rest, ".")
	otherPayload := b64.EncodeToString([]byte(`{"tenant":"evil","exp":9999999999}`))
	goodPayload := `{"tenant":"acme","exp":9999999999}`
	tests := []struct {
		name string
		give string
		key  []byte
		now  time.Time
		want error
	}{
		{"expired exactly at exp", valid, testKey, time.Unix(t0.Add(time.Minute).Unix(), 0), ErrExpired},
		{"expired later", valid, testKey, t0.Add(time.Hour), ErrExpired},
		{"wrong key", valid, []byte("another-key-of-16+bytes"), t0, ErrSignature},
		{"payload swapped", h + "." + otherPayload + "." + s, testKey, t0, ErrSignature},
		{"signature truncated", h + "." + p + "." + s[:40], testKey, t0, ErrSignature},
		{"unused low bits of the signature flipped", h + "." + p + "." + flipLowBits(t, s), testKey, t0, ErrMalformed},
		{"unused low bits of the claims flipped", h + "." + flipLowBits(t, p) + "." + s, testKey, t0, ErrMalformed},
		{"signature of other token", h + "." + p + "." + b64.EncodeToString(make([]byte, 32)), testKey, t0, ErrSignature},
		{"empty", "", testKey, t0, ErrMalformed},
		{"one part", "abc", testKey, t0, ErrMalformed},
		{"two parts", h + "." + p, testKey, t0, ErrMalformed},
		{"four parts", valid + ".x", testKey, t0, ErrMalformed},
		{"empty signature", h + "." + p + ".", testKey, t0, ErrMalformed},
		{"header not base64", "!!." + p + "." + s, testKey, t0, ErrMalformed},
		{"header not json", b64.EncodeToString([]byte("nope")) + "." + p + "." + s, testKey, t0, ErrMalformed},
		{"signature not base64", h + "." + p + ".***", testKey, t0, ErrMalformed},
		{"too long", strings.Repeat("a", MaxTokenLen+1), testKey, t0, ErrMalformed},
		{"claims not json", forge(hs256Header, "not json", testKey), testKey, t0, ErrMalformed},
		{"claims without tenant", forge(hs256Header, `{"exp":9999999999}`, testKey), testKey, t0, ErrMalformed},
		{"claims without exp", forge(hs256Header, `{"tenant":"acme"}`, testKey), testKey, t0, ErrMalformed},
		{"alg none", forge(`{"alg":"none","typ":"JWT"}`, goodPayload, testKey), testKey, t0, ErrAlgorithm},
		{"alg none unsigned", b64.EncodeToString([]byte(`{"alg":"none"}`)) + "." + b64.EncodeToString([]byte(goodPayload)) + ".x", testKey, t0, ErrAlgorithm},
		{"alg RS256", forge(`{"alg":"RS256","typ":"JWT"}`, goodPayload, testKey), testKey, t0, ErrAlgorithm},
		{"alg HS512", forge(`{"alg":"HS512","typ":"JWT"}`, goodPayload, testKey), testKey, t0, ErrAlgorithm},
		{"alg HS256 spelled hs256", forge(`{"alg":"hs256","typ":"JWT"}`, goodPayload, testKey), testKey, t0, ErrAlgorithm},
		{"alg EdDSA with the shared key", forge(`{"alg":"EdDSA","typ":"JWT"}`, goodPayload, testKey), testKey, t0, ErrAlgorithm},
		{"crit header", forge(`{"alg":"HS256","crit":["b64"],"b64":false}`, goodPayload, testKey), testKey, t0, ErrMalformed},
		{"typ not a JWT", forge(`{"alg":"HS256","typ":"JOSE+JSON"}`, goodPayload, testKey), testKey, t0, ErrMalformed},
		{"padded signature", valid + "=", testKey, t0, ErrMalformed},
		{"newline in signature", h + "." + p + "." + s[:10] + "\n" + s[10:], testKey, t0, ErrMalformed},
		{"standard alphabet", h + "." + p + ".+" + s[1:], testKey, t0, ErrMalformed},
		{"aud without a configured audience", forge(hs256Header, `{"tenant":"acme","exp":9999999999,"aud":"other"}`, testKey), testKey, t0, ErrAudience},
		{"nbf in the future", forge(hs256Header, `{"tenant":"acme","exp":9999999999,"nbf":`+strconv.FormatInt(t0.Unix()+1, 10)+`}`, testKey), testKey, t0, ErrNotYetValid},
		{"short key", valid, []byte("short"), t0, ErrShortKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Verify(tt.key, tt.give, tt.now)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify error = %v, want %v", err, tt.want)
			}
			if c.Tenant != "" {
				t.Fatalf("claims leaked on error: %+v", c)
			}
			if !strings.HasPrefix(err.Error(), "auth: ") {
				t.Fatalf("error %q lacks package prefix", err)
			}
		})
	}
}

// flipLowBits returns seg with the unused low bits of its last character
// set: a second spelling of the same bytes that a lenient decoder accepts
// (checked here, so that the refusal tested is of that spelling alone).
func flipLowBits(t *testing.T, seg string) string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	unused := map[int]int{2: 4, 3: 2}[len(seg)%4] // bits: 4 after 2 chars, 2 after 3
	if unused == 0 {
		t.Fatalf("segment %q has no unused bits", seg)
	}
	i := strings.IndexByte(alphabet, seg[len(seg)-1])
	flipped := seg[:len(seg)-1] + string(alphabet[i|(1<<unused-1)])
	a, err1 := base64.RawURLEncoding.DecodeString(seg)
	b, err2 := base64.RawURLEncoding.DecodeString(flipped)
	if flipped == seg || err1 != nil || err2 != nil || string(a) != string(b) {
		t.Fatalf("flipping %q gave %q: a lenient decoder must read both as the same bytes", seg, flipped)
	}
	return flipped
}

func TestMintErrors(t *testing.T) {
	tests := []struct {
		name string
		key  []byte
		give Claims
		want error
	}{
		{"short key", []byte("123456789012345"), Claims{Tenant: "a", Expiry: 1}, ErrShortKey},
		{"no tenant", testKey, Claims{Expiry: 1}, ErrClaims},
		{"no expiry", testKey, Claims{Tenant: "a"}, ErrClaims},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Mint(tt.key, tt.give); !errors.Is(err, tt.want) {
				t.Fatalf("Mint error = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		p, s string
		want bool
	}{
		{"*", "", true},
		{"*", "anything.at/all", true},
		{"t1", "t1", true},
		{"t1", "t10", false},
		{"t*", "t10", true},
		{"run-*-x", "run-abc-x", true},
		{"run-*-x", "run-abc-y", false},
		{"*a*b*", "xxaxxbxx", true},
		{"*a*b*", "xxbxxaxx", false},
		{"a**", "a", true},
		{"", "", true},
		{"", "a", false},
		{"a.b", "a.b", true},
		{"a.b", "a*b", false},
		{strings.Repeat("*a", 50), strings.Repeat("a", 1000), true},
		{strings.Repeat("*a", 50) + "b", strings.Repeat("a", 1000), false},
	}
	for _, tt := range tests {
		if got := Match(tt.p, tt.s); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.p, tt.s, got, tt.want)
		}
	}
}

func TestClaimsThreads(t *testing.T) {
	tests := []struct {
		name    string
		give    []string
		thread  string
		allows  bool
		allThrs bool
	}{
		{"no patterns", nil, "x", true, true},
		{"star", []string{"*"}, "x", true, true},
		{"listed", []string{"a", "b*"}, "bee", true, false},
		{"not listed", []string{"a", "b*"}, "c", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Claims{Tenant: "t", Threads: tt.give}
			if got := c.AllowsThread(tt.thread); got != tt.allows {
				t.Errorf("AllowsThread = %v, want %v", got, tt.allows)
			}
			if got := c.AllThreads(); got != tt.allThrs {
				t.Errorf("AllThreads = %v, want %v", got, tt.allThrs)
			}
		})
	}
}

func TestFromRequest(t *testing.T) {
	tests := []struct {
		name   string
		url    string
		header string
		want   string
		wantOK bool
	}{
		{"bearer", "/x", "Bearer abc", "abc", true},
		{"bearer case", "/x", "bearer abc", "abc", true},
		{"basic is not a token", "/x?access_token=q", "Basic abc", "", false},
		{"empty bearer", "/x", "Bearer ", "", false},
		{"query", "/x?access_token=q1", "", "q1", true},
		{"header wins", "/x?access_token=q1", "Bearer h1", "h1", true},
		{"none", "/x", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", tt.url, nil)
			if tt.header != "" {
				r.Header.Set("Authorization", tt.header)
			}
			got, ok := FromRequest(r)
			if got != tt.want || ok != tt.wantOK {
				t.Fatalf("FromRequest = %q, %v; want %q, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func FuzzVerify(f *testing.F) {
	f.Add(mustMintF(f))
	f.Add("a.b.c")
	f.Add("")
	f.Add(base64.RawURLEncoding.EncodeToString([]byte(hs256Header)) + ".e30.")
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := Verify(testKey, tok, t0)
		if err == nil {
			// Only a correctly signed token can verify: re-signing its
			// signed part must give the same signature.
			i := strings.LastIndexByte(tok, '.')
			if b64.EncodeToString(sign(testKey, tok[:i])) != tok[i+1:] || c.Tenant == "" {
				t.Fatalf("accepted a token not signed by the key: %q", tok)
			}
		}
	})
}

func mustMintF(f *testing.F) string {
	tok, err := Mint(testKey, Claims{Tenant: "acme", Expiry: t0.Add(time.Hour).Unix()})
	if err != nil {
		f.Fatal(err)
	}
	return tok
}

func BenchmarkVerify(b *testing.B) {
	tok, _ := Mint(testKey, Claims{Tenant: "acme", Threads: []string{"t*"}, Expiry: t0.Add(time.Hour).Unix()})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Verify(testKey, tok, t0); err != nil {
			b.Fatal(err)
		}
	}
}

func TestClaimsCan(t *testing.T) {
	tests := []struct {
		give        string // Claims.Scope
		read, write bool
	}{
		{give: "", read: true},
		{give: "read", read: true},
		{give: "publish", write: true},
		{give: "read publish", read: true, write: true},
		{give: "publish  read", read: true, write: true},
		{give: "readpublish"},
		{give: "Read PUBLISH"},
		{give: "admin"},
	}
	for _, tt := range tests {
		c := Claims{Tenant: "t", Scope: tt.give}
		if got := c.Can(ScopeRead); got != tt.read {
			t.Errorf("%q: Can(read) = %v, want %v", tt.give, got, tt.read)
		}
		if got := c.Can(ScopePublish); got != tt.write {
			t.Errorf("%q: Can(publish) = %v, want %v", tt.give, got, tt.write)
		}
		if c.Can("") {
			t.Errorf("%q: Can(\"\") = true", tt.give)
		}
	}
}
