package busauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/wire"
)

// AuthSubject is where a NATS server sends its authorization requests
// (nats-server's AuthCalloutSubject). QueueGroup is the queue group every
// Service subscribes in, so that of several (one per Threadcast process)
// exactly one answers each request.
const (
	AuthSubject = "$SYS.REQ.USER.AUTH"
	QueueGroup  = "threadcast-auth"
)

// AgentAccount is the default Config.Account: the account agents are
// placed in, apart from the services' (which holds the event stream). It
// must import the events subjects (agui.*.*.events) as a service from the
// services' account, and nothing else; see docs/production.md and
// natsembed.Auth for why.
const AgentAccount = "AGENTS"

// The result label values of threadcast_bus_auth_total.
const (
	ResultOK          = "ok"
	ResultNoToken     = "no_token"    // no token in the CONNECT
	ResultMalformed   = "malformed"   // not a token, or an unsupported algorithm
	ResultSignature   = "signature"   // forged or signed with another key
	ResultExpired     = "expired"     // expired
	ResultInvalid     = "invalid"     // refused by the Verifier for another reason (issuer, audience, unknown key, not yet valid)
	ResultUnavailable = "unavailable" // the keys could not be fetched (JWKS)
	ResultScope       = "scope"       // valid, but without the publish scope
	ResultThreads     = "threads"     // thread patterns NATS subjects cannot express
	ResultBadReq      = "bad_request" // the server's request did not decode
)

// Errors a connection is refused with: the server logs the text and tells
// the client "Authorization Violation", nothing more.
var (
	ErrNoToken = errors.New("busauth: no token (connect with the tenant's token)")
	ErrScope   = errors.New("busauth: token lacks the publish scope")
	ErrThreads = errors.New("busauth: token's thread patterns cannot be expressed as NATS subjects")
	ErrConfig  = errors.New("busauth: bad config")
)

// Config configures a Service.
type Config struct {
	// Issuer signs the answers: an account key pair whose public key (A...)
	// is the server's auth_callout issuer. Required.
	Issuer nkeys.KeyPair
	// Verify checks a client's token. Required.
	Verify Verifier
	// Account is the account an authorized agent is placed in. Empty:
	// AgentAccount.
	Account string
	// Timeout bounds one answer's verification (a JWKS fetch it needs);
	// the server's own authorization timeout bounds the whole exchange.
	// Zero: 2 s.
	Timeout time.Duration
	// Logger receives one Debug line per refused connection (the counter
	// is the signal to watch: an attacker's connects must not flood the
	// log) and errors of the Service itself (nil: slog.Default()).
	Logger *slog.Logger
}

// Service answers a NATS server's authorization requests; see the package
// documentation.
type Service struct {
	cfg     Config
	log     *slog.Logger
	results *prometheus.CounterVec

	mu  sync.Mutex // guards sub; a leaf
	sub *nats.Subscription
}

// Start subscribes to AuthSubject on nc (a service identity: one of the
// server's auth_users) and answers until Stop or until nc closes.
func Start(nc *nats.Conn, cfg Config) (*Service, error) {
	if cfg.Issuer == nil || cfg.Verify == nil {
		return nil, fmt.Errorf("%w: an issuer key and a verifier are required", ErrConfig)
	}
	if pub, err := cfg.Issuer.PublicKey(); err != nil || !nkeys.IsValidPublicAccountKey(pub) {
		return nil, fmt.Errorf("%w: the issuer must be an account nkey (A...)", ErrConfig)
	}
	if cfg.Account == "" {
		cfg.Account = AgentAccount
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	s := &Service{cfg: cfg, log: cfg.Logger, results: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "threadcast", Subsystem: "bus", Name: "auth_total",
		Help: "NATS connections the auth callout answered, by result (ok, no_token, malformed, signature, expired, invalid, unavailable, scope, threads, bad_request).",
	}, []string{"result"})}
	if s.log == nil {
		s.log = slog.Default()
	}
	for _, r := range []string{ResultOK, ResultNoToken, ResultMalformed, ResultSignature, ResultExpired, ResultInvalid, ResultUnavailable, ResultScope, ResultThreads, ResultBadReq} {
		s.results.WithLabelValues(r)
	}
	sub, err := nc.QueueSubscribe(AuthSubject, QueueGroup, s.handle)
	if err != nil {
		return nil, fmt.Errorf("busauth: subscribe %s: %w", AuthSubject, err)
	}
	if err := nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("busauth: subscribe %s: %w", AuthSubject, err)
	}
	s.sub = sub
	return s, nil
}

// Stop stops answering (new connections then wait for another Service, or
// are refused when none answers). Idempotent.
func (s *Service) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sub != nil {
		_ = s.sub.Unsubscribe()
		s.sub = nil
	}
}

// Collectors returns threadcast_bus_auth_total, for the caller's registry.
func (s *Service) Collectors() []prometheus.Collector { return []prometheus.Collector{s.results} }

func (s *Service) handle(m *nats.Msg) {
	req, err := jwt.DecodeAuthorizationRequestClaims(string(m.Data))
	if err != nil {
		// Not a server's request (encrypted with an xkey, or not a JWT):
		// there is no one to address an answer to.
		s.results.WithLabelValues(ResultBadReq).Inc()
		s.log.Warn("bus auth: undecodable authorization request (is auth_callout's xkey set? it is not supported)", "err", err)
		return
	}
	resp := jwt.NewAuthorizationResponseClaims(req.UserNkey)
	resp.Audience = req.Server.ID
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	user, result, err := Authorize(ctx, req, s.cfg.Verify, s.cfg.Account)
	cancel()
	s.results.WithLabelValues(result).Inc()
	if err == nil {
		resp.Jwt, err = user.Encode(s.cfg.Issuer)
	}
	if err != nil {
		resp.Jwt = ""
		resp.Error = err.Error()
		s.log.Debug("bus auth: connection refused", "result", result, "err", err,
			"client", req.ClientInformation.Host, "name", truncate(req.ClientInformation.Name), "server", req.Server.Name)
	}
	tok, err := resp.Encode(s.cfg.Issuer)
	if err != nil {
		s.log.Error("bus auth: cannot sign the answer", "err", err)
		return
	}
	_ = m.Respond([]byte(tok))
}

// Authorize decides one authorization request: the user claims to answer
// with (placed in account), or the error the connection is refused with.
// result is the threadcast_bus_auth_total label of the outcome.
func Authorize(ctx context.Context, req *jwt.AuthorizationRequestClaims, verify Verifier, account string) (user *jwt.UserClaims, result string, err error) {
	tok := req.ConnectOptions.Token
	if tok == "" {
		return nil, ResultNoToken, ErrNoToken
	}
	c, err := verify(ctx, tok)
	if err != nil {
		return nil, tokenResult(err), err
	}
	if !canPublish(&c) {
		return nil, ResultScope, ErrScope
	}
	perms, err := Permissions(&c)
	if err != nil {
		return nil, ResultThreads, err
	}
	u := jwt.NewUserClaims(req.UserNkey)
	u.Audience = account
	u.Name = "tenant:" + c.Tenant
	u.Expires = c.Expiry
	u.Permissions = perms
	return u, ResultOK, nil
}

// Permissions returns what a connection authorized by c may do: publish
// its tenant's events (all threads, or each exactly named thread of a token
// limited to threads) and subscribe to its tenant's inbox. A pattern with
// '*' other than "*" itself has no NATS subject form: ErrThreads.
func Permissions(c *auth.Claims) (jwt.Permissions, error) {
	var p jwt.Permissions
	inbox, err := wire.InboxPrefix(c.Tenant)
	if err != nil {
		return p, fmt.Errorf("%w: %w", ErrThreads, err)
	}
	patterns := threadPatterns(c)
	if patterns == nil {
		p.Pub.Allow.Add(wire.EventsPrefix + "." + c.Tenant + ".*." + wire.EventsSuffix)
	}
	for _, t := range patterns {
		if strings.IndexByte(t, '*') >= 0 {
			return p, fmt.Errorf("%w: %q", ErrThreads, truncate(t))
		}
		s, err := wire.EventSubject(c.Tenant, t)
		if err != nil {
			return p, fmt.Errorf("%w: %w", ErrThreads, err)
		}
		p.Pub.Allow.Add(s)
	}
	p.Sub.Allow.Add(inbox + ".>")
	return p, nil
}

func truncate(s string) string {
	if len(s) > 48 {
		return s[:48] + "…"
	}
	return s
}

// ReadIssuerSeed reads the issuer's key from a seed file: an account nkey
// seed (SA...), alone or among other lines (what `nk -gen account -pubout`
// writes, or a decorated .nk/.creds file).
func ReadIssuerSeed(path string) (nkeys.KeyPair, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: issuer seed: %w", ErrConfig, err)
	}
	kp, err := nkeys.ParseDecoratedNKey(b)
	if err != nil {
		return nil, fmt.Errorf("%w: issuer seed %s: %w", ErrConfig, path, err)
	}
	if pub, err := kp.PublicKey(); err != nil || !nkeys.IsValidPublicAccountKey(pub) {
		return nil, fmt.Errorf("%w: issuer seed %s: not an account seed (SA...)", ErrConfig, path)
	}
	return kp, nil
}
