package busauth_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/busauth"
	"github.com/threadcast/threadcast/internal/testsupport/natstest"
	"github.com/threadcast/threadcast/natsembed"
	"github.com/threadcast/threadcast/pipeline"
)

var key = []byte("busauth-test-key-0123456789")

func mint(t testing.TB, c auth.Claims) string {
	t.Helper()
	if c.Expiry == 0 {
		c.Expiry = time.Now().Add(time.Hour).Unix()
	}
	tok, err := auth.Mint(key, c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// locked is a running embedded server locked as the node locks it, with a
// Service answering on a service connection, and the event stream.
type locked struct {
	srv     *server.Server
	svc     *nats.Conn
	svcAuth nats.Option // the service identity
	s       *busauth.Service
}

// verifier is the HS256 auth.Verifier of key, as a node builds it.
func verifier(t testing.TB) busauth.Verifier {
	t.Helper()
	vc := auth.DefaultVerifierConfig()
	vc.SharedKeys = [][]byte{key}
	v, err := auth.NewVerifier(vc)
	if err != nil {
		t.Fatal(err)
	}
	return v.Verify
}

func startLocked(t testing.TB) *locked { return startLockedStream(t, true) }

// startLockedStream is startLocked, with the event stream when stream is
// set.
func startLockedStream(t testing.TB, stream bool) *locked {
	t.Helper()
	user, _ := nkeys.CreateUser()
	issuer, _ := nkeys.CreateAccount()
	upub, _ := user.PublicKey()
	ipub, _ := issuer.PublicKey()
	sc := natsembed.DefaultConfig()
	sc.StoreDir = t.TempDir()
	sc.Auth = &natsembed.Auth{Services: []string{upub}, CalloutIssuer: ipub, AgentAccount: busauth.AgentAccount}
	srv, err := natsembed.Start(sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	svc := natstest.Connect(t, srv.ClientURL(), nats.Nkey(upub, user.Sign))
	s, err := busauth.Start(svc, busauth.Config{Issuer: issuer, Verify: verifier(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	l := &locked{srv: srv, svc: svc, svcAuth: nats.Nkey(upub, user.Sign), s: s}
	if !stream {
		return l
	}
	js, _ := jetstream.New(svc)
	cfg := pipeline.DefaultConfig()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, pipeline.StreamConfig(&cfg)); err != nil {
		t.Fatal(err)
	}
	return l
}

func (l *locked) agent(tenant, tok string, opts ...nats.Option) (*nats.Conn, error) {
	o, err := agent.TokenAuth(tenant, func() string { return tok })
	if err != nil {
		return nil, err
	}
	return nats.Connect(l.srv.ClientURL(), append(append(o, nats.MaxReconnects(0)), opts...)...)
}

func TestStartConfig(t *testing.T) {
	user, _ := nkeys.CreateUser()
	account, _ := nkeys.CreateAccount()
	for _, tt := range []struct {
		name string
		give busauth.Config
	}{
		{"no issuer", busauth.Config{Verify: verifier(t)}},
		{"no verifier", busauth.Config{Issuer: account}},
		{"user key as issuer", busauth.Config{Issuer: user, Verify: verifier(t)}},
	} {
		if _, err := busauth.Start(nil, tt.give); !errors.Is(err, busauth.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", tt.name, err)
		}
	}
}

func TestPermissions(t *testing.T) {
	for _, tt := range []struct {
		name    string
		give    auth.Claims
		wantPub []string
		wantErr error
	}{
		{"every thread", auth.Claims{Tenant: "acme"}, []string{"agui.acme.*.events"}, nil},
		{"star", auth.Claims{Tenant: "acme", Threads: []string{"*"}}, []string{"agui.acme.*.events"}, nil},
		{"named threads", auth.Claims{Tenant: "acme", Threads: []string{"t1", "a.b"}}, []string{"agui.acme.t1.events", "agui.acme.=YS5i.events"}, nil},
		{"a glob", auth.Claims{Tenant: "acme", Threads: []string{"t*"}}, nil, busauth.ErrThreads},
		{"bad tenant", auth.Claims{Tenant: "Acme.>"}, nil, busauth.ErrThreads},
	} {
		p, err := busauth.Permissions(&tt.give)
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("%s: err %v, want %v", tt.name, err, tt.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		if strings.Join(p.Pub.Allow, " ") != strings.Join(tt.wantPub, " ") || len(p.Pub.Deny) != 0 {
			t.Errorf("%s: pub %v, want %v", tt.name, p.Pub, tt.wantPub)
		}
		if strings.Join(p.Sub.Allow, " ") != "_INBOX_acme.>" || len(p.Sub.Deny) != 0 || p.Resp != nil {
			t.Errorf("%s: sub %v resp %v, want _INBOX_acme.> only", tt.name, p.Sub, p.Resp)
		}
	}
}

func TestAuthorize(t *testing.T) {
	now := time.Now()
	exp := now.Add(time.Hour).Unix()
	pub := auth.ScopeRead + " " + auth.ScopePublish
	other, err := auth.Mint([]byte("another-key-0123456789"), auth.Claims{Tenant: "acme", Scope: pub, Expiry: exp})
	if err != nil {
		t.Fatal(err)
	}
	good := mint(t, auth.Claims{Tenant: "acme", Scope: pub, Expiry: exp})
	for _, tt := range []struct {
		name, tok, want string
	}{
		{"ok", good, busauth.ResultOK},
		{"no token", "", busauth.ResultNoToken},
		{"garbage", "x.y.z", busauth.ResultMalformed},
		{"other key", other, busauth.ResultSignature},
		{"expired", mint(t, auth.Claims{Tenant: "acme", Scope: pub, Expiry: now.Add(-time.Minute).Unix()}), busauth.ResultExpired},
		{"read only", mint(t, auth.Claims{Tenant: "acme", Expiry: exp}), busauth.ResultScope},
		{"read scope", mint(t, auth.Claims{Tenant: "acme", Scope: auth.ScopeRead, Expiry: exp}), busauth.ResultScope},
		{"glob threads", mint(t, auth.Claims{Tenant: "acme", Scope: pub, Threads: []string{"a*"}, Expiry: exp}), busauth.ResultThreads},
	} {
		req := jwt.NewAuthorizationRequestClaims("UABC")
		req.UserNkey = "UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4"
		req.ConnectOptions.Token = tt.tok
		u, result, err := busauth.Authorize(t.Context(), req, verifier(t), "TC")
		if result != tt.want {
			t.Errorf("%s: result %q (%v), want %q", tt.name, result, err, tt.want)
		}
		if (err == nil) != (tt.want == busauth.ResultOK) {
			t.Errorf("%s: err %v", tt.name, err)
		}
		if err == nil && (u.Subject != req.UserNkey || u.Audience != "TC" || u.Expires != exp || u.Name != "tenant:acme") {
			t.Errorf("%s: user %+v", tt.name, u)
		}
	}
}

// TestServiceOverNATS: the answers as a client sees them — refused at
// connect with the reason, or authorized with exactly its tenant's
// subjects — and each counted by result.
func TestServiceOverNATS(t *testing.T) {
	l := startLocked(t)
	pub := auth.ScopeRead + " " + auth.ScopePublish
	for _, tt := range []struct {
		name, tok, reason string
	}{
		{"none", "", "no token"},
		{"read only", mint(t, auth.Claims{Tenant: "acme"}), "publish scope"},
		{"expired", mint(t, auth.Claims{Tenant: "acme", Scope: pub, Expiry: time.Now().Add(-time.Minute).Unix()}), "expired"},
	} {
		nc, err := l.agent("acme", tt.tok)
		if err == nil {
			nc.Close()
			t.Fatalf("%s: connected", tt.name)
		}
		if !errors.Is(err, nats.ErrAuthorization) {
			t.Errorf("%s: %v, want an authorization violation", tt.name, err)
		}
	}

	// A token limited to one thread publishes there and nowhere else.
	errc := make(chan error, 8)
	nc, err := l.agent("acme", mint(t, auth.Claims{Tenant: "acme", Scope: pub, Threads: []string{"t1"}}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errc <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, "agui.acme.t1.events", []byte(`{"type":"RUN_STARTED","threadId":"t1","runId":"r"}`)); err != nil {
		t.Fatalf("own thread: %v", err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel2()
	if _, err := js.Publish(short, "agui.acme.t2.events", []byte(`{}`)); err == nil {
		t.Error("another thread of the tenant: acked")
	}
	select {
	case err := <-errc:
		if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), "agui.acme.t2.events") {
			t.Errorf("async error %v, want a permissions violation for agui.acme.t2.events", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("no permissions violation for agui.acme.t2.events")
	}

	// Not even a service connection can forge a server's request: the
	// server denies it the auth subject.
	if _, err := l.svc.Request(busauth.AuthSubject, []byte("not a jwt"), 300*time.Millisecond); err == nil {
		t.Error("a service connection's request to the auth subject was answered")
	}
	// A request that is not a server's is counted and left unanswered.
	inbox := nats.NewInbox()
	sub, err := l.svc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	busauth.Handle(l.s, &nats.Msg{Subject: busauth.AuthSubject, Reply: inbox, Data: []byte("not a jwt")})
	if m, err := sub.NextMsg(300 * time.Millisecond); err == nil {
		t.Errorf("a bad request was answered: %q", m.Data)
	}
	res := l.s.Collectors()[0].(*prometheus.CounterVec)
	for _, w := range []struct {
		result string
		n      float64
	}{{busauth.ResultNoToken, 1}, {busauth.ResultScope, 1}, {busauth.ResultExpired, 1}, {busauth.ResultOK, 1}, {busauth.ResultBadReq, 1}, {busauth.ResultSignature, 0}} {
		if got := testutil.ToFloat64(res.WithLabelValues(w.result)); got != w.n {
			t.Errorf("threadcast_bus_auth_total{result=%q} = %v, want %v", w.result, got, w.n)
		}
	}
}

// TestConnectionEndsAtExpiry: the server closes an agent's connection when
// its token expires (the user's expiry is the token's).
func TestConnectionEndsAtExpiry(t *testing.T) {
	l := startLocked(t)
	closed := make(chan struct{})
	errc := make(chan error, 4)
	tok := mint(t, auth.Claims{Tenant: "acme", Scope: auth.ScopePublish, Expiry: time.Now().Add(2 * time.Second).Unix()})
	nc, err := l.agent("acme", tok, nats.ClosedHandler(func(*nats.Conn) { close(closed) }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errc <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("connection still open 10 s after its token expired")
	}
	select {
	case err := <-errc:
		if !errors.Is(err, nats.ErrAuthExpired) {
			t.Errorf("error %v, want nats.ErrAuthExpired", err)
		}
	default:
		t.Error("closed without an authentication expired error")
	}
}

// TestStop: after Stop nobody answers, and connections are refused.
func TestStop(t *testing.T) {
	l := startLocked(t)
	l.s.Stop()
	l.s.Stop() // idempotent
	if nc, err := l.agent("acme", mint(t, auth.Claims{Tenant: "acme", Scope: auth.ScopePublish})); err == nil {
		nc.Close()
		t.Error("connected with no callout answering")
	}
}
