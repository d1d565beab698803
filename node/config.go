package node

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/connlimit"
	"github.com/threadcast/threadcast/fanout"
	"github.com/threadcast/threadcast/quota"
	"github.com/threadcast/threadcast/web"
)

// Config configures a node. Build it with DefaultConfig and change fields.
type Config struct {
	// HTTP is the address of the node's one HTTP port ("host:port"; port 0
	// picks a free one, see Node.HTTPAddr).
	HTTP string

	// NatsURL is an external NATS server (comma-separated URLs). Empty: the
	// node's IngestRole embeds a nats-server with JetStream.
	NatsURL string
	// NatsCreds is a credentials file (JWT and nkey seed, operator mode)
	// for NatsURL; NatsNkey is an nkey seed file (a user key, U..., listed
	// in the server's authorization users and auth_callout auth_users).
	// They are the identity of the node's own connections (ingest, fanout,
	// bridge, the auth callout). Empty: none (or a user and password in
	// NatsURL).
	NatsCreds string
	NatsNkey  string
	// NatsIdentity is the identity of another node in the same process
	// (its Node.ServiceIdentity), for a node that joins that node's
	// embedded server at NatsURL: a test or tool assembling several
	// nodes, never a command. At most one of the three is set.
	NatsIdentity nats.Option
	// CalloutSeed is an nkey seed file of the account key (A...) that is
	// the issuer of the server's auth_callout: set, the node runs the auth
	// callout service (package busauth) on NatsURL, authorizing agents by
	// the tokens AuthKey signs. With the embedded server the node always
	// runs it, with a key of its own.
	CalloutSeed string

	// Fanout serves the /v1 API and the dashboard.
	Fanout bool
	// Name names the node's main NATS connection (that of ingest and the
	// bridge, or the fanout's when ingest is off) and prefixes the others
	// ("-auth": the callout's; the fanout's beside ingest is
	// "threadcast-fanout"). Empty: "threadcast".
	Name string

	// IngestRole is the ingest side: the reducers, the bridge, the demo
	// agents and the embedded NATS server (package node/ingestrole). Nil:
	// the node runs none of them (NatsURL is then required).
	IngestRole IngestRole

	// AuthKey signs the HS256 bearer tokens (package auth) that the fanout
	// and the ingest bridge accept. Required (≥ auth.MinKeyLen bytes) when
	// Fanout or an authorized bridge is on, unless Tokens names a JWKS
	// source. With neither, an embedded server admits anonymous clients (an
	// ingest-only node, for development).
	AuthKey []byte
	// Tokens configures the node's one token Verifier (Node.Verifier),
	// shared by the fanout and the bridge: JWKS sources, audience, clock
	// skew, refresh throttle. AuthKey is added to its SharedKeys. With a
	// JWKS source, Start fetches it and fails when it cannot.
	Tokens auth.VerifierConfig
	// Dashboard serves the dashboard (package web) at / beside the fanout.
	Dashboard bool
	// DashboardTenants are offered by the dashboard's tenant picker with
	// their tokens, only to requests from a loopback address whose Host is
	// a loopback name (web.Config.TenantsLocalOnly): set them only on a
	// development node.
	DashboardTenants []web.Tenant

	// FanoutConfig configures the fanout; its Verifier is the node's, and
	// beside an IngestRole its Hub.Partitions, Hub.EventStream,
	// DeadLetters and TapStream are ingest's (IngestPlan).
	FanoutConfig fanout.Config
	// Quota is every door's per-tenant quotas: the node sets it as
	// FanoutConfig.Quota, and the ingest side holds ingest and the bridge
	// to it.
	Quota quota.Config

	// Drain bounds each phase of the shutdown (and the start-up of
	// streams): HTTP drain, the publishers' acks, ingest's checkpoints, the
	// NATS connection's drain.
	Drain time.Duration

	// MaxConns caps the HTTP connections open at once (streams included:
	// each SSE or WebSocket stream holds one); a connection past it is
	// answered 503 too_many_connections and closed (package connlimit).
	// It must leave connlimit.Reserve descriptors of the process's limit
	// (checked at Start); 0: min(16384, half of what the reserve leaves).
	MaxConns int
	// MaxConnsPerSource caps the HTTP connections open at once from one
	// source (an IPv4 address, an IPv6 /64), refused as MaxConns refuses,
	// so that one client cannot hold the whole of MaxConns: 0 none,
	// connlimit.AutoPerSource (DefaultConfig) a quarter of MaxConns, at
	// most MaxConns. Behind a load balancer or proxy every client has its
	// address: set it to 0 (or MaxConns) there.
	MaxConnsPerSource int
	// HTTPHeaderTimeout bounds the reading of a request's headers, and so
	// how long a connection that sends nothing is kept; HTTPIdleTimeout
	// how long a keep-alive connection may wait for its next request.
	HTTPHeaderTimeout time.Duration
	HTTPIdleTimeout   time.Duration
	// HTTPMaxHeaderBytes bounds a request's line and headers together:
	// past it the request is answered 431 before more of it is read.
	HTTPMaxHeaderBytes int

	// Logger receives the node's logs (nil: slog.Default()).
	Logger *slog.Logger
}

// DefaultConfig returns the defaults: the fanout and the dashboard on,
// HTTP on :8080, no ingest role. NatsURL (or an IngestRole) and AuthKey are
// left for the caller.
func DefaultConfig() Config {
	return Config{
		HTTP:         ":8080",
		Fanout:       true,
		Dashboard:    true,
		Tokens:       auth.DefaultVerifierConfig(),
		FanoutConfig: fanout.DefaultConfig(),
		Quota:        fanout.DefaultConfig().Quota,
		Drain:        20 * time.Second,

		MaxConnsPerSource: connlimit.AutoPerSource,
		HTTPHeaderTimeout: 10 * time.Second,
		HTTPIdleTimeout:   2 * time.Minute,

		HTTPMaxHeaderBytes: fanout.DefaultMaxHeaderBytes,
	}
}

// Start-up errors. Each is wrapped with the address or path at fault, so
// that a command can name the flag to change. ErrDataDir and ErrNatsListen
// are the embedded server's, reported by the ingest side (IngestRole).
var (
	ErrConfig     = errors.New("node: bad config")
	ErrDataDir    = errors.New("node: data directory unusable")
	ErrNatsListen = errors.New("node: cannot listen for NATS clients")
	ErrHTTPListen = errors.New("node: cannot listen for HTTP")
	ErrNats       = errors.New("node: NATS")
	// ErrNkey: Config.NatsNkey unreadable or not a user seed;
	// ErrCalloutSeed: Config.CalloutSeed unreadable or not an account seed.
	ErrNkey        = errors.New("node: NATS nkey seed")
	ErrCalloutSeed = errors.New("node: auth callout seed")
)

func (c *Config) validate() (IngestPlan, error) {
	var plan IngestPlan
	if c.IngestRole != nil {
		var err error
		if plan, err = c.IngestRole.Plan(c); err != nil {
			return plan, err
		}
	}
	switch {
	case !plan.Ingest && !c.Fanout && !plan.Agents:
		return plan, fmt.Errorf("%w: nothing to run (ingest, fanout and demo all off)", ErrConfig)
	case len(c.AuthKey) > 0 && len(c.AuthKey) < auth.MinKeyLen:
		return plan, fmt.Errorf("%w: auth key shorter than %d bytes", ErrConfig, auth.MinKeyLen)
	case (c.Fanout || plan.Tokens) && !c.HasTokens():
		return plan, fmt.Errorf("%w: no auth key of at least %d bytes and no JWKS source", ErrConfig, auth.MinKeyLen)
	case c.NatsURL == "" && c.IngestRole == nil:
		return plan, fmt.Errorf("%w: no NATS URL and no ingest role to embed a NATS server", ErrConfig)
	case c.Drain <= 0:
		return plan, fmt.Errorf("%w: drain %v", ErrConfig, c.Drain)
	case c.NatsCreds != "" && c.NatsNkey != "":
		return plan, fmt.Errorf("%w: NATS credentials and an nkey seed are two identities; give one", ErrConfig)
	case c.NatsIdentity != nil && (c.NatsCreds != "" || c.NatsNkey != ""):
		return plan, fmt.Errorf("%w: a NATS identity and credentials or an nkey seed are two identities; give one", ErrConfig)
	case c.NatsURL == "" && (c.NatsCreds != "" || c.NatsNkey != "" || c.NatsIdentity != nil || c.CalloutSeed != ""):
		return plan, fmt.Errorf("%w: NATS credentials, nkey and callout seed are for an external NATS (NatsURL)", ErrConfig)
	case c.CalloutSeed != "" && len(c.AuthKey) < auth.MinKeyLen && len(c.Tokens.JWKS) == 0:
		return plan, fmt.Errorf("%w: the auth callout verifies tokens with the auth key (shorter than %d bytes) or a JWKS source (none)", ErrConfig, auth.MinKeyLen)
	case c.HTTPHeaderTimeout <= 0 || c.HTTPIdleTimeout <= 0:
		return plan, fmt.Errorf("%w: HTTP header timeout %v, idle timeout %v: both must be positive", ErrConfig, c.HTTPHeaderTimeout, c.HTTPIdleTimeout)
	case c.HTTPMaxHeaderBytes <= 0:
		return plan, fmt.Errorf("%w: HTTP max header bytes %d: must be positive", ErrConfig, c.HTTPMaxHeaderBytes)
	}
	fds, err := connlimit.FDLimit()
	if err != nil {
		return plan, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.MaxConns, err = connlimit.Check(c.MaxConns, fds); err != nil {
		return plan, fmt.Errorf("%w: max connections: %w", ErrConfig, err)
	}
	if c.MaxConnsPerSource, err = connlimit.CheckPerSource(c.MaxConnsPerSource, c.MaxConns); err != nil {
		return plan, fmt.Errorf("%w: max connections per source: %w", ErrConfig, err)
	}
	if c.Name == "" {
		c.Name = "threadcast"
	}
	return plan, nil
}

// HasTokens reports whether the node has a way to verify tokens (an auth
// key or a JWKS source); an embedded server is then locked, agents
// authorized by the callout.
func (c *Config) HasTokens() bool { return len(c.AuthKey) > 0 || len(c.Tokens.JWKS) > 0 }
