package node

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/connlimit"
	"github.com/threadcast/threadcast/demo"
	"github.com/threadcast/threadcast/fanout"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/quota"
	"github.com/threadcast/threadcast/web"
)

// Config configures a node. Build it with DefaultConfig and change fields.
type Config struct {
	// HTTP is the address of the node's one HTTP port ("host:port"; port 0
	// picks a free one, see Node.HTTPAddr).
	HTTP string

	// NatsURL is an external NATS server (comma-separated URLs). Empty: the
	// node embeds a nats-server with JetStream.
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
	// NatsListen is the embedded server's client address "host:port"; port
	// 0 (or -1) picks a free one (see Node.NatsURL).
	NatsListen string
	// DataDir holds the embedded server's JetStream store (the event log
	// and the checkpoints): a node restarted on the same directory keeps
	// every thread. Required when NatsURL is empty.
	DataDir string

	// Ingest runs the reducers (and, with Bridge, serves the ingest HTTP
	// bridge); Fanout serves the /v1 API and the dashboard.
	Ingest, Fanout bool
	// Bridge serves POST /v1/ingest/{tenant}/{thread} beside ingest, its
	// requests authorized by the node's token Verifier, or by nobody with
	// BridgeNoAuth (development only).
	Bridge       bool
	BridgeNoAuth bool
	// Lease: ingest claims its partitions with TTL'd leases in KV
	// (pipeline.LeasedIngest with LeaseConfig; its Partitions, Replicas
	// and Domain are set from Pipeline), rebalanced among the instances and
	// taken over after a crash. Off: static assignment, the partitions
	// p % Pipeline.Instances == Pipeline.Instance.
	Lease       bool
	LeaseConfig pipeline.LeaseConfig
	// Name names the node's main NATS connection (that of ingest and the
	// bridge, or the fanout's when ingest is off) and prefixes the others
	// ("-auth": the callout's; the fanout's beside ingest is
	// "threadcast-fanout"). Empty: "threadcast".
	Name string
	// Demo runs demo agents with DemoConfig until Stop.
	Demo       bool
	DemoConfig demo.Config

	// AuthKey signs the HS256 bearer tokens (package auth) that the fanout
	// and the ingest bridge accept. Required (≥ auth.MinKeyLen bytes) when
	// Fanout or an authorized Bridge is on, unless Tokens names a JWKS
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

	// Pipeline configures ingest (its Logger and Metrics are set by the
	// node). Fanout configures the fanout; its AuthKey is set from AuthKey
	// and its Hub.Partitions from Pipeline.Partitions.
	Pipeline     pipeline.Config
	FanoutConfig fanout.Config
	// Quota is every door's per-tenant quotas: the node sets it as
	// Pipeline.Quota and FanoutConfig.Quota, holds the bridge to it, and
	// counts retained messages when a tenant has that quota.
	Quota quota.Config

	// Drain bounds each phase of the shutdown (and the start-up of
	// streams): HTTP drain, the publishers' acks, ingest's checkpoints, the
	// NATS connection's drain.
	Drain time.Duration
	// ReadyMaxLag: /readyz fails while ingest has more messages waiting.
	ReadyMaxLag uint64
	// StoreMinFree is the free space under which the embedded server's
	// store counts as full (pipeline.StorageConfig.MinFree; 0: 256 MiB):
	// the bridge answers 507 and /readyz fails until there is room.
	StoreMinFree uint64
	// BridgeWindow bounds the bytes of one bridge request's events
	// published and not yet acked (bridge.Config.Window; 0: 1 MiB).
	BridgeWindow int

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

	// Logger receives the node's logs (nil: slog.Default()).
	Logger *slog.Logger
}

// DefaultConfig returns the defaults: every part on, embedded NATS on
// 127.0.0.1:4222, HTTP on :8080, no demo. DataDir and AuthKey are left for
// the caller.
func DefaultConfig() Config {
	return Config{
		HTTP:         ":8080",
		NatsListen:   "127.0.0.1:4222",
		Ingest:       true,
		Fanout:       true,
		Bridge:       true,
		Dashboard:    true,
		LeaseConfig:  pipeline.DefaultLeaseConfig(),
		Tokens:       auth.DefaultVerifierConfig(),
		Pipeline:     pipeline.DefaultConfig(),
		FanoutConfig: fanout.DefaultConfig(),
		Quota:        fanout.DefaultConfig().Quota,
		Drain:        20 * time.Second,
		ReadyMaxLag:  100000,

		MaxConnsPerSource: connlimit.AutoPerSource,
		HTTPHeaderTimeout: 10 * time.Second,
		HTTPIdleTimeout:   2 * time.Minute,
	}
}

// Start-up errors. Each is wrapped with the address or path at fault, so
// that a command can name the flag to change.
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

func (c *Config) validate() error {
	switch {
	case !c.Ingest && !c.Fanout && !c.Demo:
		return fmt.Errorf("%w: nothing to run (ingest, fanout and demo all off)", ErrConfig)
	case len(c.AuthKey) > 0 && len(c.AuthKey) < auth.MinKeyLen:
		return fmt.Errorf("%w: auth key shorter than %d bytes", ErrConfig, auth.MinKeyLen)
	case c.needsTokens() && !c.hasTokens():
		return fmt.Errorf("%w: no auth key of at least %d bytes and no JWKS source", ErrConfig, auth.MinKeyLen)
	case c.NatsURL == "" && c.DataDir == "":
		return fmt.Errorf("%w: an embedded NATS server needs a data directory", ErrConfig)
	case c.Drain <= 0:
		return fmt.Errorf("%w: drain %v", ErrConfig, c.Drain)
	case c.NatsCreds != "" && c.NatsNkey != "":
		return fmt.Errorf("%w: NATS credentials and an nkey seed are two identities; give one", ErrConfig)
	case c.NatsIdentity != nil && (c.NatsCreds != "" || c.NatsNkey != ""):
		return fmt.Errorf("%w: a NATS identity and credentials or an nkey seed are two identities; give one", ErrConfig)
	case c.NatsURL == "" && (c.NatsCreds != "" || c.NatsNkey != "" || c.NatsIdentity != nil || c.CalloutSeed != ""):
		return fmt.Errorf("%w: NATS credentials, nkey and callout seed are for an external NATS (NatsURL)", ErrConfig)
	case c.CalloutSeed != "" && len(c.AuthKey) < auth.MinKeyLen && len(c.Tokens.JWKS) == 0:
		return fmt.Errorf("%w: the auth callout verifies tokens with the auth key (shorter than %d bytes) or a JWKS source (none)", ErrConfig, auth.MinKeyLen)
	case c.NatsURL == "" && c.Demo && len(c.AuthKey) < auth.MinKeyLen:
		return fmt.Errorf("%w: demo agents connect with tokens the auth key signs, shorter than %d bytes", ErrConfig, auth.MinKeyLen)
	case c.HTTPHeaderTimeout <= 0 || c.HTTPIdleTimeout <= 0:
		return fmt.Errorf("%w: HTTP header timeout %v, idle timeout %v: both must be positive", ErrConfig, c.HTTPHeaderTimeout, c.HTTPIdleTimeout)
	}
	fds, err := connlimit.FDLimit()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.MaxConns, err = connlimit.Check(c.MaxConns, fds); err != nil {
		return fmt.Errorf("%w: max connections: %w", ErrConfig, err)
	}
	if c.MaxConnsPerSource, err = connlimit.CheckPerSource(c.MaxConnsPerSource, c.MaxConns); err != nil {
		return fmt.Errorf("%w: max connections per source: %w", ErrConfig, err)
	}
	if c.Ingest {
		if err := c.Pipeline.Validate(); err != nil {
			return err
		}
	}
	if c.Ingest && c.Lease {
		lc := &c.LeaseConfig
		lc.Partitions, lc.Replicas, lc.Domain = c.Pipeline.Partitions, c.Pipeline.Replicas, c.Pipeline.Domain
		if err := lc.Validate(); err != nil {
			return err
		}
	}
	if c.Name == "" {
		c.Name = "threadcast"
	}
	return nil
}

// needsTokens: a part that verifies bearer tokens runs.
func (c *Config) needsTokens() bool {
	return c.Fanout || (c.Ingest && c.Bridge && !c.BridgeNoAuth)
}

// hasTokens: the node has a way to verify tokens (an auth key or a JWKS
// source); an embedded server is then locked, agents authorized by the
// callout.
func (c *Config) hasTokens() bool { return len(c.AuthKey) > 0 || len(c.Tokens.JWKS) > 0 }
