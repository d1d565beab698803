package node_test

// NOTE: the cross-tenant matrix, shared by the embedded default
// (TestBusMatrixEmbedded) and the three-server cluster configured from
// docs/production.md (TestBusMatrixCluster, build tag buscluster). Tenant A
// ("acme") works through every door it owns; the attackers — tenant B's
// ("globex") valid publish token, no credentials, a forged signature, an
// expired token, A's own read-only token — try every door of A's,
// including a reply subject of A's on B's own publish. Each door
// is attempted for real and its refusal observed (an authorization or
// permissions violation from the server, an HTTP status, no message within
// a bound on a control subscription that does receive the door's legitimate
// traffic), and A's data is checked unchanged afterwards.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/wire"
)

// busEnv is a running Threadcast whose bus the matrix attacks.
type busEnv struct {
	natsURL string // what agents (and attackers) dial
	httpURL string
	key     []byte     // the token signing key
	svc     *nats.Conn // a service connection: the controls' eyes
	cfg     pipeline.Config
}

// quiet is how long a door is watched for a message that must not come.
const quiet = 300 * time.Millisecond

func mintTok(t *testing.T, key []byte, c auth.Claims) string {
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

// errLog collects a connection's asynchronous errors (the server's
// permissions violations).
type errLog struct {
	mu   sync.Mutex
	errs []string
}

func (l *errLog) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	l.mu.Lock()
	l.errs = append(l.errs, err.Error())
	l.mu.Unlock()
}

// has reports whether a permissions violation naming subj (for a publish
// or a subscription, as op says) was reported.
func (l *errLog) has(op, subj string) bool {
	want := strings.ToLower(fmt.Sprintf("permissions violation for %s to %q", op, subj))
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.errs {
		if strings.Contains(strings.ToLower(e), want) {
			return true
		}
	}
	return false
}

func waitErr(t *testing.T, l *errLog, op, subj string) {
	t.Helper()
	testsupport.WaitFor(t, 5*time.Second, "permissions violation for "+op+" to "+subj, func() bool { return l.has(op, subj) })
}

// agentConn connects with tenant's token as an agent does.
func agentConn(env busEnv, tenant, tok string, errs *errLog) (*nats.Conn, error) {
	opts, err := agent.TokenAuth(tenant, func() string { return tok })
	if err != nil {
		return nil, err
	}
	opts = append(opts, nats.Name("matrix-"+tenant), nats.MaxReconnects(0), nats.Timeout(5*time.Second))
	if errs != nil {
		opts = append(opts, nats.ErrorHandler(errs.handler))
	}
	return nats.Connect(env.natsURL, opts...)
}

// runEvents returns one finished run of thread id with an assistant message
// saying text.
func runEvents(id, run, text string) []string {
	return []string{
		fmt.Sprintf(`{"type":"RUN_STARTED","threadId":%q,"runId":%q}`, id, run),
		fmt.Sprintf(`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m-%s","role":"assistant","delta":%q}`, run, text),
		fmt.Sprintf(`{"type":"RUN_FINISHED","threadId":%q,"runId":%q}`, id, run),
	}
}

// publishAll publishes events to thread of tenant through an agent.Publisher
// on nc and waits for every ack.
func publishAll(t *testing.T, nc *nats.Conn, tenant, thread string, events []string) {
	t.Helper()
	p, err := agent.New(nc, agent.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var futs []*agent.Future
	for _, e := range events {
		f, err := p.Publish(ctx, tenant, thread, []byte(e))
		if err != nil {
			t.Fatalf("publish %s/%s: %v", tenant, thread, err)
		}
		futs = append(futs, f)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatalf("publisher close: %v", err)
	}
	for _, f := range futs {
		if _, err := f.Result(); err != nil {
			t.Fatalf("ack of %s/%s: %v", tenant, thread, err)
		}
	}
}

// httpDo does one request with tok (empty: none) and returns the status
// and at most the body read within d (streams are cut there).
func httpDo(t *testing.T, method, url, tok, body string, d time.Duration) (int, string) {
	t.Helper()
	return httpDoUntil(t, method, url, tok, body, d, nil)
}

// httpDoUntil is httpDo that stops reading, before d, once the body read
// so far satisfies done (nil: read to the end or d): a stream's positive
// control waits as long as its data takes to come, and no longer.
func httpDoUntil(t *testing.T, method, url, tok, body string, d time.Duration, done func(string) bool) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/x-ndjson")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, url, err) // not Fatal: called from goroutines too
		return 0, ""
	}
	defer res.Body.Close()
	var sb strings.Builder
	r := bufio.NewReader(res.Body)
	for {
		line, err := r.ReadString('\n')
		sb.WriteString(line)
		if err != nil || done != nil && done(sb.String()) {
			break
		}
	}
	return res.StatusCode, sb.String()
}

// streamState returns the stream's last sequence and message count.
func streamState(t *testing.T, env busEnv) (uint64, uint64) {
	t.Helper()
	js, err := jetstream.New(env.svc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, env.cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq, info.State.Msgs
}

// Tenant A is the one attacked, tenant B the attacker with a valid token.
const tenantA, tenantB = "acme", "globex"

// matrix is one run of the matrix: A's data, the credentials, and the
// connections of A's and B's agents.
type matrix struct {
	env                busEnv
	secret             string // in A's thread's first message: no answer to an attacker may hold it
	threadA, tokThread string // A's thread and its subject token
	viewURL            string
	part               int // the partition of A's thread
	tokA, tokAReadOnly string
	tokB               string
	forged, expired    string // A's tenant, wrong key; A's tenant, past its expiry
	ncA, ncB           *nats.Conn
	errsB              *errLog // B's connection's permissions violations
}

// runBusMatrix is the matrix; see the file's NOTE.
func runBusMatrix(t *testing.T, env busEnv) {
	m := &matrix{env: env, secret: "acme-secret-" + nuid.Next(), threadA: "t-" + nuid.Next()}
	m.tokThread = wire.EncodeThread(m.threadA)
	m.part = wire.Partition(tenantA, m.tokThread, env.cfg.Partitions)
	m.viewURL = env.httpURL + "/v1/threads/" + m.threadA
	m.tokA = mintTok(t, env.key, auth.Claims{Tenant: tenantA, Scope: auth.ScopeRead + " " + auth.ScopePublish})
	m.tokAReadOnly = mintTok(t, env.key, auth.Claims{Tenant: tenantA})
	m.tokB = mintTok(t, env.key, auth.Claims{Tenant: tenantB, Scope: auth.ScopeRead + " " + auth.ScopePublish})
	m.forged = mintTok(t, []byte("not-the-signing-key-0123456789"), auth.Claims{Tenant: tenantA, Scope: auth.ScopePublish})
	m.expired = mintTok(t, env.key, auth.Claims{Tenant: tenantA, Scope: auth.ScopePublish, Expiry: time.Now().Add(-time.Minute).Unix()})

	// Tenant A's own paths work: it publishes over NATS with its token,
	// and reads its view over HTTP.
	var err error
	if m.ncA, err = agentConn(env, tenantA, m.tokA, nil); err != nil {
		t.Fatalf("tenant A's agent cannot connect: %v", err)
	}
	defer m.ncA.Close()
	publishAll(t, m.ncA, tenantA, m.threadA, runEvents(m.threadA, "r1", m.secret))
	testsupport.WaitFor(t, 20*time.Second, "tenant A's view", func() bool {
		code, b := httpDo(t, "GET", m.viewURL, m.tokA, "", 5*time.Second)
		return code == 200 && strings.Contains(b, m.secret) && strings.Contains(b, `"status":"finished"`)
	})
	lastBefore, msgsBefore := streamState(t, env)

	t.Run("nats/connect", m.connect)

	m.errsB = &errLog{}
	if m.ncB, err = agentConn(env, tenantB, m.tokB, m.errsB); err != nil {
		t.Fatalf("tenant B's agent cannot connect (positive control): %v", err)
	}
	defer m.ncB.Close()
	// Positive control: B publishes its own tenant's events and is acked.
	publishAll(t, m.ncB, tenantB, "b1", runEvents("b1", "r1", "globex-own"))

	t.Run("nats/publish", m.publish)
	t.Run("nats/reply", m.reply)
	t.Run("nats/subscribe", m.subscribe)
	t.Run("nats/tap-stream", m.tapStream)
	t.Run("http", m.http)

	// Nothing of A's was changed by the attempts: the stream holds every
	// event (nothing purged; only A's and B's own publishes added), and
	// A's view never saw an attack.
	last, msgs := streamState(t, env)
	if msgs < msgsBefore || last < lastBefore {
		t.Errorf("stream state %d msgs (last %d), before the attacks %d (last %d)", msgs, last, msgsBefore, lastBefore)
	}
	testsupport.WaitFor(t, 20*time.Second, "tenant A's view with its bridged run", func() bool {
		_, b := httpDo(t, "GET", m.viewURL, m.tokA, "", 5*time.Second)
		return strings.Contains(b, "bridged")
	})
	_, viewAfter := httpDo(t, "GET", m.viewURL, m.tokA, "", 5*time.Second)
	for _, bad := range []string{"attack", "forged", "globex"} {
		if strings.Contains(viewAfter, bad) {
			t.Errorf("tenant A's view holds %q: %.400s", bad, viewAfter)
		}
	}
	if !strings.Contains(viewAfter, m.secret) {
		t.Errorf("tenant A's view lost its data: %.400s", viewAfter)
	}
}

// connect: every credential but a valid publish token is refused at connect.
func (m *matrix) connect(t *testing.T) {
	for _, tt := range []struct{ name, tok string }{
		{"no credentials", ""}, {"forged signature", m.forged}, {"expired", m.expired},
		{"read-only token", m.tokAReadOnly}, {"garbage", "not.a.token"},
	} {
		opts := []nats.Option{nats.MaxReconnects(0), nats.Timeout(5 * time.Second), nats.Name("matrix-" + tt.name)}
		if tt.tok != "" {
			o, _ := agent.TokenAuth(tenantA, func() string { return tt.tok })
			opts = append(opts, o...)
		}
		nc, err := nats.Connect(m.env.natsURL, opts...)
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected", tt.name)
			continue
		}
		if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
			t.Errorf("%s: %v, want an authorization violation", tt.name, err)
		}
	}
	// A user and password the server does not know are no way in either.
	nc, err := nats.Connect(m.env.natsURL, nats.UserInfo("threadcast", "guess"), nats.MaxReconnects(0), nats.Timeout(5*time.Second))
	if err == nil {
		nc.Close()
		t.Error("user/password guess: connected")
	}
}

// publish: B publishes (as a request) to each subject family of A's and
// the internal and API subjects.
func (m *matrix) publish(t *testing.T) {
	for _, tt := range []struct {
		subj  string
		probe bool // the control may publish the subject itself (harmless)
	}{
		{"agui." + tenantA + "." + m.tokThread + ".events", false},
		{fmt.Sprintf("aguip.%d.%s.%s", m.part, tenantA, m.tokThread), true},
		{"view." + tenantA + "." + m.tokThread, true},
		{"tap." + tenantA + ".TEXT_MESSAGE_CONTENT." + m.tokThread, true},
		{"dlq." + tenantA + "." + m.tokThread, true},
		{fmt.Sprintf("tc.snap.%d.%s.%s", m.part, tenantA, m.tokThread), false},
		{"$JS.API.STREAM.PURGE." + m.env.cfg.Stream, false},
		{"$JS.API.STREAM.DELETE." + m.env.cfg.Stream, false},
		{"$JS.API.STREAM.INFO." + m.env.cfg.Stream, false},
		{"$JS.API.CONSUMER.CREATE." + m.env.cfg.Stream, false},
		{"$JS.API.DIRECT.GET." + m.env.cfg.Stream, false},
		// The tap stream: no consumer of A's tap, filtered or not, and
		// no read of its messages.
		{"$JS.API.CONSUMER.CREATE." + m.env.cfg.TapStream + ".x.tap." + tenantA + ".>", false},
		{"$JS.API.CONSUMER.CREATE." + m.env.cfg.TapStream, false},
		{"$JS.API.STREAM.INFO." + m.env.cfg.TapStream, false},
		{"$JS.API.STREAM.MSG.GET." + m.env.cfg.TapStream, false},
		{"$JS.API.DIRECT.GET." + m.env.cfg.TapStream, false},
		{"$JS.API.STREAM.PURGE." + m.env.cfg.TapStream, false},
		{"$KV." + m.env.cfg.Bucket + "." + tenantA + "." + m.tokThread, false},
		{"$JS.ACK." + m.env.cfg.Stream + ".c.1.1.1.1.1", true},
		{wire.AgentInboxRoot + tenantA + ".forged", true},
		{"_INBOX.forged", true},
		{"$SYS.REQ.USER.AUTH", false},
	} {
		control, err := m.env.svc.SubscribeSync(tt.subj)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.env.svc.Flush(); err != nil {
			t.Fatal(err)
		}
		attack := nats.NewMsg(tt.subj)
		attack.Data = []byte(`{"attack":true}`)
		attack.Header.Set(wire.HeaderSeq, "999999")
		attack.Header.Set(wire.HeaderPrev, "0")
		// A request: whatever answers (JetStream, ingest's snapshot
		// service) must never see it, so no reply comes.
		if _, err := m.ncB.RequestMsg(attack, quiet); err == nil {
			t.Errorf("publish %s: answered", tt.subj)
		}
		waitErr(t, m.errsB, "publish", tt.subj)
		if tt.probe {
			// Positive control: the door is live, the control sees
			// what is published to it legitimately.
			if err := m.env.svc.Publish(tt.subj, []byte("probe")); err != nil {
				t.Fatal(err)
			}
		}
		deadline := time.Now().Add(quiet)
		sawProbe := false
		for {
			m, err := control.NextMsg(time.Until(deadline))
			if err != nil {
				break
			}
			if strings.Contains(string(m.Data), "attack") {
				t.Errorf("publish %s: the attack was delivered", tt.subj)
			}
			sawProbe = sawProbe || string(m.Data) == "probe"
		}
		if tt.probe && !sawProbe {
			t.Errorf("publish %s: the control never saw its probe (the check could not fail)", tt.subj)
		}
		_ = control.Unsubscribe()
	}
	// A JetStream publish with ack into A's thread: refused, not stored.
	js, err := jetstream.New(m.ncB)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, "agui."+tenantA+"."+m.tokThread+".events", []byte(runEvents(m.threadA, "rX", "forged")[0])); err == nil {
		t.Error("JetStream publish into tenant A: acked")
	}
}

// reply: a publish B may make (its own tenant's events) with a reply
// subject of A's: NATS checks no reply subject, so JetStream's ack is the
// carrier; the agents' account keeps it from reaching A's subjects.
func (m *matrix) reply(t *testing.T) {
	for _, reply := range []string{
		"view." + tenantA + "." + m.tokThread,
		"tap." + tenantA + ".TEXT_MESSAGE_CONTENT." + m.tokThread,
		"dlq." + tenantA + "." + m.tokThread,
		fmt.Sprintf("tc.snap.%d.%s.%s", m.part, tenantA, m.tokThread),
		"$KV." + m.env.cfg.Bucket + "." + tenantA + "." + m.tokThread,
		"$JS.API.STREAM.PURGE." + m.env.cfg.Stream,
		"_INBOX.reflected",
	} {
		control, err := m.env.svc.SubscribeSync(reply)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.env.svc.Flush(); err != nil {
			t.Fatal(err)
		}
		msg := nats.NewMsg("agui." + tenantB + ".b1.events")
		msg.Reply = reply
		msg.Data = []byte(runEvents("b1", "r-reply", "globex-reply")[0])
		if err := m.ncB.PublishMsg(msg); err != nil {
			t.Fatal(err)
		}
		// Positive control: the same publish with B's own inbox as
		// the reply is acked there, so the ack is really sent.
		ack, err := m.ncB.Request("agui."+tenantB+".b1.events", []byte(runEvents("b1", "r-ctl", "globex-ctl")[0]), 5*time.Second)
		if err != nil || !strings.Contains(string(ack.Data), `"seq"`) {
			t.Fatalf("reply %s: B's own ack (positive control): %v", reply, err)
		}
		if got, err := control.NextMsg(quiet); err == nil {
			t.Errorf("reply %s: B's ack was delivered there: %s", reply, got.Data)
		}
		_ = control.Unsubscribe()
	}
}

// subscribe: B subscribes to each subject family, with a control that
// receives the family's probe.
func (m *matrix) subscribe(t *testing.T) {
	for _, tt := range []struct {
		filter string
		probe  string // a subject of the filter the control publishes to ("" none)
	}{
		{">", "matrix.probe"},
		{"agui.>", "agui." + tenantA + ".probe.x"},
		{"agui." + tenantA + ".>", "agui." + tenantA + ".probe.x"},
		{"aguip.>", "aguip.probe"},
		{"view.>", "view." + tenantA + ".probe"},
		{"view." + tenantA + ".>", "view." + tenantA + ".probe"},
		{"tap." + tenantA + ".>", "tap." + tenantA + ".X.probe"},
		{"dlq." + tenantA + ".>", "dlq." + tenantA + ".probe"},
		{"tc.snap.>", "tc.snap.probe"},
		{"$JS.API.>", "$JS.API.PROBE"},
		{"$KV.>", "$KV.PROBE.x"},
		{"$JS.ACK.>", "$JS.ACK.PROBE"},
		{"$JS.EVENT.>", "$JS.EVENT.PROBE"},
		{"_INBOX.>", "_INBOX.probe"},
		{wire.AgentInboxRoot + tenantA + ".>", wire.AgentInboxRoot + tenantA + ".probe"},
		{"$SYS.>", ""},
	} {
		control, err := m.env.svc.SubscribeSync(tt.filter)
		if err != nil {
			t.Fatal(err)
		}
		spy, err := m.ncB.SubscribeSync(tt.filter)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.ncB.Flush(); err != nil {
			t.Fatal(err)
		}
		waitErr(t, m.errsB, "subscription", tt.filter)
		if err := m.env.svc.Flush(); err != nil {
			t.Fatal(err)
		}
		if tt.probe != "" {
			if err := m.env.svc.Publish(tt.probe, []byte("probe")); err != nil {
				t.Fatal(err)
			}
			if err := m.env.svc.Flush(); err != nil {
				t.Fatal(err)
			}
			if _, err := control.NextMsg(5 * time.Second); err != nil {
				t.Errorf("subscribe %s: the control never saw its probe (the check could not fail): %v", tt.filter, err)
			}
		}
		if m, err := spy.NextMsg(quiet); err == nil {
			t.Errorf("subscribe %s: B received %q on %s", tt.filter, m.Data, m.Subject)
		}
		_ = spy.Unsubscribe()
		_ = control.Unsubscribe()
	}
	// B cannot borrow A's inbox prefix either: a connection of B's
	// token whose inbox is _INBOX_acme cannot subscribe to it.
	errs := &errLog{}
	nc, err := agentConn(m.env, tenantA, m.tokB, errs)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.SubscribeSync(wire.AgentInboxRoot + tenantA + ".x"); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	waitErr(t, errs, "subscription", wire.AgentInboxRoot+tenantA+".x")
}

// tapStream: B, with the JetStream client any NATS user has, tries to read
// A's part of the tap stream: a consumer filtered on A's tap subjects, and
// an ordered consumer of the whole stream. Both fail, and the stream has
// no consumer afterwards. (Tenants read the tap stream through
// GET /v1/tap?since=, tenant-scoped: the http doors.)
func (m *matrix) tapStream(t *testing.T) {
	js, err := jetstream.New(m.ncB)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	if c, err := js.CreateConsumer(ctx, m.env.cfg.TapStream, jetstream.ConsumerConfig{
		FilterSubject: "tap." + tenantA + ".>", AckPolicy: jetstream.AckNonePolicy,
	}); err == nil {
		t.Errorf("tenant B created a consumer on tenant A's tap subjects: %s", c.CachedInfo().Name)
	}
	if _, err := js.OrderedConsumer(ctx, m.env.cfg.TapStream, jetstream.OrderedConsumerConfig{}); err == nil {
		t.Error("tenant B created an ordered consumer on the tap stream")
	}
	svc, err := jetstream.New(m.env.svc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := svc.Stream(t.Context(), m.env.cfg.TapStream)
	if err != nil {
		t.Fatalf("the tap stream (positive control): %v", err)
	}
	if n := st.CachedInfo().State.Consumers; n != 0 {
		t.Errorf("the tap stream has %d consumers after tenant B's attempts", n)
	}
	if st.CachedInfo().State.Msgs == 0 {
		t.Error("the tap stream holds nothing of tenant A's run (positive control)")
	}
}

// http: every HTTP door with B's token, none, a forged and an expired
// one, and A's positive controls.
func (m *matrix) http(t *testing.T) {
	bridge := m.env.httpURL + "/v1/ingest/" + tenantA + "/" + m.threadA
	doors := []struct {
		name, method, url, body string
		readsA                  bool // A's token reads A's thread here (positive control)
	}{
		{"thread view", "GET", m.viewURL, "", true},
		{"events (agui)", "GET", m.viewURL + "/events", "", true},
		{"events (view)", "GET", m.viewURL + "/events?mode=view", "", true},
		{"events POST", "POST", m.viewURL + "/events", fmt.Sprintf(`{"threadId":%q,"runId":"r9","messages":[]}`, m.threadA), false},
		{"thread list", "GET", m.env.httpURL + "/v1/threads", "", true},
		{"thread list (live)", "GET", m.env.httpURL + "/v1/threads?live=1", "", false},
		{"tap", "GET", m.env.httpURL + "/v1/tap", "", false},
		{"tap replay", "GET", m.env.httpURL + "/v1/tap?since=1", "", true},
		{"bridge", "POST", bridge, strings.Join(runEvents(m.threadA, "r-attack", "attack"), "\n"), false},
	}
	for _, c := range []struct {
		name, tok string
		want      int // 0: any status, but nothing of A's
	}{
		{"tenant B", m.tokB, 0}, {"no credentials", "", 401}, {"forged signature", m.forged, 401}, {"expired", m.expired, 401},
	} {
		for _, d := range doors {
			code, body := httpDo(t, d.method, d.url, c.tok, d.body, time.Second)
			if c.want != 0 && code != c.want {
				t.Errorf("%s, %s: status %d, want %d", c.name, d.name, code, c.want)
			}
			// A thread door echoes the id in its URL (B's own, empty
			// thread of that name); only a listing must not know it.
			listing := strings.HasPrefix(d.name, "thread list")
			if strings.Contains(body, m.secret) || listing && strings.Contains(body, m.threadA) {
				t.Errorf("%s, %s: tenant A's data in the answer: %.200s", c.name, d.name, body)
			}
			if d.name == "bridge" && code/100 == 2 {
				t.Errorf("%s, bridge: accepted (%d)", c.name, code)
			}
		}
	}
	// Positive controls: A's token reads its data at each read door. A
	// stream door (the events, the tap's replay) answers 200 at once and
	// its data as it comes: on a cluster the replay's consumer may take
	// more than a second to deliver. So each control reads until A's data
	// is there, for up to 10 s.
	hasA := func(body string) bool { return strings.Contains(body, m.threadA) || strings.Contains(body, m.secret) }
	for _, d := range doors {
		if !d.readsA {
			continue
		}
		code, body := httpDoUntil(t, d.method, d.url, m.tokA, "", 10*time.Second, hasA)
		if code != 200 || !hasA(body) {
			t.Errorf("tenant A, %s: %d %.200s", d.name, code, body)
		}
	}
	// The tap: A's sees a live event of A's, B's (open at the same
	// time) does not.
	got := make(chan [2]string, 2)
	for _, tok := range []string{m.tokA, m.tokB} {
		go func() {
			_, b := httpDo(t, "GET", m.env.httpURL+"/v1/tap", tok, "", 3*time.Second)
			got <- [2]string{tok, b}
		}()
	}
	time.Sleep(500 * time.Millisecond) // both taps subscribed before the event (the tap is live only)
	secret2 := "acme-tap-" + nuid.Next()
	publishAll(t, m.ncA, tenantA, m.threadA, runEvents(m.threadA, "r2", secret2))
	for range 2 {
		r := <-got
		if r[0] == m.tokA && !strings.Contains(r[1], secret2) {
			t.Errorf("tenant A's tap missed its own event (positive control): %.300s", r[1])
		}
		if r[0] == m.tokB && strings.Contains(r[1], secret2) {
			t.Error("tenant B's tap saw tenant A's event")
		}
	}
	// A publishes over the bridge (positive control of the bridge door).
	// The token must grant the publish scope.
	if code, b := httpDo(t, "POST", bridge, m.tokA, strings.Join(runEvents(m.threadA, "r3", "bridged"), "\n"), 10*time.Second); code != 200 {
		t.Errorf("tenant A, bridge: %d %s", code, b)
	}
}
