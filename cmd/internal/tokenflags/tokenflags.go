// Package tokenflags declares the token verification flags that every
// Threadcast command serving tokens shares (threadcast serve, cmd/fanout,
// cmd/ingest) and maps them onto an auth.VerifierConfig, so that the flag
// names, defaults and help read the same everywhere.
package tokenflags

import (
	"errors"
	"flag"
	"time"

	"github.com/threadcast/threadcast/auth"
)

// Flags holds the parsed values until Apply.
type Flags struct {
	jwksURL, jwksFile, issuer, audience string
	skew, minInterval, refresh, timeout time.Duration
	maxBytes, cacheBytes                int64
}

// Register declares the flags on fs with the defaults of
// auth.DefaultVerifierConfig.
func Register(fs *flag.FlagSet) *Flags {
	d := auth.DefaultVerifierConfig()
	f := &Flags{}
	fs.StringVar(&f.jwksURL, "jwks-url", "", "`URL` of the JWKS document of --issuer's signing keys (https; http only to a loopback address); tokens signed with them (EdDSA, ES256, RS256) are accepted besides --auth-key's")
	fs.StringVar(&f.jwksFile, "jwks-file", "", "JWKS `file` of --issuer's signing keys, instead of --jwks-url (air-gapped installs); re-read like the URL")
	fs.StringVar(&f.issuer, "issuer", "", "the `iss` of the tokens signed with the --jwks-url/--jwks-file keys; required with them")
	fs.StringVar(&f.audience, "audience", "", "`aud` every token must carry; empty: tokens with an aud are refused")
	fs.DurationVar(&f.skew, "token-clock-skew", d.ClockSkew, "clock difference tolerated around a token's exp and nbf")
	fs.DurationVar(&f.minInterval, "jwks-min-interval", d.MinRefreshInterval, "least time between two JWKS fetches, however many unknown kids arrive")
	fs.DurationVar(&f.refresh, "jwks-refresh", d.RefreshInterval, "refetch the JWKS when it is older than this (new keys, retired keys)")
	fs.DurationVar(&f.timeout, "jwks-fetch-timeout", d.FetchTimeout, "bound on one JWKS fetch")
	fs.Int64Var(&f.maxBytes, "jwks-max-bytes", d.MaxJWKSBytes, "largest JWKS document accepted, in `bytes`; a larger one is a failed fetch")
	fs.Int64Var(&f.cacheBytes, "token-cache-bytes", d.CacheBytes, "memory, in `bytes`, of the verified tokens remembered so that a token presented again is not checked again (its exp, nbf and key document are); 0 remembers none")
	return f
}

// Apply sets cfg from the flags.
func (f *Flags) Apply(cfg *auth.VerifierConfig) error {
	switch {
	case f.jwksURL != "" && f.jwksFile != "":
		return errors.New("--jwks-url and --jwks-file: give one")
	case (f.jwksURL != "" || f.jwksFile != "") && f.issuer == "":
		return errors.New("--issuer is required with --jwks-url or --jwks-file (the iss of the tokens its keys sign)")
	case f.issuer != "" && f.jwksURL == "" && f.jwksFile == "":
		return errors.New("--issuer needs --jwks-url or --jwks-file")
	case f.skew < 0 || f.minInterval <= 0 || f.refresh <= 0 || f.timeout <= 0 || f.maxBytes <= 0:
		return errors.New("--token-clock-skew must not be negative; --jwks-min-interval, --jwks-refresh, --jwks-fetch-timeout and --jwks-max-bytes must be positive")
	case f.cacheBytes < 0:
		return errors.New("--token-cache-bytes must not be negative (0 remembers no token)")
	}
	cfg.CacheBytes = f.cacheBytes
	if f.cacheBytes == 0 {
		cfg.CacheBytes = -1
	}
	cfg.FetchTimeout = f.timeout
	cfg.MaxJWKSBytes = f.maxBytes
	cfg.Audience = f.audience
	cfg.ClockSkew = f.skew
	cfg.MinRefreshInterval = f.minInterval
	cfg.RefreshInterval = f.refresh
	cfg.JWKS = nil
	if f.issuer != "" {
		cfg.JWKS = []auth.JWKSSource{{Issuer: f.issuer, URL: f.jwksURL, File: f.jwksFile}}
	}
	return nil
}

// HasJWKS reports whether a JWKS source was given: then no --auth-key is
// needed.
func (f *Flags) HasJWKS() bool { return f.jwksURL != "" || f.jwksFile != "" }
