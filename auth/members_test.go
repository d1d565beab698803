package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// rawToken signs header and claims, JSON written by hand, with HMAC-SHA256
// (key) or Ed25519 (ed), so that a test can send what no JWT library
// writes: repeated members, members spelled in another case.
func rawToken(header, claims string, key []byte, ed ed25519.PrivateKey) string {
	enc := base64.RawURLEncoding.EncodeToString
	signed := enc([]byte(header)) + "." + enc([]byte(claims))
	var sig []byte
	if ed != nil {
		sig = ed25519.Sign(ed, []byte(signed))
	} else {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(signed))
		sig = m.Sum(nil)
	}
	return signed + "." + enc(sig)
}

// JSON member names are case-sensitive and, in a JOSE header or a claims
// set, unique (RFC 7515 §4, RFC 7519 §4). encoding/json matches names
// without regard to case (Unicode folding: "ſ" is "s") and keeps the last
// of repeated ones, so a token could say two tenants and be read as the
// one its issuer's parser did not see: {"tenant":"acme","Tenant":"globex"}
// is tenant acme to the RFC and to most libraries, globex to encoding/json.
// A token whose header or claims repeat, or respell, a member Threadcast
// reads is malformed; the exact spelling, once, passes.
func TestVerifierMemberNames(t *testing.T) {
	k := newTestKeys(t)
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, jwksDoc(t, jwkOf(t, "ed", k.ed, "EdDSA")), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newClock(t0)
	v := newTestVerifier(t, c, JWKSSource{Issuer: testIssuer, File: path}, func(cfg *VerifierConfig) { cfg.Audience = "" })
	exp := c.since(time.Hour)
	const hs = `{"alg":"HS256","typ":"JWT"}`
	const ed = `{"alg":"EdDSA","kid":"ed"}`
	iss := fmt.Sprintf(`"iss":%q`, testIssuer)
	tests := []struct {
		name           string
		header, claims string
	}{
		{"tenant twice", hs, fmt.Sprintf(`{"tenant":"acme","exp":%d,"tenant":"globex"}`, exp)},
		{"tenant and Tenant", hs, fmt.Sprintf(`{"tenant":"acme","exp":%d,"Tenant":"globex"}`, exp)},
		{"TENANT alone", hs, fmt.Sprintf(`{"TENANT":"globex","exp":%d}`, exp)},
		{"tenant escaped", hs, fmt.Sprintf(`{"tenant":"acme","exp":%d,"ten\u0061nt":"globex"}`, exp)},
		{"scope with a long s", hs, fmt.Sprintf(`{"tenant":"acme","exp":%d,"ſcope":"publish"}`, exp)},
		{"threads twice", hs, fmt.Sprintf(`{"tenant":"acme","threads":["a"],"exp":%d,"threads":["*"]}`, exp)},
		{"Exp", hs, fmt.Sprintf(`{"tenant":"acme","exp":%d,"Exp":%d}`, exp, exp+int(24*time.Hour/time.Second))},
		{"nested object then a repeat", hs, fmt.Sprintf(`{"x":{"tenant":"a","y":[1,{"z":"}"}]},"tenant":"acme","exp":%d,"tenant":"globex"}`, exp)},
		{"ALG in the header", `{"ALG":"HS256"}`, fmt.Sprintf(`{"tenant":"acme","exp":%d}`, exp)},
		{"kid twice in the header", `{"alg":"EdDSA","kid":"other","kid":"ed"}`, fmt.Sprintf(`{"tenant":"acme",%s,"exp":%d}`, iss, exp)},
		{"iss twice", ed, fmt.Sprintf(`{"tenant":"acme","iss":"https://evil.example",%s,"exp":%d}`, iss, exp)},
		{"Iss", ed, fmt.Sprintf(`{"tenant":"acme",%s,"Iss":"https://evil.example","exp":%d}`, iss, exp)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tok string
			if tt.header == hs || tt.header == `{"ALG":"HS256"}` {
				tok = rawToken(tt.header, tt.claims, testKey, nil)
			} else {
				tok = rawToken(tt.header, tt.claims, nil, k.ed)
			}
			got, err := v.Verify(context.Background(), tok)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Verify = %+v, %v; want ErrMalformed", got, err)
			}
			if got.Tenant != "" {
				t.Fatalf("claims leaked on error: %+v", got)
			}
		})
	}
	// The one-key Verify reads claims the same way.
	if _, err := Verify(testKey, rawToken(hs, fmt.Sprintf(`{"tenant":"acme","exp":%d}`, exp), testKey, nil), t0); err != nil {
		t.Fatalf("Verify of the plain token: %v", err)
	}
	dup := rawToken(hs, fmt.Sprintf(`{"tenant":"acme","exp":%d,"Tenant":"globex"}`, exp), testKey, nil)
	if _, err := Verify(testKey, dup, t0); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Verify with a respelled tenant: %v, want ErrMalformed", err)
	}
	// Exact names once each, members Threadcast does not read (repeated
	// or not, whatever their case), and nesting pass.
	for name, tok := range map[string]string{
		"HS256": rawToken(hs, fmt.Sprintf(`{"tenant":"acme","exp":%d,"x":1,"x":2,"X":3,"sub":"u","nested":{"tenant":"other","Tenant":"x"}}`, exp), testKey, nil),
		"EdDSA": rawToken(`{"alg":"EdDSA","kid":"ed","typ":"JWT","x5t":"a","X5T":"b"}`, fmt.Sprintf(` { "tenant" : "acme" , %s , "exp" : %d , "scope" : "read" } `, iss, exp), nil, k.ed),
	} {
		got, err := v.Verify(context.Background(), tok)
		if err != nil || got.Tenant != "acme" {
			t.Errorf("%s: Verify = %+v, %v", name, got, err)
		}
	}
}

// The names checkMembers holds to one spelling are every member
// encoding/json reads into the header and the claims: what it writes for
// a value with every field set.
func TestMemberNamesCoverTheStructs(t *testing.T) {
	for _, tt := range []struct {
		v     any
		names [][]byte
	}{
		{Claims{Tenant: "a", Threads: []string{"t"}, Expiry: 1, NotBefore: 1, IssuedAt: 1, Issuer: "i", Audience: Audience{"x"}, Scope: "read"}, claimNames},
		{jwtHeader{Alg: "a", Kid: "k", Typ: "t", Crit: json.RawMessage(`["x"]`)}, headerNames},
	} {
		b, err := json.Marshal(tt.v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if len(m) != len(tt.names) {
			t.Errorf("%T: %d members written, %d names checked", tt.v, len(m), len(tt.names))
		}
		for _, n := range tt.names {
			if _, ok := m[string(n)]; !ok {
				t.Errorf("%T: %q checked but not written (%s)", tt.v, n, b)
			}
		}
	}
}
