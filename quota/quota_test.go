package quota

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func newLimiter(t *testing.T, def Limits, mod func(*Config)) *Limiter {
	t.Helper()
	c := DefaultConfig()
	c.Default = def
	if mod != nil {
		mod(&c)
	}
	l, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func exceeded(t *testing.T, err error, want Kind) *ExceededError {
	t.Helper()
	var e *ExceededError
	if !errors.As(err, &e) || !errors.Is(err, ErrExceeded) {
		t.Fatalf("err = %v, want an *ExceededError of %s", err, want)
	}
	if e.Kind != want {
		t.Fatalf("kind = %s, want %s", e.Kind, want)
	}
	return e
}

// TestTakeEvents drives the events bucket on synctest's fake clock: the
// burst passes at once, the next event waits exactly one refill interval.
func TestTakeEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, Limits{EventsPerSec: 10, EventsBurst: 5}, nil)
		for i := 0; i < 5; i++ {
			if err := l.Take("a", 1, 0); err != nil {
				t.Fatalf("event %d of the burst: %v", i, err)
			}
		}
		e := exceeded(t, l.Take("a", 1, 0), KindEvents)
		if e.RetryAfter != 100*time.Millisecond || e.Remaining != 0 || e.Limit != 10 || e.Window != time.Second {
			t.Fatalf("refusal = %+v, want retry 100ms, remaining 0, limit 10/s", e)
		}
		if err := l.Take("b", 1, 0); err != nil { // another tenant is untouched
			t.Fatalf("tenant b: %v", err)
		}
		time.Sleep(99 * time.Millisecond)
		exceeded(t, l.Take("a", 1, 0), KindEvents)
		time.Sleep(time.Millisecond)
		if err := l.Take("a", 1, 0); err != nil {
			t.Fatalf("after the refill: %v", err)
		}
		time.Sleep(time.Hour) // refills to the burst, no more
		for i := 0; i < 5; i++ {
			if err := l.Take("a", 1, 0); err != nil {
				t.Fatalf("event %d after an hour: %v", i, err)
			}
		}
		exceeded(t, l.Take("a", 1, 0), KindEvents)
	})
}

// TestTakeBothOrNeither: a refusal by the bytes bucket spends no event, and
// an amount over the burst passes on a full bucket only.
func TestTakeBothOrNeither(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, Limits{EventsPerSec: 100, EventsBurst: 2, BytesPerSec: 1000, BytesBurst: 1000}, nil)
		if err := l.Take("a", 1, 2500); err != nil { // over the burst, full bucket
			t.Fatalf("large event on a full bucket: %v", err)
		}
		e := exceeded(t, l.Take("a", 1, 10), KindBytes)
		// The bucket owes 1500 bytes: 1.51 s until 10 bytes are there.
		if e.RetryAfter != 1510*time.Millisecond {
			t.Fatalf("retry after %v, want 1.51s", e.RetryAfter)
		}
		// The refused take spent no event: one more event fits the burst of 2.
		time.Sleep(1510 * time.Millisecond)
		if err := l.Take("a", 1, 10); err != nil {
			t.Fatalf("after the bytes refill: %v", err)
		}
	})
}

func TestHolds(t *testing.T) {
	l := newLimiter(t, Limits{BodyBytesInFlight: 100, Streams: 2, Taps: 1, Threads: 2}, nil)
	tests := []struct {
		name    string
		acquire func() error
		release func()
		kind    Kind
	}{
		{"body", func() error { return l.AcquireBody("a", 60) }, func() { l.ReleaseBody("a", 60) }, KindBody},
		{"streams", func() error { return l.AcquireStream("a") }, func() { l.ReleaseStream("a") }, KindStreams},
		{"taps", func() error { return l.AcquireTap("a") }, func() { l.ReleaseTap("a") }, KindTaps},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n int
			for ; n < 10; n++ {
				if err := tt.acquire(); err != nil {
					exceeded(t, err, tt.kind)
					break
				}
			}
			if n == 0 || n == 10 {
				t.Fatalf("%d holds before the refusal", n)
			}
			tt.release()
			if err := tt.acquire(); err != nil {
				t.Fatalf("after a release: %v", err)
			}
			for i := 0; i < n; i++ {
				tt.release()
			}
		})
	}
	if u := l.Usage("a"); u.Body != 0 || u.Streams != 0 || u.Taps != 0 {
		t.Fatalf("usage after every release: %+v", u)
	}
	// Threads: distinct threads count, several streams on one thread don't.
	for i := 0; i < 3; i++ {
		if err := l.AcquireThread("a", "t1"); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.AcquireThread("a", "t2"); err != nil {
		t.Fatal(err)
	}
	exceeded(t, l.AcquireThread("a", "t3"), KindThreads)
	l.ReleaseThread("a", "t2")
	if err := l.AcquireThread("a", "t3"); err != nil {
		t.Fatalf("after t2 released: %v", err)
	}
	l.ReleaseThread("a", "t1")
	l.ReleaseThread("a", "t1")
	exceeded(t, l.AcquireThread("a", "t4"), KindThreads) // t1 still has a stream
	if err := l.AcquireBody("b", 100); err != nil {      // another tenant's quota
		t.Fatal(err)
	}
	exceeded(t, l.AcquireBody("b", 1), KindBody)
}

// TestForgetIdle: a tenant holding nothing is forgotten after IdleAfter;
// one holding a stream is kept however long.
func TestForgetIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, Limits{EventsPerSec: 1}, func(c *Config) { c.IdleAfter = time.Minute })
		_ = l.Take("idle", 1, 0)
		if err := l.AcquireStream("holder"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		for i := 0; i < 16*8; i++ { // touch every shard: forgetting is lazy
			_ = l.Take(fmt.Sprint("new", i), 1, 0)
		}
		if l.Usage("idle").Known {
			t.Fatal("an idle tenant is still known after IdleAfter")
		}
		if u := l.Usage("holder"); !u.Known || u.Streams != 1 {
			t.Fatalf("the holding tenant: %+v", u)
		}
	})
}

// TestFlood: distinct tenant names cost at most MaxTenants entries; when
// every entry holds something, a new tenant is refused, not added.
func TestFlood(t *testing.T) {
	l := newLimiter(t, Limits{EventsPerSec: 1}, func(c *Config) { c.MaxTenants = 64 })
	for i := 0; i < 100_000; i++ {
		_ = l.Take(fmt.Sprint("t", i), 1, 0)
	}
	if n := len(l.Tenants()); n > 64 {
		t.Fatalf("%d tenants kept, want ≤ 64", n)
	}
	held := 0
	for i := 0; i < 10_000; i++ {
		if l.AcquireStream(fmt.Sprint("h", i)) == nil {
			held++
		}
	}
	if held > 64 || held < 16 {
		t.Fatalf("%d tenants hold a stream, want 16..64", held)
	}
	exceeded(t, l.AcquireStream("one-more"), KindTenants)
	if n := len(l.Tenants()); n > 64 {
		t.Fatalf("%d tenants kept, want ≤ 64", n)
	}
}

func TestParseFile(t *testing.T) {
	base := DefaultConfig()
	base.Default = Limits{EventsPerSec: 100, Streams: 10}
	tests := []struct {
		name    string
		give    string
		wantErr string
		check   func(t *testing.T, c *Config)
	}{
		{name: "overrides", give: `{"default":{"taps":3},"tenants":{"acme":{"eventsPerSec":5000},"globex":{"streams":0}}}`,
			check: func(t *testing.T, c *Config) {
				if got := c.For("other"); got != (Limits{EventsPerSec: 100, Streams: 10, Taps: 3}) {
					t.Errorf("default = %+v", got)
				}
				if got := c.For("acme"); got != (Limits{EventsPerSec: 5000, Streams: 10, Taps: 3}) {
					t.Errorf("acme = %+v", got)
				}
				if got := c.For("globex"); got != (Limits{EventsPerSec: 100, Streams: 0, Taps: 3}) {
					t.Errorf("globex = %+v", got)
				}
			}},
		{name: "empty", give: `{}`, check: func(t *testing.T, c *Config) {
			if c.For("x") != base.Default {
				t.Errorf("default changed: %+v", c.For("x"))
			}
		}},
		{name: "unknown field", give: `{"tenants":{"a":{"eventsPerSecond":1}}}`, wantErr: "unknown field"},
		{name: "unknown member", give: `{"defaults":{}}`, wantErr: "unknown field"},
		{name: "negative", give: `{"tenants":{"a":{"streams":-1}}}`, wantErr: "negative"},
		{name: "not json", give: `{"default":`, wantErr: "quota file"},
		{name: "trailing", give: `{} {}`, wantErr: "trailing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			err := c.ParseFile([]byte(tt.give))
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want ErrConfig containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, &c)
		})
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{
		{Default: Limits{EventsPerSec: -1}, IdleAfter: time.Minute, MaxTenants: 1},
		{Default: Limits{Taps: -1}, IdleAfter: time.Minute, MaxTenants: 1},
		{IdleAfter: 0, MaxTenants: 1},
		{IdleAfter: time.Minute, MaxTenants: 0},
	} {
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v) = %v, want ErrConfig", c, err)
		}
	}
}

// TestSetHeaders checks the fields against the syntax of
// draft-ietf-httpapi-ratelimit-headers (a quoted policy name; q, w, qu on
// the policy; r, t on the current limit).
func TestSetHeaders(t *testing.T) {
	tests := []struct {
		give                  ExceededError
		policy, limit, retryA string
	}{
		{ExceededError{Kind: KindEvents, Limit: 100, Window: time.Second, Remaining: 0, RetryAfter: 2500 * time.Millisecond},
			`"events_per_sec";q=100;w=1`, `"events_per_sec";r=0;t=3`, "3"},
		{ExceededError{Kind: KindBytes, Limit: 1e6, Window: time.Second, Remaining: 12, RetryAfter: time.Millisecond},
			`"bytes_per_sec";q=1000000;w=1;qu="content-bytes"`, `"bytes_per_sec";r=12;t=1`, "1"},
		{ExceededError{Kind: KindBody, Limit: 4096, Remaining: 96, RetryAfter: holdRetry},
			`"body_bytes_in_flight";q=4096;qu="content-bytes"`, `"body_bytes_in_flight";r=96;t=5`, "5"},
		{ExceededError{Kind: KindStreams, Limit: 3, RetryAfter: holdRetry},
			`"streams";q=3;qu="concurrency"`, `"streams";r=0;t=5`, "5"},
		{ExceededError{Kind: KindEvents, Limit: 0.01, Window: time.Second, RetryAfter: 100 * time.Second},
			`"events_per_sec";q=1;w=100`, `"events_per_sec";r=0;t=100`, "100"},
		{ExceededError{Kind: KindRetained, Limit: 1e6, RetryAfter: holdRetry},
			`"events_retained";q=1000000`, `"events_retained";r=0;t=5`, "5"},
	}
	for _, tt := range tests {
		h := http.Header{}
		tt.give.SetHeaders(h)
		if got := h.Get("RateLimit-Policy"); got != tt.policy {
			t.Errorf("%s: RateLimit-Policy = %s, want %s", tt.give.Kind, got, tt.policy)
		}
		if got := h.Get("RateLimit"); got != tt.limit {
			t.Errorf("%s: RateLimit = %s, want %s", tt.give.Kind, got, tt.limit)
		}
		if got := h.Get("Retry-After"); got != tt.retryA {
			t.Errorf("%s: Retry-After = %s, want %s", tt.give.Kind, got, tt.retryA)
		}
	}
}

// TestWindowReplay: a Window's decisions depend only on what it is shown,
// so a second Window fed the same messages decides the same; and the
// budget per second is rate + burst.
func TestWindowReplay(t *testing.T) {
	lim := Limits{EventsPerSec: 10, EventsBurst: 5, BytesPerSec: 1000, BytesBurst: 1000}
	t0 := time.Unix(1_700_000_000, 0)
	type msg struct {
		tenant string
		at     time.Time
		events int64
		bytes  int64
	}
	var msgs []msg
	for i := 0; i < 300; i++ { // a over quota, b within it, over three seconds
		msgs = append(msgs, msg{"a", t0.Add(time.Duration(i) * 10 * time.Millisecond), 1, 10})
		if i%10 == 0 {
			msgs = append(msgs, msg{"b", t0.Add(time.Duration(i) * 10 * time.Millisecond), 1, 10})
		}
	}
	msgs = append(msgs, msg{"a", t0.Add(4 * time.Second), 1, 5000}) // alone over the bytes budget
	msgs = append(msgs, msg{"a", t0.Add(4 * time.Second), 1, 1})
	run := func() (decisions []Kind, admitted map[string]int) {
		var w Window
		admitted = map[string]int{}
		for _, m := range msgs {
			k, ok := w.Admit(lim, m.tenant, m.at, m.events, m.bytes, false)
			decisions = append(decisions, k)
			if ok {
				admitted[m.tenant]++
			}
		}
		return
	}
	d1, a1 := run()
	d2, _ := run()
	if fmt.Sprint(d1) != fmt.Sprint(d2) {
		t.Fatal("a replay decided differently")
	}
	// a: 15 per second for 3 seconds, then the large one alone; the 1-byte
	// message after it is over the bytes budget.
	if a1["a"] != 46 || a1["b"] != 30 {
		t.Fatalf("admitted %v, want a 46, b 30", a1)
	}
	if last := d1[len(d1)-1]; last != KindBytes {
		t.Fatalf("the message after the large one: %v, want bytes_per_sec", last)
	}
	var w Window
	if k, ok := w.Admit(Limits{}, "a", t0, 1e9, 1e9, false); !ok || k != 0 || w.Len() != 0 {
		t.Fatal("unlimited tenants are counted")
	}
	// Structural events pass up to twice the budget, then nothing does.
	admitted := 0
	for i := 0; i < 100; i++ {
		structural := i%2 == 0
		if _, ok := w.Admit(Limits{EventsPerSec: 10, EventsBurst: 10}, "s", t0, 1, 1, structural); ok {
			admitted++
		}
	}
	if admitted != 40 { // 20 of any kind, then structural ones up to 40
		t.Fatalf("admitted %d, want 40", admitted)
	}
}

func TestTenantLabels(t *testing.T) {
	l := NewTenantLabels(2)
	for _, tt := range []struct{ give, want string }{{"a", "a"}, {"b", "b"}, {"c", OtherTenants}, {"a", "a"}, {"d", OtherTenants}} {
		if got := l.Label(tt.give); got != tt.want {
			t.Errorf("Label(%s) = %s, want %s", tt.give, got, tt.want)
		}
	}
}

// TestWindowExhausted: Exhausted says nonzero exactly when Admit would
// refuse a structural event of the same size, and counts nothing.
func TestWindowExhausted(t *testing.T) {
	lim := Limits{EventsPerSec: 3, EventsBurst: 2, BytesPerSec: 50, BytesBurst: 50}
	t0 := time.Unix(1_700_000_000, 0)
	var w, shadow Window
	for i := 0; i < 2000; i++ {
		at := t0.Add(time.Duration(i) * 7 * time.Millisecond)
		n := int64(1 + (i*37)%40)
		structural := i%3 == 0
		k := w.Exhausted(lim, "a", at, n)
		_, wouldPass := shadow.Admit(lim, "a", at, 1, n, true)
		if (k != 0) == wouldPass {
			t.Fatalf("event %d: Exhausted %v, a structural Admit passes %v", i, k, wouldPass)
		}
		if _, ok := w.Admit(lim, "a", at, 1, n, structural); k != 0 && ok {
			t.Fatalf("event %d: exhausted (%v) but admitted", i, k)
		}
		shadow.cur = w.cur // the shadow takes w's state for the next step
		shadow.m = map[string]*windowCount{}
		for name, c := range w.m {
			cc := *c
			shadow.m[name] = &cc
		}
	}
}

// TestHoldersDoNotPinTheTable: tenants holding streams, however many sit
// at the cold end of their shard, neither stop the shard from forgetting
// the tenants behind them that hold nothing (idle, or least recently used
// when the shard is full) nor make a new tenant be refused for them.
func TestHoldersDoNotPinTheTable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, Limits{EventsPerSec: 1}, func(c *Config) {
			c.MaxTenants, c.IdleAfter = 16*10, time.Minute // 10 tenants a shard
		})
		// Names of one shard.
		shard := l.shard("x")
		var names []string
		for i := 0; len(names) < 12; i++ {
			if name := fmt.Sprint("t", i); l.shard(name) == shard {
				names = append(names, name)
			}
		}
		holders, idle, fill, late := names[:8], names[8], names[9], names[10:]
		for _, h := range holders {
			if err := l.AcquireStream(h); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Take(idle, 1, 0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		if err := l.Take(fill, 1, 0); err != nil {
			t.Fatal(err)
		}
		if l.Usage(idle).Known {
			t.Error("a tenant idle for IdleAfter behind holding tenants is still known")
		}
		// The shard full: 8 holders and 2 that hold nothing.
		for _, name := range late {
			if err := l.Take(name, 1, 0); err != nil {
				t.Fatalf("a new tenant in a shard of %d holders and others holding nothing: %v", len(holders), err)
			}
		}
		if n := len(l.Tenants()); n > 10 {
			t.Errorf("%d tenants kept, want ≤ 10", n)
		}
		for _, h := range holders {
			if u := l.Usage(h); !u.Known || u.Streams != 1 {
				t.Errorf("holder %s: %+v", h, u)
			}
		}
	})
}

// TestForgetIdleKeepsDebt: a tenant idle for IdleAfter whose bucket is not
// full again yet (a burst that takes longer than IdleAfter to refill) is
// kept: forgetting it would give it a full bucket when next seen, more
// than its rate refilled.
func TestForgetIdleKeepsDebt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, Limits{EventsPerSec: 1, EventsBurst: 1000}, func(c *Config) { c.IdleAfter = time.Minute })
		if err := l.Take("a", 1000, 0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Minute) // 120 events refilled
		for i := 0; i < 16*8; i++ { // touch every shard: forgetting is lazy
			_ = l.Take(fmt.Sprint("new", i), 1, 0)
		}
		exceeded(t, l.Take("a", 200, 0), KindEvents)
		if err := l.Take("a", 100, 0); err != nil {
			t.Fatalf("what refilled: %v", err)
		}
	})
}
