package fanout

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/threadcast/threadcast/auth"
)

// VerifierCollectors exports v's JWKS and token cache counters (no labels). New registers
// them for its Verifier; a process checking tokens without a fanout
// registers them itself.
func VerifierCollectors(v *auth.Verifier) []prometheus.Collector {
	counter := func(name, help string, f func(auth.VerifierStats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(v.Stats())) })
	}
	return []prometheus.Collector{
		counter("threadcast_auth_jwks_fetches_total", "JWKS documents fetched (HTTP GETs or file reads), failed ones included.",
			func(s auth.VerifierStats) uint64 { return s.Fetches }),
		counter("threadcast_auth_jwks_fetch_errors_total", "JWKS fetches that failed (unreachable, not 200, invalid, too large); the keys held stay in use.",
			func(s auth.VerifierStats) uint64 { return s.FetchErrors }),
		counter("threadcast_auth_jwks_refresh_throttled_total", "JWKS refreshes skipped because the last fetch was within the minimum interval (unknown kids, stale documents).",
			func(s auth.VerifierStats) uint64 { return s.Throttled }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "threadcast_auth_jwks_keys", Help: "Signing keys held from JWKS documents."},
			func() float64 { return float64(v.Stats().Keys) }),
		counter("threadcast_auth_token_cache_hits_total", "Token verifications answered by a token verified before (its exp, nbf and key document checked again).",
			func(s auth.VerifierStats) uint64 { return s.CacheHits }),
		counter("threadcast_auth_token_cache_misses_total", "Token verifications that checked the signature and decoded the claims.",
			func(s auth.VerifierStats) uint64 { return s.CacheMisses }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "threadcast_auth_token_cache_bytes", Help: "Memory of the verified tokens remembered (--token-cache-bytes bounds it)."},
			func() float64 { return float64(v.Stats().CacheBytes) }),
	}
}
