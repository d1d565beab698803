package bridge

import (
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/threadcast/threadcast/auth"
)

func TestTokenVerifier(t *testing.T) {
	key := []byte("bridge-key-0123456789")
	now := time.Unix(1_800_000_000, 0)
	mintScope := func(k []byte, tenant string, exp time.Time, scope string) string {
		tok, err := auth.Mint(k, auth.Claims{Tenant: tenant, Threads: []string{"only-*"}, Expiry: exp.Unix(), Scope: scope})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	mint := func(k []byte, tenant string, exp time.Time) string {
		return mintScope(k, tenant, exp, "read publish")
	}
	tests := []struct {
		name   string
		header string // Authorization
		query  string // access_token
		thread string // the routed thread: "" only-th, "-" none
		want   error  // nil: admitted
	}{
		{name: "own tenant", header: "Bearer " + mint(key, "acme", now.Add(time.Hour))},
		{name: "query token", query: mint(key, "acme", now.Add(time.Hour))},
		{name: "thread not covered", thread: "other", header: "Bearer " + mint(key, "acme", now.Add(time.Hour)), want: ErrForbidden},
		{name: "no thread routed", thread: "-", header: "Bearer " + mint(key, "acme", now.Add(time.Hour)), want: ErrForbidden},
		{name: "no token", want: ErrNoToken},
		{name: "publish only", header: "Bearer " + mintScope(key, "acme", now.Add(time.Hour), "publish")},
		{name: "no scope is read only", header: "Bearer " + mintScope(key, "acme", now.Add(time.Hour), ""), want: ErrForbidden},
		{name: "read scope", header: "Bearer " + mintScope(key, "acme", now.Add(time.Hour), "read"), want: ErrForbidden},
		{name: "other tenant", header: "Bearer " + mint(key, "globex", now.Add(time.Hour)), want: ErrForbidden},
		{name: "expired", header: "Bearer " + mint(key, "acme", now), want: auth.ErrExpired},
		{name: "other key", header: "Bearer " + mint([]byte("another-key-0123456789"), "acme", now.Add(time.Hour)), want: auth.ErrSignature},
	}
	if err := TokenVerifier([]byte("short"), nil)(httptest.NewRequest("POST", "/", nil), "acme"); !errors.Is(err, auth.ErrShortKey) {
		t.Errorf("short key: %v", err)
	}
	verify := TokenVerifier(key, func() time.Time { return now })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/v1/ingest/acme/th?access_token="+tt.query, nil)
			switch tt.thread {
			case "":
				r.SetPathValue("thread", "only-th")
			case "-":
			default:
				r.SetPathValue("thread", tt.thread)
			}
			if tt.header != "" {
				r.Header.Set("Authorization", tt.header)
			}
			err := verify(r, "acme")
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("verify = %v, want %v", err, tt.want)
			}
		})
	}
}
