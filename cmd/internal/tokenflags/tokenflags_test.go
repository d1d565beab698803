package tokenflags

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/threadcast/threadcast/auth"
)

func TestApply(t *testing.T) {
	tests := []struct {
		name    string
		give    []string
		want    auth.VerifierConfig // the fields Apply sets
		wantErr string
	}{
		{name: "defaults", want: auth.DefaultVerifierConfig()},
		{name: "URL", give: []string{"--jwks-url", "https://i.example/jwks", "--issuer", "https://i.example", "--audience", "tc"},
			want: func() auth.VerifierConfig {
				c := auth.DefaultVerifierConfig()
				c.JWKS, c.Audience = []auth.JWKSSource{{Issuer: "https://i.example", URL: "https://i.example/jwks"}}, "tc"
				return c
			}()},
		{name: "file and timings", give: []string{"--jwks-file", "/k.json", "--issuer", "i", "--token-clock-skew", "0s", "--jwks-min-interval", "1s", "--jwks-refresh", "1m"},
			want: func() auth.VerifierConfig {
				c := auth.DefaultVerifierConfig()
				c.JWKS, c.ClockSkew, c.MinRefreshInterval, c.RefreshInterval = []auth.JWKSSource{{Issuer: "i", File: "/k.json"}}, 0, time.Second, time.Minute
				return c
			}()},
		{name: "both sources", give: []string{"--jwks-file", "/k.json", "--jwks-url", "https://x/", "--issuer", "i"}, wantErr: "give one"},
		{name: "no issuer", give: []string{"--jwks-url", "https://x/"}, wantErr: "--issuer is required"},
		{name: "issuer alone", give: []string{"--issuer", "i"}, wantErr: "--issuer needs"},
		{name: "negative skew", give: []string{"--token-clock-skew", "-1s"}, wantErr: "must not be negative"},
		{name: "zero interval", give: []string{"--jwks-min-interval", "0s"}, wantErr: "must be positive"},
		{name: "zero refresh", give: []string{"--jwks-refresh", "0s"}, wantErr: "must be positive"},
		{name: "zero fetch timeout", give: []string{"--jwks-fetch-timeout", "0s"}, wantErr: "must be positive"},
		{name: "zero max bytes", give: []string{"--jwks-max-bytes", "0"}, wantErr: "must be positive"},
		{name: "negative cache", give: []string{"--token-cache-bytes", "-1"}, wantErr: "must not be negative"},
		{name: "no cache", give: []string{"--token-cache-bytes", "0"},
			want: func() auth.VerifierConfig {
				c := auth.DefaultVerifierConfig()
				c.CacheBytes = -1
				return c
			}()},
		{name: "cache bound", give: []string{"--token-cache-bytes", "65536"},
			want: func() auth.VerifierConfig {
				c := auth.DefaultVerifierConfig()
				c.CacheBytes = 65536
				return c
			}()},
		{name: "fetch bounds", give: []string{"--jwks-fetch-timeout", "2s", "--jwks-max-bytes", "4096"},
			want: func() auth.VerifierConfig {
				c := auth.DefaultVerifierConfig()
				c.FetchTimeout, c.MaxJWKSBytes = 2*time.Second, 4096
				return c
			}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			f := Register(fs)
			if err := fs.Parse(tt.give); err != nil {
				t.Fatal(err)
			}
			got := auth.DefaultVerifierConfig()
			err := f.Apply(&got)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Apply = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Audience != tt.want.Audience || got.ClockSkew != tt.want.ClockSkew || got.MinRefreshInterval != tt.want.MinRefreshInterval ||
				got.RefreshInterval != tt.want.RefreshInterval || got.FetchTimeout != tt.want.FetchTimeout || got.MaxJWKSBytes != tt.want.MaxJWKSBytes || got.CacheBytes != tt.want.CacheBytes || len(got.JWKS) != len(tt.want.JWKS) || len(got.JWKS) == 1 && got.JWKS[0] != tt.want.JWKS[0] {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			if f.HasJWKS() != (len(tt.want.JWKS) > 0) {
				t.Errorf("HasJWKS = %v", f.HasJWKS())
			}
		})
	}
}
