package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/node"
)

func TestTokenCommand(t *testing.T) {
	key := "token-test-key-0123456789"
	now := time.Unix(1_800_000_000, 0)
	dataDir := t.TempDir()
	dataKey, _, err := node.LoadOrCreateKey(filepath.Join(dataDir, node.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		give       []string
		env        map[string]string
		wantCode   int
		wantKey    []byte      // the key the printed token verifies with
		wantClaims auth.Claims // what it says
		wantStderr string
	}{
		{name: "tenant, default ttl", give: []string{"--key", key, "--tenant", "acme"}, wantKey: []byte(key),
			wantClaims: auth.Claims{Tenant: "acme", Scope: "read", IssuedAt: now.Unix(), Expiry: now.Add(24 * time.Hour).Unix()}},
		{name: "thread patterns and ttl", give: []string{"--key", key, "--tenant", "acme", "--threads", "support-*", "--threads", "t?", "--ttl", "90m"}, wantKey: []byte(key),
			wantClaims: auth.Claims{Tenant: "acme", Threads: []string{"support-*", "t?"}, Scope: "read", IssuedAt: now.Unix(), Expiry: now.Add(90 * time.Minute).Unix()}},
		{name: "key from the environment", give: []string{"--tenant", "globex"}, env: map[string]string{"THREADCAST_AUTH_KEY": key}, wantKey: []byte(key),
			wantClaims: auth.Claims{Tenant: "globex", Scope: "read", IssuedAt: now.Unix(), Expiry: now.Add(24 * time.Hour).Unix()}},
		{name: "key from a data directory", give: []string{"--data", dataDir, "--tenant", "acme", "--ttl", "1h"}, wantKey: dataKey,
			wantClaims: auth.Claims{Tenant: "acme", Scope: "read", IssuedAt: now.Unix(), Expiry: now.Add(time.Hour).Unix()}},
		{name: "publish and read", give: []string{"--key", key, "--tenant", "acme", "--scope", "read,publish"}, wantKey: []byte(key),
			wantClaims: auth.Claims{Tenant: "acme", Scope: "read publish", IssuedAt: now.Unix(), Expiry: now.Add(24 * time.Hour).Unix()}},
		{name: "publish only, repeated, spaces", give: []string{"--key", key, "--tenant", "acme", "--scope", "publish publish"}, wantKey: []byte(key),
			wantClaims: auth.Claims{Tenant: "acme", Scope: "publish", IssuedAt: now.Unix(), Expiry: now.Add(24 * time.Hour).Unix()}},
		{name: "unknown scope", give: []string{"--key", key, "--tenant", "acme", "--scope", "read,admin"}, wantCode: exitUsage, wantStderr: `--scope: unknown scope "admin"`},
		{name: "empty scope", give: []string{"--key", key, "--tenant", "acme", "--scope", ","}, wantCode: exitUsage, wantStderr: "--scope: empty"},
		{name: "help", give: []string{"--help"}, wantCode: exitOK, wantStderr: "usage: threadcast token"},
		{name: "flag over environment", give: []string{"--key", key, "--tenant", "acme"}, env: map[string]string{"THREADCAST_AUTH_KEY": "another-key-0123456789"}, wantKey: []byte(key),
			wantClaims: auth.Claims{Tenant: "acme", Scope: "read", IssuedAt: now.Unix(), Expiry: now.Add(24 * time.Hour).Unix()}},
		{name: "no key", give: []string{"--tenant", "acme"}, wantCode: exitUsage, wantStderr: "--key"},
		{name: "short key", give: []string{"--key", "short", "--tenant", "acme"}, wantCode: exitUsage, wantStderr: auth.ErrShortKey.Error()},
		{name: "no tenant", give: []string{"--key", key}, wantCode: exitUsage, wantStderr: "--tenant is required"},
		{name: "bad tenant", give: []string{"--key", key, "--tenant", "Acme Corp"}, wantCode: exitUsage, wantStderr: "--tenant"},
		{name: "bad ttl", give: []string{"--key", key, "--tenant", "acme", "--ttl", "-1h"}, wantCode: exitUsage, wantStderr: "--ttl must be positive"},
		{name: "data directory without a key", give: []string{"--data", t.TempDir(), "--tenant", "acme"}, wantCode: exitUsage, wantStderr: "--data"},
		{name: "unknown flag", give: []string{"--tenat", "acme"}, wantCode: exitUsage, wantStderr: "flag provided but not defined"},
		{name: "extra arguments", give: []string{"--key", key, "--tenant", "acme", "more"}, wantCode: exitUsage, wantStderr: "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := tokenMain(tt.give, func(k string) string { return tt.env[k] }, now, &out, &errb)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr %s", code, tt.wantCode, errb.String())
			}
			if !strings.Contains(errb.String(), tt.wantStderr) {
				t.Errorf("stderr %q does not say %q", errb.String(), tt.wantStderr)
			}
			if tt.wantKey == nil {
				if code != exitOK && out.Len() != 0 {
					t.Errorf("stdout %q on failure", out.String())
				}
				return
			}
			tok := strings.TrimSuffix(out.String(), "\n")
			c, err := auth.Verify(tt.wantKey, tok, now)
			if err != nil {
				t.Fatalf("verify %q: %v", tok, err)
			}
			if !reflect.DeepEqual(c, tt.wantClaims) {
				t.Errorf("claims %+v, want %+v", c, tt.wantClaims)
			}
			// Expired at its expiry, as auth defines it.
			if _, err := auth.Verify(tt.wantKey, tok, time.Unix(tt.wantClaims.Expiry, 0)); !errors.Is(err, auth.ErrExpired) {
				t.Errorf("at expiry: %v", err)
			}
		})
	}
}

// The binary's token subcommand, with the real clock.
func TestTokenBinary(t *testing.T) {
	key := "token-test-key-0123456789"
	r := runCLI(t, nil, "token", "--key", key, "--tenant", "initech", "--ttl", "10m")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	c, err := auth.Verify([]byte(key), strings.TrimSpace(r.stdout), time.Now())
	if err != nil || c.Tenant != "initech" || c.Expiry > time.Now().Add(10*time.Minute).Unix()+1 {
		t.Fatalf("claims %+v, %v", c, err)
	}
	if r := runCLI(t, nil, "token", "-h"); r.code != exitOK || !strings.Contains(r.stderr, "--threads PATTERN") {
		t.Errorf("help: exit %d %q", r.code, r.stderr)
	}
}

// keygen, an EdDSA token, and the JWKS that verifies it: the three steps of
// docs/production.md, each through the command.
func TestTokenEd25519(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "issuer.pem")
	now := time.Unix(1_800_000_000, 0)
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := tokenMain(args, func(string) string { return "env-key-is-ignored-0123456789" }, now, &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, _, stderr := run("keygen", keyFile); code != exitOK {
		t.Fatalf("keygen: %d %s", code, stderr)
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file %v %v", fi, err)
	}
	if code, _, stderr := run("keygen", keyFile); code != exitUsage || !strings.Contains(stderr, "exists") {
		t.Errorf("keygen over an existing file: %d %s", code, stderr)
	}
	code, doc, stderr := run("jwks", "--ed25519-key", keyFile, "--kid", "2026-12")
	if code != exitOK {
		t.Fatalf("jwks: %d %s", code, stderr)
	}
	jwksFile := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(jwksFile, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	code, tok, stderr := run("--ed25519-key", keyFile, "--kid", "2026-12", "--tenant", "acme", "--issuer", "https://idp.example",
		"--audience", "threadcast", "--scope", "publish", "--ttl", "1h")
	if code != exitOK {
		t.Fatalf("mint: %d %s", code, stderr)
	}
	v, err := auth.NewVerifier(auth.VerifierConfig{JWKS: []auth.JWKSSource{{Issuer: "https://idp.example", File: jwksFile}},
		Audience: "threadcast", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.Verify(context.Background(), strings.TrimSpace(tok))
	want := auth.Claims{Tenant: "acme", Scope: "publish", Issuer: "https://idp.example", Audience: auth.Audience{"threadcast"}, IssuedAt: now.Unix(), Expiry: now.Add(time.Hour).Unix()}
	if err != nil || !reflect.DeepEqual(c, want) {
		t.Fatalf("verified %+v %v, want %+v", c, err, want)
	}
	// Another kid is not that key.
	_, other, _ := run("--ed25519-key", keyFile, "--kid", "2026-11", "--tenant", "acme", "--issuer", "https://idp.example", "--audience", "threadcast")
	if _, err := v.Verify(context.Background(), strings.TrimSpace(other)); !errors.Is(err, auth.ErrUnknownKey) {
		t.Errorf("token of an unpublished kid: %v", err)
	}
	// A raw hex seed works as the key file too, and gives the same key.
	priv, err := auth.ParseEd25519Key(mustRead(t, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	seedFile := filepath.Join(dir, "seed.hex")
	if err := os.WriteFile(seedFile, []byte(hex.EncodeToString(priv.Seed())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, doc2, _ := run("jwks", "--ed25519-key", seedFile, "--kid", "2026-12"); code != exitOK || doc2 != doc {
		t.Errorf("JWKS from the seed differs: %s vs %s", doc2, doc)
	}

	for _, tt := range []struct {
		name, wantStderr string
		give             []string
	}{
		{"no kid", "--kid is required with --ed25519-key", []string{"--ed25519-key", keyFile, "--tenant", "acme"}},
		{"kid without Ed25519", "--kid needs --ed25519-key", []string{"--key", "0123456789abcdef", "--kid", "k", "--tenant", "acme"}},
		{"two keys", "give one", []string{"--key", "0123456789abcdef", "--ed25519-key", keyFile, "--kid", "k", "--tenant", "acme"}},
		{"missing key file", "--ed25519-key", []string{"--ed25519-key", filepath.Join(dir, "none"), "--kid", "k", "--tenant", "acme"}},
		{"not a key", "not an Ed25519 key", []string{"--ed25519-key", jwksFile, "--kid", "k", "--tenant", "acme"}},
		{"jwks without kid", "--kid is required", []string{"jwks", "--ed25519-key", keyFile}},
		{"jwks without key", "--ed25519-key is required", []string{"jwks", "--kid", "k"}},
		{"keygen without file", "want one FILE", []string{"keygen"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, stderr := run(tt.give...)
			if code != exitUsage || out != "" || !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("exit %d, stdout %q, stderr %q (want %q)", code, out, stderr, tt.wantStderr)
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
