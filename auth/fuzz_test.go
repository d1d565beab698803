package auth

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// FuzzVerifier feeds arbitrary tokens to a Verifier holding a shared key
// and an Ed25519, a P-256 and an RSA key. A token it accepts must be
// spelled canonically (each part re-encodes to itself) and must verify
// with golang-jwt under the algorithm of the key that signed it: our
// parser may be stricter than that implementation, never looser. Verified
// again (from the cache), a token has the same answer.
//
//	go test -run '^$' -fuzz FuzzVerifier -fuzztime 60s ./auth
func FuzzVerifier(f *testing.F) {
	k := newTestKeys(f)
	path := filepath.Join(f.TempDir(), "jwks.json")
	if err := os.WriteFile(path, jwksDoc(f, jwkOf(f, "ed", k.ed, "EdDSA"), jwkOf(f, "ec", k.ec, "ES256"), jwkOf(f, "rs", k.rsa, "RS256")), 0o600); err != nil {
		f.Fatal(err)
	}
	c := newClock(t0)
	cfg := DefaultVerifierConfig()
	cfg.SharedKeys = [][]byte{testKey}
	cfg.JWKS = []JWKSSource{{Issuer: testIssuer, File: path}}
	cfg.Audience = "threadcast"
	cfg.Now = c.now
	v, err := NewVerifier(cfg)
	if err != nil {
		f.Fatal(err)
	}
	if err := v.Refresh(context.Background()); err != nil {
		f.Fatal(err)
	}
	f.Add(jwtMint(f, jwt.SigningMethodEdDSA, k.ed, "ed", claimsAt(c, nil)))
	f.Add(jwtMint(f, jwt.SigningMethodES256, k.ec, "ec", claimsAt(c, nil)))
	f.Add(jwtMint(f, jwt.SigningMethodRS256, k.rsa, "rs", claimsAt(c, nil)))
	f.Add(jwtMint(f, jwt.SigningMethodHS256, testKey, "", claimsAt(c, nil)))
	exp := c.since(time.Hour)
	f.Add(rawToken(`{"alg":"HS256"}`, fmt.Sprintf(`{"tenant":"acme","exp":%d,"x":{"tenant":["}"]},"Tenant":"globex"}`, exp), testKey, nil))
	f.Add(rawToken(`{"alg":"EdDSA","kid":"ed","k\u0069d":"ec"}`, fmt.Sprintf(`{"tenant":"acme","iss":%q,"aud":"threadcast","exp":%d}`, testIssuer, exp), nil, k.ed))
	f.Add("a.b.c")
	f.Add("")
	keyOf := map[string]any{"ed": k.ed.Public().(ed25519.PublicKey), "ec": &k.ec.PublicKey, "rs": &k.rsa.PublicKey}
	f.Fuzz(func(t *testing.T, tok string) {
		cl, err := v.Verify(context.Background(), tok)
		// Presented again, the token has the same answer (the second
		// may come from the cache).
		if again, err2 := v.Verify(context.Background(), tok); (err == nil) != (err2 == nil) || fmt.Sprint(again) != fmt.Sprint(cl) {
			t.Fatalf("verified twice: %+v, %v; then %+v, %v", cl, err, again, err2)
		}
		if err != nil {
			if cl.Tenant != "" {
				t.Fatalf("claims leaked on error: %+v", cl)
			}
			return
		}
		for _, part := range strings.Split(tok, ".") {
			b, _ := b64.DecodeString(part)
			if b64.EncodeToString(b) != part {
				t.Fatalf("accepted a non-canonical part %q", part)
			}
		}
		_, err = jwt.Parse(tok, func(tk *jwt.Token) (any, error) {
			if tk.Method.Alg() == AlgHS256 {
				return testKey, nil
			}
			kid, _ := tk.Header["kid"].(string)
			return keyOf[kid], nil
		}, jwt.WithValidMethods([]string{AlgHS256, AlgEdDSA, AlgES256, AlgRS256}), jwt.WithTimeFunc(func() time.Time { return c.now() }), jwt.WithLeeway(cfg.ClockSkew))
		if err != nil {
			t.Fatalf("accepted %q, which golang-jwt refuses: %v", tok, err)
		}
	})
}
