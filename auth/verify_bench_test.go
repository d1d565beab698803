package auth

import (
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// legacyVerify is the HS256-only verifier this package had before JWKS
// support (lenient base64, exact header), kept as the baseline of
// BenchmarkVerifyHS256.
func legacyVerify(key []byte, token string, now time.Time) (Claims, error) {
	var c Claims
	h, rest, _ := strings.Cut(token, ".")
	p, s, _ := strings.Cut(rest, ".")
	hb, err := b64.DecodeString(h)
	if err != nil || !bytes.Equal(hb, []byte(hs256Header)) {
		return c, ErrMalformed
	}
	sig, err := b64.DecodeString(s)
	if err != nil {
		return c, ErrMalformed
	}
	if !hmac.Equal(sig, sign(key, token[:len(h)+1+len(p)])) {
		return c, ErrSignature
	}
	pb, err := b64.DecodeString(p)
	if err != nil {
		return c, ErrMalformed
	}
	if err := json.Unmarshal(pb, &c); err != nil {
		return Claims{}, ErrMalformed
	}
	if now.Unix() >= c.Expiry {
		return Claims{}, ErrExpired
	}
	return c, nil
}

// The HS256 path, old and new side by side: what every request of a
// deployment on --auth-key pays, the first time a token is presented
// (Verifier) and again (Verifier-cached).
//
//	go test -run '^$' -bench 'VerifyHS256' -benchtime 20000x -count 3 ./auth
func BenchmarkVerifyHS256(b *testing.B) {
	tok, _ := Mint(testKey, Claims{Tenant: "acme", Threads: []string{"t*"}, Scope: "read", Expiry: t0.Add(time.Hour).Unix()})
	v, err := NewVerifier(VerifierConfig{SharedKeys: [][]byte{testKey}, Now: func() time.Time { return t0 }, CacheBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	cached, err := NewVerifier(VerifierConfig{SharedKeys: [][]byte{testKey}, Now: func() time.Time { return t0 }})
	if err != nil {
		b.Fatal(err)
	}
	run := func(name string, f func() (Claims, error)) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(tok)))
			for b.Loop() {
				if c, err := f(); err != nil || c.Tenant != "acme" {
					b.Fatal(c, err)
				}
			}
		})
	}
	run("legacy", func() (Claims, error) { return legacyVerify(testKey, tok, t0) })
	run("Verify", func() (Claims, error) { return Verify(testKey, tok, t0) })
	run("Verifier", func() (Claims, error) { return v.Verify(context.Background(), tok) })
	run("Verifier-cached", func() (Claims, error) { return cached.Verify(context.Background(), tok) })
}

// The asymmetric algorithms from a held JWKS (no fetch in the loop), each
// token checked in full (no cache) and presented again (cached).
//
//	go test -run '^$' -bench 'VerifyJWKS' -benchtime 2000x ./auth
func BenchmarkVerifyJWKS(b *testing.B) {
	k := newTestKeys(b)
	doc := jwksDoc(b, jwkOf(b, "ed", k.ed, "EdDSA"), jwkOf(b, "ec", k.ec, "ES256"), jwkOf(b, "rs", k.rsa, "RS256"))
	c := newClock(t0)
	path := b.TempDir() + "/jwks.json"
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		b.Fatal(err)
	}
	verifier := func(cacheBytes int64) *Verifier {
		v, err := NewVerifier(VerifierConfig{JWKS: []JWKSSource{{Issuer: testIssuer, File: path}}, Audience: "threadcast", Now: c.now, CacheBytes: cacheBytes})
		if err != nil {
			b.Fatal(err)
		}
		if err := v.Refresh(context.Background()); err != nil {
			b.Fatal(err)
		}
		return v
	}
	v, cached := verifier(-1), verifier(0)
	for _, tt := range []struct {
		name string
		m    jwt.SigningMethod
		key  any
		kid  string
	}{{"EdDSA", jwt.SigningMethodEdDSA, k.ed, "ed"}, {"ES256", jwt.SigningMethodES256, k.ec, "ec"}, {"RS256", jwt.SigningMethodRS256, k.rsa, "rs"}} {
		tok := jwtMint(b, tt.m, tt.key, tt.kid, claimsAt(c, nil))
		for _, vv := range []struct {
			name string
			v    *Verifier
		}{{tt.name, v}, {tt.name + "-cached", cached}} {
			b.Run(vv.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if cl, err := vv.v.Verify(context.Background(), tok); err != nil || cl.Tenant != "acme" {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
