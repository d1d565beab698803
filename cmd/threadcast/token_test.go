package main

import (
	"bytes"
	"errors"
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
			wantClaims: auth.Claims{Tenant: "acme", Scope: "read", Expiry: now.Add(24 * time.Hour).Unix()}},
		{name: "thread patterns and ttl", give: []string{"--key", key, "--tenant", "acme", "--threads", "support-*", "--threads", "t?", "--ttl", "90m"}, wantKey: []byte(key),
			wantClaims: auth.Claims{Tenant: "acme", Threads: []string{"support-*", "t?"}, Scope: "read", Expiry: now.Add(90 * time.Minute).Unix()}},
		{name: "key from the environment", give: []string{"--tenant", "globex"}, env: map[string]string{"THREADCAST_AUTH_KEY": key}, wantKey: []byte(key),
			wantClaims: auth.Claims{Tenant: "globex", Scope: "read", Expiry: now.Add(24 * time.Hour).Unix()}},
		{name: "key from a data directory", give: []string{"--data", dataDir, "--tenant", "acme", "--ttl", "1h"}, wantKey: dataKey,
			wantClaims: auth.Claims{Tenant: "acme", Scope: "read", Expiry: now.Add(time.Hour).Unix()}},
		{name: "publish and read", give: []string{"--key", key, "--tenant", "acme", "--scope", "read,publish"}, wantKey: []byte(key),
			wantClaims: auth.Claims{Tenant: "acme", Scope: "read publish", Expiry: now.Add(24 * time.Hour).Unix()}},
		{name: "publish only, repeated, spaces", give: []string{"--key", key, "--tenant", "acme", "--scope", "publish publish"}, wantKey: []byte(key),
			wantClaims: auth.Claims{Tenant: "acme", Scope: "publish", Expiry: now.Add(24 * time.Hour).Unix()}},
		{name: "unknown scope", give: []string{"--key", key, "--tenant", "acme", "--scope", "read,admin"}, wantCode: exitUsage, wantStderr: `--scope: unknown scope "admin"`},
		{name: "empty scope", give: []string{"--key", key, "--tenant", "acme", "--scope", ","}, wantCode: exitUsage, wantStderr: "--scope: empty"},
		{name: "help", give: []string{"--help"}, wantCode: exitOK, wantStderr: "usage: threadcast token"},
		{name: "flag over environment", give: []string{"--key", key, "--tenant", "acme"}, env: map[string]string{"THREADCAST_AUTH_KEY": "another-key-0123456789"}, wantKey: []byte(key),
			wantClaims: auth.Claims{Tenant: "acme", Scope: "read", Expiry: now.Add(24 * time.Hour).Unix()}},
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
