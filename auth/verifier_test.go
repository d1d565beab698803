package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/threadcast/threadcast/internal/testsupport"
)

// The tokens these tests verify are minted by golang-jwt and the JWKS
// documents are written here from the raw key material, so that what
// Verifier accepts is checked against an independent implementation of
// the same RFCs, not against our own encoder.

const testIssuer = "https://issuer.example"

// testKeys are one key per asymmetric algorithm, generated once.
type testKeys struct {
	ed  ed25519.PrivateKey
	ec  *ecdsa.PrivateKey
	rsa *rsa.PrivateKey
}

var (
	keysOnce sync.Once
	keysVal  testKeys
)

func newTestKeys(t testing.TB) testKeys {
	t.Helper()
	keysOnce.Do(func() {
		_, ed, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			panic(err)
		}
		ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		rk, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		keysVal = testKeys{ed: ed, ec: ec, rsa: rk}
	})
	return keysVal
}

// jwkOf writes the public JWK of priv by hand (RFC 7518 §6, RFC 8037).
func jwkOf(t testing.TB, kid string, priv any, alg string) map[string]string {
	t.Helper()
	enc := b64.EncodeToString
	m := map[string]string{"kid": kid, "use": "sig"}
	if alg != "" {
		m["alg"] = alg
	}
	switch k := priv.(type) {
	case ed25519.PrivateKey:
		m["kty"], m["crv"], m["x"] = "OKP", "Ed25519", enc(k.Public().(ed25519.PublicKey))
	case *ecdsa.PrivateKey:
		pt, err := k.PublicKey.Bytes() // 0x04 ‖ x ‖ y
		if err != nil {
			t.Fatal(err)
		}
		m["kty"], m["crv"], m["x"], m["y"] = "EC", "P-256", enc(pt[1:33]), enc(pt[33:])
	case *rsa.PrivateKey:
		m["kty"], m["n"], m["e"] = "RSA", enc(k.N.Bytes()), enc(big.NewInt(int64(k.E)).Bytes())
	default:
		t.Fatalf("key %T", priv)
	}
	return m
}

func jwksDoc(t testing.TB, keys ...map[string]string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jwksServer serves a JWKS document that the test can replace, and counts
// the GETs it answers.
type jwksServer struct {
	*httptest.Server
	doc     atomic.Pointer[[]byte]
	status  atomic.Int32 // 0: 200
	fetches atomic.Int64
	gate    atomic.Pointer[chan struct{}] // when set, a GET waits for it to close
}

func newJWKSServer(t *testing.T, doc []byte) *jwksServer {
	s := &jwksServer{}
	s.set(doc)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		if g := s.gate.Load(); g != nil {
			<-*g
		}
		if st := s.status.Load(); st != 0 {
			w.WriteHeader(int(st))
			return
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(*s.doc.Load())
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) set(doc []byte) { s.doc.Store(&doc) }

// clock is a settable test clock.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock          { c := &clock{}; c.ns.Store(t.UnixNano()); return c }
func (c *clock) now() time.Time            { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration)   { c.ns.Add(int64(d)) }
func (c *clock) set(t time.Time)           { c.ns.Store(t.UnixNano()) }
func (c *clock) since(d time.Duration) int { return int(c.now().Add(d).Unix()) }

// jwtMint mints with golang-jwt: method, private key, kid and claims.
func jwtMint(t testing.TB, m jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func claimsAt(c *clock, extra map[string]any) jwt.MapClaims {
	m := jwt.MapClaims{"tenant": "acme", "iss": testIssuer, "aud": "threadcast", "exp": c.since(time.Hour), "scope": "read publish"}
	for k, v := range extra {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	return m
}

func newTestVerifier(t *testing.T, c *clock, src JWKSSource, edit func(*VerifierConfig)) *Verifier {
	t.Helper()
	cfg := DefaultVerifierConfig()
	cfg.SharedKeys = [][]byte{testKey}
	cfg.JWKS = []JWKSSource{src}
	cfg.Audience = "threadcast"
	cfg.Now = c.now
	if edit != nil {
		edit(&cfg)
	}
	v, err := NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestVerifierAlgorithms(t *testing.T) {
	k := newTestKeys(t)
	srv := newJWKSServer(t, jwksDoc(t, jwkOf(t, "ed", k.ed, "EdDSA"), jwkOf(t, "ec", k.ec, "ES256"), jwkOf(t, "rs", k.rsa, "RS256"),
		jwkOf(t, "ed-noalg", k.ed, ""), jwkOf(t, "ec-noalg", k.ec, ""), jwkOf(t, "rs-noalg", k.rsa, "")))
	c := newClock(t0)
	v := newTestVerifier(t, c, JWKSSource{Issuer: testIssuer, URL: srv.URL}, nil)
	if err := v.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		tok  string
	}{
		{"EdDSA", jwtMint(t, jwt.SigningMethodEdDSA, k.ed, "ed", claimsAt(c, nil))},
		{"ES256", jwtMint(t, jwt.SigningMethodES256, k.ec, "ec", claimsAt(c, nil))},
		{"RS256", jwtMint(t, jwt.SigningMethodRS256, k.rsa, "rs", claimsAt(c, nil))},
		{"EdDSA, key without alg", jwtMint(t, jwt.SigningMethodEdDSA, k.ed, "ed-noalg", claimsAt(c, nil))},
		{"ES256, key without alg", jwtMint(t, jwt.SigningMethodES256, k.ec, "ec-noalg", claimsAt(c, nil))},
		{"RS256, key without alg", jwtMint(t, jwt.SigningMethodRS256, k.rsa, "rs-noalg", claimsAt(c, nil))},
		{"HS256 shared key", jwtMint(t, jwt.SigningMethodHS256, testKey, "", claimsAt(c, nil))},
		{"HS256 shared key, other iss and a kid", jwtMint(t, jwt.SigningMethodHS256, testKey, "whatever", claimsAt(c, map[string]any{"iss": "self"}))},
		{"aud as an array", jwtMint(t, jwt.SigningMethodEdDSA, k.ed, "ed", claimsAt(c, map[string]any{"aud": []string{"other", "threadcast"}}))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := v.Verify(context.Background(), tt.tok)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if got.Tenant != "acme" || got.Expiry != int64(c.since(time.Hour)) || !got.Can(ScopePublish) || !got.Audience.Has("threadcast") {
				t.Fatalf("claims %+v", got)
			}
		})
	}
	if n := srv.fetches.Load(); n != 1 {
		t.Errorf("%d fetches, want the one of Refresh", n)
	}
}

func TestVerifierRefusals(t *testing.T) {
	k := newTestKeys(t)
	srv := newJWKSServer(t, jwksDoc(t, jwkOf(t, "ed", k.ed, "EdDSA"), jwkOf(t, "ec", k.ec, "ES256"), jwkOf(t, "rs", k.rsa, "RS256")))
	c := newClock(t0)
	v := newTestVerifier(t, c, JWKSSource{Issuer: testIssuer, URL: srv.URL}, func(cfg *VerifierConfig) { cfg.ClockSkew = 30 * time.Second })
	if err := v.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	ed := func(extra map[string]any) string {
		return jwtMint(t, jwt.SigningMethodEdDSA, k.ed, "ed", claimsAt(c, extra))
	}
	rsaPub, err := x509.MarshalPKIXPublicKey(&k.rsa.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	// A token signed by a key of another issuer with the same kid.
	_, otherEd, _ := ed25519.GenerateKey(rand.Reader)
	edTok := ed(nil)
	eh, erest, _ := strings.Cut(edTok, ".")
	ep, es, _ := strings.Cut(erest, ".")
	tests := []struct {
		name string
		tok  string
		want error
	}{
		{"wrong issuer", ed(map[string]any{"iss": "https://evil.example"}), ErrIssuer},
		{"no issuer", ed(map[string]any{"iss": nil}), ErrIssuer},
		{"wrong audience", ed(map[string]any{"aud": "someone-else"}), ErrAudience},
		{"no audience", ed(map[string]any{"aud": nil}), ErrAudience},
		{"nbf beyond the skew", ed(map[string]any{"nbf": c.since(31 * time.Second)}), ErrNotYetValid},
		{"expired beyond the skew", ed(map[string]any{"exp": c.since(-30 * time.Second)}), ErrExpired},
		{"no kid", jwtMint(t, jwt.SigningMethodEdDSA, k.ed, "", claimsAt(c, nil)), ErrUnknownKey},
		{"signed by another key", jwtMint(t, jwt.SigningMethodEdDSA, otherEd, "ed", claimsAt(c, nil)), ErrSignature},
		{"EdDSA signature bits flipped", eh + "." + ep + "." + flipLowBits(t, es), ErrMalformed},
		{"ES256 signature bits flipped", flipSig(t, jwtMint(t, jwt.SigningMethodES256, k.ec, "ec", claimsAt(c, nil))), ErrMalformed},
		{"RS256 signature bits flipped", flipSig(t, jwtMint(t, jwt.SigningMethodRS256, k.rsa, "rs", claimsAt(c, nil))), ErrMalformed},
		// Algorithm confusion: the verifier's public key used as an HMAC
		// secret; the header's alg must not choose how the key is used.
		{"HS256 with the RSA public key as secret", jwtMint(t, jwt.SigningMethodHS256, rsaPub, "rs", claimsAt(c, nil)), ErrSignature},
		{"HS256 with the Ed25519 public key as secret", jwtMint(t, jwt.SigningMethodHS256, []byte(k.ed.Public().(ed25519.PublicKey)), "ed", claimsAt(c, nil)), ErrSignature},
		{"ES256 header on the Ed25519 key", jwtMint(t, jwt.SigningMethodES256, k.ec, "ed", claimsAt(c, nil)), ErrAlgorithm},
		{"RS256 header on the P-256 key", jwtMint(t, jwt.SigningMethodRS256, k.rsa, "ec", claimsAt(c, nil)), ErrAlgorithm},
		{"EdDSA header on the RSA key", jwtMint(t, jwt.SigningMethodEdDSA, k.ed, "rs", claimsAt(c, nil)), ErrAlgorithm},
		{"PS256", jwtMint(t, jwt.SigningMethodPS256, k.rsa, "rs", claimsAt(c, nil)), ErrAlgorithm},
		{"ES384", jwtMint(t, jwt.SigningMethodES384, mustEC(t, elliptic.P384()), "ec", claimsAt(c, nil)), ErrAlgorithm},
		{"alg none", jwtMint(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "ed", claimsAt(c, nil)) + "AA", ErrAlgorithm},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := v.Verify(context.Background(), tt.tok)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %+v, %v; want %v", got, err, tt.want)
			}
			if got.Tenant != "" {
				t.Fatalf("claims leaked on error: %+v", got)
			}
		})
	}
	// Within the skew both ways, the same kinds of tokens pass.
	for name, tok := range map[string]string{
		"nbf within the skew":     ed(map[string]any{"nbf": c.since(30 * time.Second)}),
		"expired within the skew": ed(map[string]any{"exp": c.since(-29 * time.Second)}),
	} {
		if _, err := v.Verify(context.Background(), tok); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func mustEC(t *testing.T, c elliptic.Curve) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func flipSig(t *testing.T, tok string) string {
	i := strings.LastIndexByte(tok, '.')
	return tok[:i+1] + flipLowBits(t, tok[i+1:])
}

// Two keys live, then the old one retired from the document: once the
// document is refreshed, tokens of the old key are refused and the new
// key's still pass.
func TestVerifierRotation(t *testing.T) {
	k := newTestKeys(t)
	_, next, _ := ed25519.GenerateKey(rand.Reader)
	srv := newJWKSServer(t, jwksDoc(t, jwkOf(t, "2026-11", k.ed, "EdDSA")))
	c := newClock(t0)
	v := newTestVerifier(t, c, JWKSSource{Issuer: testIssuer, URL: srv.URL}, nil)
	old := func() string { return jwtMint(t, jwt.SigningMethodEdDSA, k.ed, "2026-11", claimsAt(c, nil)) }
	nw := func() string { return jwtMint(t, jwt.SigningMethodEdDSA, next, "2026-12", claimsAt(c, nil)) }
	mustVerify := func(what, tok string) {
		t.Helper()
		if _, err := v.Verify(context.Background(), tok); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	mustVerify("old key, first fetch", old())

	// The issuer publishes the next key, then starts signing with it: the
	// unknown kid triggers a refresh (past the throttle).
	srv.set(jwksDoc(t, jwkOf(t, "2026-11", k.ed, "EdDSA"), jwkOf(t, "2026-12", next, "EdDSA")))
	c.advance(DefaultVerifierConfig().MinRefreshInterval)
	mustVerify("new key", nw())
	mustVerify("old key, both live", old())

	// The old key is retired; a verification after RefreshInterval sees it.
	srv.set(jwksDoc(t, jwkOf(t, "2026-12", next, "EdDSA")))
	c.advance(DefaultVerifierConfig().RefreshInterval)
	if _, err := v.Verify(context.Background(), old()); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("retired key: %v, want ErrUnknownKey", err)
	}
	mustVerify("new key after the retirement", nw())
	if n := srv.fetches.Load(); n != 3 {
		t.Errorf("%d fetches, want 3 (first use, unknown kid, stale document)", n)
	}
}

// A flood of tokens with unknown kids costs at most one fetch per
// MinRefreshInterval, and concurrent verifications share one fetch.
func TestVerifierUnknownKidThrottle(t *testing.T) {
	k := newTestKeys(t)
	srv := newJWKSServer(t, jwksDoc(t, jwkOf(t, "ed", k.ed, "EdDSA")))
	c := newClock(t0)
	v := newTestVerifier(t, c, JWKSSource{Issuer: testIssuer, URL: srv.URL}, nil)
	if err := v.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	flood := func(n int) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				tok := jwtMint(t, jwt.SigningMethodEdDSA, k.ed, fmt.Sprintf("unknown-%d", i), claimsAt(c, nil))
				if _, err := v.Verify(context.Background(), tok); !errors.Is(err, ErrUnknownKey) {
					t.Errorf("unknown kid: %v", err)
				}
			})
		}
		wg.Wait()
	}
	flood(200) // within the throttle of Refresh's fetch
	if n := srv.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches after a flood within the interval, want 1", n)
	}
	for round := 2; round <= 4; round++ {
		c.advance(DefaultVerifierConfig().MinRefreshInterval)
		flood(200)
		if n := srv.fetches.Load(); n != int64(round) {
			t.Fatalf("round %d: %d fetches, want %d", round, n, round)
		}
	}
	if st := v.Stats(); st.Fetches != 4 || st.Throttled == 0 || st.Keys != 1 {
		t.Errorf("stats %+v", st)
	}

	// Single flight: while one fetch hangs, the others wait for it.
	gate := make(chan struct{})
	srv.gate.Store(&gate)
	c.advance(DefaultVerifierConfig().MinRefreshInterval)
	done := make(chan struct{})
	go func() { defer close(done); flood(50) }()
	testsupport.WaitFor(t, 10*time.Second, "5 fetches", func() bool { return srv.fetches.Load() == 5 })
	// A waiter whose context ends stops waiting.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tok := jwtMint(t, jwt.SigningMethodEdDSA, k.ed, "another-unknown", claimsAt(c, nil))
	if _, err := v.Verify(ctx, tok); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("cancelled waiter: %v", err)
	}
	close(gate)
	<-done
	if n := srv.fetches.Load(); n != 5 {
		t.Fatalf("%d fetches for 50 concurrent unknown kids, want 1 more", n)
	}
}

// Fetch failures: the keys held stay in use; without any, tokens are
// ErrKeySource.
func TestVerifierFetchFailures(t *testing.T) {
	k := newTestKeys(t)
	good := jwksDoc(t, jwkOf(t, "ed", k.ed, "EdDSA"))
	c := newClock(t0)
	tok := func() string { return jwtMint(t, jwt.SigningMethodEdDSA, k.ed, "ed", claimsAt(c, nil)) }
	tests := []struct {
		name   string
		status int    // answer status (0: 200)
		doc    string // answer body ("": the good document)
	}{
		{name: "server error", status: http.StatusInternalServerError},
		{name: "not found", status: http.StatusNotFound},
		{name: "not JSON", doc: "<html>"},
		{name: "no keys", doc: `{"keys":[]}`},
		{name: "only unusable keys", doc: `{"keys":[{"kty":"oct","kid":"s","k":"c2VjcmV0"},{"kty":"EC","crv":"P-384","kid":"p"},{"kty":"OKP","crv":"Ed25519","kid":"enc","use":"enc","x":"` + b64.EncodeToString(k.ed.Public().(ed25519.PublicKey)) + `"}]}`},
		{name: "repeated kid", doc: string(jwksDoc(t, jwkOf(t, "ed", k.ed, "EdDSA"), jwkOf(t, "ed", k.ec, "ES256")))},
		{name: "private key", doc: `{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"ed","x":"` + b64.EncodeToString(k.ed.Public().(ed25519.PublicKey)) + `","d":"` + b64.EncodeToString(k.ed.Seed()) + `"}]}`},
		{name: "too large", doc: `{"keys":[],"pad":"` + strings.Repeat("x", 2048) + `"}`},
		{name: "short RSA key", doc: string(jwksDoc(t, jwkOf(t, "rs", mustRSA(t, 1024), "RS256")))},
		{name: "point not on the curve", doc: `{"keys":[{"kty":"EC","crv":"P-256","kid":"ec","x":"` + b64.EncodeToString(make([]byte, 32)) + `","y":"` + b64.EncodeToString(make([]byte, 32)) + `"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.set(t0)
			srv := newJWKSServer(t, good)
			v := newTestVerifier(t, c, JWKSSource{Issuer: testIssuer, URL: srv.URL}, func(cfg *VerifierConfig) { cfg.MaxJWKSBytes = 1024 })
			bad := func() {
				srv.status.Store(int32(tt.status))
				if tt.doc != "" {
					srv.set([]byte(tt.doc))
				}
			}
			// Without keys held, the failure is the caller's error.
			bad()
			if err := v.Refresh(context.Background()); !errors.Is(err, ErrKeySource) {
				t.Fatalf("Refresh: %v, want ErrKeySource", err)
			}
			c.advance(time.Minute)
			if _, err := v.Verify(context.Background(), tok()); !errors.Is(err, ErrKeySource) {
				t.Fatalf("no keys held: %v, want ErrKeySource", err)
			}
			// With keys held, a failed refresh keeps them.
			srv.status.Store(0)
			srv.set(good)
			if err := v.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			bad()
			c.advance(time.Hour) // the document is stale: every use refreshes (throttled)
			for range 3 {
				if _, err := v.Verify(context.Background(), tok()); err != nil {
					t.Fatalf("keys held after a failed refresh: %v", err)
				}
			}
			// Refresh, the verification without keys, Refresh, the first
			// stale verification; the next two are throttled.
			if st := v.Stats(); st.FetchErrors != 3 || st.Fetches != 4 || st.Throttled != 2 {
				t.Errorf("stats %+v, want 4 fetches of which 3 failed, 2 throttled", st)
			}
		})
	}
}

// A JWKS URL that redirects to plain HTTP elsewhere is not followed; one
// that redirects within the rules is.
func TestVerifierJWKSRedirect(t *testing.T) {
	k := newTestKeys(t)
	srv := newJWKSServer(t, jwksDoc(t, jwkOf(t, "ed", k.ed, "EdDSA")))
	redirect := func(to string) string {
		r := httptest.NewServer(http.RedirectHandler(to, http.StatusFound))
		t.Cleanup(r.Close)
		return r.URL
	}
	c := newClock(t0)
	good := newTestVerifier(t, c, JWKSSource{Issuer: testIssuer, URL: redirect(srv.URL)}, nil)
	if err := good.Refresh(context.Background()); err != nil {
		t.Fatalf("redirect to loopback http: %v", err)
	}
	bad := newTestVerifier(t, c, JWKSSource{Issuer: testIssuer, URL: redirect("http://192.0.2.1/jwks.json")}, nil)
	if err := bad.Refresh(context.Background()); !errors.Is(err, ErrKeySource) || !strings.Contains(err.Error(), "want https") {
		t.Fatalf("redirect to remote plain http: %v", err)
	}
	loop := httptest.NewServer(nil)
	loop.Config.Handler = http.RedirectHandler(loop.URL, http.StatusFound)
	t.Cleanup(loop.Close)
	if err := newTestVerifier(t, c, JWKSSource{Issuer: testIssuer, URL: loop.URL}, nil).Refresh(context.Background()); err == nil || !strings.Contains(err.Error(), "redirects") {
		t.Fatalf("redirect loop: %v", err)
	}
}

// A server that is down, or answers after FetchTimeout, is a fetch error.
func TestVerifierFetchUnreachable(t *testing.T) {
	c := newClock(t0)
	down := httptest.NewServer(nil)
	down.Close()
	v := newTestVerifier(t, c, JWKSSource{Issuer: testIssuer, URL: down.URL}, nil)
	if err := v.Refresh(context.Background()); !errors.Is(err, ErrKeySource) {
		t.Errorf("server down: %v", err)
	}
	k := newTestKeys(t)
	slow := newJWKSServer(t, jwksDoc(t, jwkOf(t, "ed", k.ed, "EdDSA")))
	gate := make(chan struct{})
	slow.gate.Store(&gate)
	defer close(gate)
	v = newTestVerifier(t, c, JWKSSource{Issuer: testIssuer, URL: slow.URL}, func(cfg *VerifierConfig) { cfg.FetchTimeout = 100 * time.Millisecond })
	start := time.Now()
	if err := v.Refresh(context.Background()); !errors.Is(err, ErrKeySource) {
		t.Errorf("slow server: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the fetch took %v despite its 100ms bound", d)
	}
}

func mustRSA(t *testing.T, bits int) *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// The air-gapped source: a file, re-read like a URL.
func TestVerifierJWKSFile(t *testing.T) {
	k := newTestKeys(t)
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, jwksDoc(t, jwkOf(t, "ec", k.ec, "ES256")), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newClock(t0)
	v := newTestVerifier(t, c, JWKSSource{Issuer: testIssuer, File: path}, nil)
	if err := v.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), jwtMint(t, jwt.SigningMethodES256, k.ec, "ec", claimsAt(c, nil))); err != nil {
		t.Fatal(err)
	}
	// Rotated on disk: the new kid is found by the refresh it triggers.
	if err := os.WriteFile(path, jwksDoc(t, jwkOf(t, "rs", k.rsa, "RS256")), 0o600); err != nil {
		t.Fatal(err)
	}
	c.advance(time.Minute)
	if _, err := v.Verify(context.Background(), jwtMint(t, jwt.SigningMethodRS256, k.rsa, "rs", claimsAt(c, nil))); err != nil {
		t.Fatal(err)
	}
	missing := newTestVerifier(t, c, JWKSSource{Issuer: testIssuer, File: path + ".missing"}, nil)
	if err := missing.Refresh(context.Background()); !errors.Is(err, ErrKeySource) {
		t.Errorf("missing file: %v", err)
	}
}

func TestNewVerifierErrors(t *testing.T) {
	tests := []struct {
		name string
		give VerifierConfig
		want string
	}{
		{"nothing to verify with", VerifierConfig{}, "needs a shared key or a JWKS source"},
		{"short shared key", VerifierConfig{SharedKeys: [][]byte{[]byte("short")}}, ErrShortKey.Error()},
		{"source without issuer", VerifierConfig{JWKS: []JWKSSource{{URL: "https://x.example/jwks"}}}, "needs an issuer"},
		{"source with URL and file", VerifierConfig{JWKS: []JWKSSource{{Issuer: "i", URL: "https://x.example/jwks", File: "f"}}}, "exactly one"},
		{"source with neither", VerifierConfig{JWKS: []JWKSSource{{Issuer: "i"}}}, "exactly one"},
		{"plain http to a remote host", VerifierConfig{JWKS: []JWKSSource{{Issuer: "i", URL: "http://idp.example/jwks"}}}, "want https"},
		{"relative URL", VerifierConfig{JWKS: []JWKSSource{{Issuer: "i", URL: "/jwks"}}}, "not an absolute URL"},
		{"issuer twice", VerifierConfig{JWKS: []JWKSSource{{Issuer: "i", URL: "https://a.example/"}, {Issuer: "i", File: "f"}}}, "two JWKS sources"},
		{"negative skew", VerifierConfig{SharedKeys: [][]byte{testKey}, ClockSkew: -time.Second}, "negative clock skew"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewVerifier(tt.give); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewVerifier = %v, want %q", err, tt.want)
			}
		})
	}
	for _, ok := range []string{"http://127.0.0.1:8080/jwks", "http://localhost/jwks", "http://[::1]/jwks", "https://idp.example/.well-known/jwks.json"} {
		if _, err := NewVerifier(VerifierConfig{JWKS: []JWKSSource{{Issuer: "i", URL: ok}}}); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// What Ed25519Signer mints, golang-jwt verifies with the key its JWKS
// publishes, and so does Verifier.
func TestEd25519Signer(t *testing.T) {
	k := newTestKeys(t)
	s := Ed25519Signer{Key: k.ed, Kid: "k1"}
	c := newClock(t0)
	tok, err := s.Mint(Claims{Tenant: "acme", Issuer: testIssuer, Audience: Audience{"threadcast"}, Scope: "read", Expiry: int64(c.since(time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := s.JWKS()
	if err != nil {
		t.Fatal(err)
	}
	var parsed struct {
		Keys []struct{ Kty, Crv, Kid, Alg, Use, X string }
	}
	if err := json.Unmarshal(doc, &parsed); err != nil || len(parsed.Keys) != 1 {
		t.Fatalf("JWKS %s: %v", doc, err)
	}
	jk := parsed.Keys[0]
	x, _ := b64.DecodeString(jk.X)
	if jk.Kty != "OKP" || jk.Crv != "Ed25519" || jk.Kid != "k1" || jk.Alg != "EdDSA" || jk.Use != "sig" || string(x) != string(k.ed.Public().(ed25519.PublicKey)) {
		t.Fatalf("JWKS key %+v", jk)
	}
	got, err := jwt.Parse(tok, func(tk *jwt.Token) (any, error) {
		if tk.Header["kid"] != "k1" {
			return nil, fmt.Errorf("kid %v", tk.Header["kid"])
		}
		return ed25519.PublicKey(x), nil
	}, jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithTimeFunc(c.now), jwt.WithIssuer(testIssuer), jwt.WithAudience("threadcast"))
	if err != nil || got.Claims.(jwt.MapClaims)["tenant"] != "acme" {
		t.Fatalf("golang-jwt: %v", err)
	}
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	v := newTestVerifier(t, c, JWKSSource{Issuer: testIssuer, File: path}, nil)
	if cl, err := v.Verify(context.Background(), tok); err != nil || cl.Tenant != "acme" || cl.Scope != "read" {
		t.Fatalf("Verifier: %+v %v", cl, err)
	}
	if _, err := (Ed25519Signer{Key: k.ed}).Mint(Claims{Tenant: "a", Expiry: 1}); !errors.Is(err, ErrClaims) {
		t.Errorf("no kid: %v", err)
	}
}

func TestParseEd25519Key(t *testing.T) {
	k := newTestKeys(t)
	pemKey, err := MarshalEd25519Key(k.ed)
	if err != nil {
		t.Fatal(err)
	}
	seed := k.ed.Seed()
	ecDER, _ := x509.MarshalPKCS8PrivateKey(k.ec)
	for name, give := range map[string][]byte{
		"PEM":            pemKey,
		"raw seed":       seed,
		"hex seed":       []byte(fmt.Sprintf("%x\n", seed)),
		"base64 seed":    []byte(b64.EncodeToString(seed) + "\n"),
		"std b64 padded": []byte(strings.TrimSpace(string(mustStdB64(seed)))),
	} {
		got, err := ParseEd25519Key(give)
		if err != nil || !got.Equal(k.ed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, give := range map[string][]byte{
		"EC PEM":     pemBlock("PRIVATE KEY", ecDER),
		"garbage":    []byte("not a key"),
		"short seed": seed[:31],
		"bad PEM":    pemBlock("PRIVATE KEY", []byte("xx")),
	} {
		if _, err := ParseEd25519Key(give); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func mustStdB64(b []byte) []byte { return []byte(base64.StdEncoding.EncodeToString(b)) }

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// What Verify answers when a source has no keys goes to whoever sent the
// token (the bridge writes it in its 401 body): it names the issuer the
// token itself claims, never where the keys live or why they could not be
// had (an internal address, a query secret, a file path, a dial error).
// The operator finds that in the log.
func TestVerifierKeySourceErrorNamesNoSource(t *testing.T) {
	k := newTestKeys(t)
	c := newClock(t0)
	down := httptest.NewServer(nil)
	down.Close()
	missing := filepath.Join(t.TempDir(), "private-dir", "jwks.json")
	for _, src := range []JWKSSource{
		{Issuer: testIssuer, URL: down.URL + "/internal/jwks.json?secret=s3cr3t"},
		{Issuer: testIssuer, File: missing},
	} {
		var log strings.Builder
		v := newTestVerifier(t, c, src, func(cfg *VerifierConfig) {
			cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
		})
		_, err := v.Verify(context.Background(), jwtMint(t, jwt.SigningMethodEdDSA, k.ed, "ed", claimsAt(c, nil)))
		if !errors.Is(err, ErrKeySource) {
			t.Fatalf("%+v: %v, want ErrKeySource", src, err)
		}
		msg := err.Error()
		for _, secret := range []string{down.Listener.Addr().String(), "internal", "s3cr3t", "private-dir", "refused", "no such file"} {
			if strings.Contains(msg, secret) {
				t.Errorf("%+v: the caller's error %q tells %q", src, msg, secret)
			}
		}
		if !strings.Contains(msg, testIssuer) {
			t.Errorf("%+v: the error %q does not name the token's issuer", src, msg)
		}
		if l := log.String(); !strings.Contains(l, "JWKS fetch failed") || !strings.Contains(l, map[bool]string{true: "s3cr3t", false: "private-dir"}[src.URL != ""]) {
			t.Errorf("%+v: the log does not tell the operator the cause: %s", src, l)
		}
	}
}

// An exp far in the future is a token that does not expire soon, up to the
// largest int64: Verify takes it, and its Deadline, which times the end of
// its streams, is as far (an overflow put it in the past, so that every
// stream of a token Verify took ended at once, and its client reconnected
// in a loop). exp and nbf far in the past are refused, not wrapped round.
func TestVerifierFarExpiry(t *testing.T) {
	v, err := NewVerifier(VerifierConfig{SharedKeys: [][]byte{testKey}, ClockSkew: 30 * time.Second, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	for _, exp := range []int64{math.MaxInt64, math.MaxInt64 - 10, math.MaxInt64 - 100, 1 << 62, 253402300799} {
		tok, err := Mint(testKey, Claims{Tenant: "acme", Expiry: exp})
		if err != nil {
			t.Fatal(err)
		}
		c, err := v.Verify(context.Background(), tok)
		if err != nil {
			t.Errorf("exp %d: %v", exp, err)
			continue
		}
		if d := v.Deadline(c); d.Before(t0.AddDate(7000, 0, 0)) {
			t.Errorf("exp %d: deadline %v, want beyond year 9000", exp, d)
		}
	}
	for _, c := range []Claims{
		{Tenant: "acme", Expiry: math.MinInt64},
		{Tenant: "acme", Expiry: -1},
		{Tenant: "acme", Expiry: t0.Add(-31 * time.Second).Unix()},
	} {
		tok, _ := Mint(testKey, c)
		if _, err := v.Verify(context.Background(), tok); !errors.Is(err, ErrExpired) {
			t.Errorf("exp %d: %v, want ErrExpired", c.Expiry, err)
		}
	}
	tok, _ := Mint(testKey, Claims{Tenant: "acme", Expiry: math.MaxInt64, NotBefore: math.MaxInt64})
	if _, err := v.Verify(context.Background(), tok); !errors.Is(err, ErrNotYetValid) {
		t.Errorf("nbf max: %v, want ErrNotYetValid", err)
	}
}

// A stale document is refreshed by the verification that finds it so, and
// only that one waits for the fetch: the others answer with the key held
// meanwhile. Were they to wait too, a JWKS endpoint that hangs would stall
// every verification of every tenant for FetchTimeout once per
// MinRefreshInterval, though the keys to answer are at hand.
func TestVerifierStaleKeyDoesNotWait(t *testing.T) {
	k := newTestKeys(t)
	srv := newJWKSServer(t, jwksDoc(t, jwkOf(t, "ed", k.ed, "EdDSA")))
	c := newClock(t0)
	v := newTestVerifier(t, c, JWKSSource{Issuer: testIssuer, URL: srv.URL}, func(cfg *VerifierConfig) { cfg.FetchTimeout = time.Minute })
	if err := v.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	tok := jwtMint(t, jwt.SigningMethodEdDSA, k.ed, "ed", claimsAt(c, map[string]any{"exp": c.since(2 * time.Hour)}))
	c.advance(DefaultVerifierConfig().RefreshInterval)
	gate := make(chan struct{})
	srv.gate.Store(&gate)
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	defer open()
	first := make(chan error, 1)
	go func() { _, err := v.Verify(context.Background(), tok); first <- err }()
	testsupport.WaitFor(t, 10*time.Second, "2 fetches", func() bool { return srv.fetches.Load() == 2 })
	other := make(chan error, 1)
	go func() { _, err := v.Verify(context.Background(), tok); other <- err }()
	select {
	case err := <-other:
		if err != nil {
			t.Errorf("verification during the refresh: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("a verification with the key held waited for another's fetch")
		open()
		<-other
	}
	open()
	if err := <-first; err != nil {
		t.Errorf("the verification that refreshed: %v", err)
	}
	if n := srv.fetches.Load(); n != 2 {
		t.Errorf("%d fetches, want Refresh's and one refresh", n)
	}
}
