package wire

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/internal/testsupport/natstest"
)

// startNATS runs an embedded nats-server (no JetStream: parts are core
// NATS) with the given max payload.
func startNATS(t testing.TB, maxPayload int32) *natstest.Server {
	t.Helper()
	return natstest.Start(t, natstest.NoJetStream, natstest.MaxPayload(maxPayload))
}

func connect(t testing.TB, ns *natstest.Server) *nats.Conn {
	t.Helper()
	return natstest.Connect(t, ns.ClientURL())
}

func randomBody(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 7))
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

// recorder keeps copies of what it is asked to publish, as a connection
// would send them.
type recorder struct{ msgs []*nats.Msg }

func (r *recorder) PublishMsg(m *nats.Msg) error {
	h := nats.Header{}
	for k, v := range m.Header {
		h[k] = append([]string(nil), v...)
	}
	r.msgs = append(r.msgs, &nats.Msg{Subject: m.Subject, Reply: m.Reply, Header: h, Data: append([]byte(nil), m.Data...)})
	return nil
}

// TestPartsOverNATS sends bodies around the part size through a server
// whose max payload is 8 KiB, so that every body above it could not travel
// as one message, and checks each arrives whole, equal, with its headers
// and without the part headers.
func TestPartsOverNATS(t *testing.T) {
	ns := startNATS(t, 8<<10)
	pubc, subc := connect(t, ns), connect(t, ns)
	size := PartSize(pubc.MaxPayload())
	if size != 8<<10-HeaderRoom {
		t.Fatalf("PartSize(%d) = %d", pubc.MaxPayload(), size)
	}
	sub, err := subc.SubscribeSync("view.acme.t1")
	if err != nil {
		t.Fatal(err)
	}
	if err := subc.Flush(); err != nil {
		t.Fatal(err)
	}
	lens := []int{0, 1, size - 1, size, size + 1, 2 * size, 2*size + 1, 1 << 20}
	for i, n := range lens {
		body := randomBody(n)
		hdr := nats.Header{"Tc-Seq": {strconv.Itoa(i + 1)}, "Tc-Prev": {strconv.Itoa(i)}}
		if err := Publish(pubc, &nats.Msg{Subject: "view.acme.t1", Header: hdr, Data: body}, size); err != nil {
			t.Fatalf("len %d: %v", n, err)
		}
		if len(hdr) != 2 {
			t.Fatalf("Publish changed the caller's header: %v", hdr)
		}
	}
	var asm Assembler
	for i, n := range lens {
		var got *nats.Msg
		msgs := 0
		for got == nil {
			m, err := sub.NextMsg(5 * time.Second)
			if err != nil {
				t.Fatalf("len %d: %v", n, err)
			}
			msgs++
			if got, err = asm.Add(m); err != nil {
				t.Fatalf("len %d: %v", n, err)
			}
		}
		if want := Parts(n, size); msgs != want {
			t.Errorf("len %d: %d messages, want %d", n, msgs, want)
		}
		if msgs == 1 && got.Header.Get(HeaderPart) != "" {
			t.Errorf("len %d: a whole message carries %s", n, HeaderPart)
		}
		if !bytes.Equal(got.Data, randomBody(n)) {
			t.Errorf("len %d: body differs (%d bytes)", n, len(got.Data))
		}
		if got.Header.Get("Tc-Seq") != strconv.Itoa(i+1) || got.Header.Get("Tc-Prev") != strconv.Itoa(i) ||
			got.Header.Get(HeaderPart) != "" || got.Header.Get(HeaderPartBytes) != "" {
			t.Errorf("len %d: header %v", n, got.Header)
		}
	}
	if asm.Pending() {
		t.Error("assembler still holds a message")
	}
}

// TestPublishTooLargeWithoutParts shows why parts exist: the same body
// sent as one message is refused by the connection.
func TestPublishTooLargeWithoutParts(t *testing.T) {
	ns := startNATS(t, 8<<10)
	nc := connect(t, ns)
	err := Publish(nc, &nats.Msg{Subject: "x", Data: make([]byte, 16<<10)}, 1<<20)
	if !errors.Is(err, nats.ErrMaxPayload) {
		t.Fatalf("got %v, want nats.ErrMaxPayload", err)
	}
	if err := Publish(nc, &nats.Msg{Subject: "x", Data: make([]byte, 16<<10)}, PartSize(nc.MaxPayload())); err != nil {
		t.Fatal(err)
	}
}

func split(t *testing.T, subject string, hdr nats.Header, body []byte, size int) []*nats.Msg {
	t.Helper()
	var r recorder
	if err := Publish(&r, &nats.Msg{Subject: subject, Header: hdr, Data: body}, size); err != nil {
		t.Fatal(err)
	}
	return r.msgs
}

// TestAssemblerDiscards feeds the assembler damaged part sequences: each
// must discard the message whole (never hand out a partial body), report
// why, and go on assembling the next message.
func TestAssemblerDiscards(t *testing.T) {
	body := randomBody(5000)
	hdr := nats.Header{"Tc-Seq": {"7"}}
	parts := func() []*nats.Msg { return split(t, "s", hdr, body, 1000) } // 5 parts
	other := split(t, "s", nats.Header{"Tc-Seq": {"9"}}, randomBody(3000), 1000)
	whole := &nats.Msg{Subject: "s", Header: nats.Header{"Tc-Seq": {"8"}}, Data: []byte("whole")}
	tests := []struct {
		name string
		give func() []*nats.Msg
		want error
	}{
		{"lost middle part", func() []*nats.Msg { p := parts(); return append(p[:2:2], p[3:]...) }, ErrPartLost},
		{"lost first part", func() []*nats.Msg { return parts()[1:] }, ErrPartLost},
		{"swapped parts", func() []*nats.Msg { p := parts(); p[1], p[2] = p[2], p[1]; return p }, ErrPartLost},
		{"lost last part, whole message next", func() []*nats.Msg { p := parts(); return append(p[:4:4], whole) }, ErrPartLost},
		{"lost last part, next message in parts", func() []*nats.Msg { p := parts(); return append(p[:4:4], other...) }, ErrPartLost},
		{"part of another message", func() []*nats.Msg { p := parts(); return append(p[:2:2], other[1]) }, ErrPartLost},
		{"bad index", func() []*nats.Msg { p := parts(); p[1].Header.Set(HeaderPart, "x/5"); return p }, ErrBadPart},
		{"index past count", func() []*nats.Msg { p := parts(); p[1].Header.Set(HeaderPart, "5/5"); return p }, ErrBadPart},
		{"bad length", func() []*nats.Msg { p := parts(); p[0].Header.Set(HeaderPartBytes, "-1"); return p }, ErrBadPart},
		{"longer than announced", func() []*nats.Msg { p := parts(); p[4].Data = append(p[4].Data, 'x'); return p }, ErrBadPart},
		{"shorter than announced", func() []*nats.Msg { p := parts(); p[4].Data = p[4].Data[:1]; return p }, ErrBadPart},
		{"changed header", func() []*nats.Msg { p := parts(); p[3].Header.Set("Tc-Seq", "6"); return p }, ErrPartLost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var asm Assembler
			var errs []error
			for _, m := range tt.give() {
				got, err := asm.Add(m)
				if err != nil {
					errs = append(errs, err)
				}
				if got != nil && got.Header.Get("Tc-Seq") == "7" {
					t.Fatalf("a damaged message was handed out (%d bytes)", len(got.Data))
				}
			}
			if len(errs) == 0 || !errors.Is(errs[0], tt.want) {
				t.Fatalf("errors %v, want %v first", errs, tt.want)
			}
			// Recovers: the next message comes through whole.
			var got *nats.Msg
			for _, m := range parts() {
				var err error
				if got, err = asm.Add(m); err != nil && got == nil && !errors.Is(err, ErrPartLost) {
					t.Fatal(err)
				}
			}
			if got == nil || !bytes.Equal(got.Data, body) {
				t.Fatal("the message after the damage did not come through")
			}
		})
	}
}

// TestAssemblerWholeAfterLoss: a whole message that arrives while one is in
// assembly is handed out, and the loss reported with it.
func TestAssemblerWholeAfterLoss(t *testing.T) {
	var asm Assembler
	p := split(t, "s", nil, randomBody(3000), 1000)
	if got, err := asm.Add(p[0]); got != nil || err != nil {
		t.Fatal(got, err)
	}
	w := &nats.Msg{Subject: "s", Data: []byte("error reply")}
	got, err := asm.Add(w)
	if got != w || !errors.Is(err, ErrPartLost) {
		t.Fatalf("got %v, %v", got, err)
	}
}

// TestAssemblerInterleavedSubjects: a wildcard subscription (the tap) gets
// other subjects' messages between one message's parts. PendingOn names
// the subjects with a message begun and not yet ended after each part.
func TestAssemblerInterleavedSubjects(t *testing.T) {
	a, b := randomBody(3000), randomBody(2500)
	pa, pb := split(t, "tap.x.A.t1", nil, a, 1000), split(t, "tap.x.A.t2", nil, b, 1000)
	small := &nats.Msg{Subject: "tap.x.B.t3", Data: []byte("{}")}
	order := []*nats.Msg{pa[0], pb[0], small, pa[1], pb[1], pb[2], pa[2]}
	pending := []string{"t1", "t1 t2", "t1 t2", "t1 t2", "t1 t2", "t1", ""}
	var asm Assembler
	var got [][]byte
	for i, m := range order {
		w, err := asm.Add(m)
		if err != nil {
			t.Fatal(err)
		}
		if w != nil {
			got = append(got, w.Data)
		}
		var on []string
		for _, subj := range []string{"tap.x.A.t1", "tap.x.A.t2", "tap.x.B.t3"} {
			if asm.PendingOn(subj) {
				on = append(on, subj[len("tap.x.A."):])
			}
		}
		if strings.Join(on, " ") != pending[i] {
			t.Errorf("after message %d: pending on %q, want %q", i, on, pending[i])
		}
	}
	if len(got) != 3 || !bytes.Equal(got[0], small.Data) || !bytes.Equal(got[1], b) || !bytes.Equal(got[2], a) {
		t.Fatalf("got %d messages", len(got))
	}
}

func TestAssemblerLimits(t *testing.T) {
	asm := Assembler{Max: 2999}
	p := split(t, "s", nil, randomBody(3000), 1000)
	for i, m := range p {
		got, err := asm.Add(m)
		want := ErrPartLost
		if i == 0 {
			want = ErrTooLarge
		}
		if got != nil || !errors.Is(err, want) {
			t.Fatalf("part %d: %v, %v; want %v", i, got, err, want)
		}
	}
	open := Assembler{MaxOpen: 2}
	for i, subj := range []string{"a", "b", "c"} {
		_, err := open.Add(split(t, subj, nil, randomBody(3000), 1000)[0])
		if (i == 2) != errors.Is(err, ErrPartLost) {
			t.Fatalf("subject %d of MaxOpen 2: %v", i, err)
		}
	}
}

// TestRequest answers requests with Publish on a server with a small max
// payload: small replies and replies in parts arrive whole.
// requesters are the two ways to make a request whose reply may come in
// parts: a subscription of its own (Request) and a Requester's shared one.
// Each case gets its own Requester, closed when the test ends.
func requesters(t *testing.T, nc *nats.Conn) map[string]func(ctx context.Context, subject string, body []byte, max int) (*nats.Msg, error) {
	r := NewRequester(nc)
	t.Cleanup(func() { _ = r.Close() })
	return map[string]func(context.Context, string, []byte, int) (*nats.Msg, error){
		"own": func(ctx context.Context, subject string, body []byte, max int) (*nats.Msg, error) {
			return Request(ctx, nc, subject, body, max)
		},
		"shared": r.Request,
	}
}

func TestRequest(t *testing.T) {
	ns := startNATS(t, 8<<10)
	resp := connect(t, ns)
	size := PartSize(resp.MaxPayload())
	sub, err := resp.Subscribe("tc.snap.>", func(m *nats.Msg) {
		n, _ := strconv.Atoi(string(m.Data))
		_ = Publish(resp, &nats.Msg{Subject: m.Reply, Header: nats.Header{"Tc-Seq": {"42"}}, Data: randomBody(n)}, size)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	silent, _ := resp.Subscribe("silent", func(*nats.Msg) {})
	defer silent.Unsubscribe()
	if err := resp.Flush(); err != nil {
		t.Fatal(err)
	}
	req := connect(t, ns)
	for name, request := range requesters(t, req) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, n := range []int{10, size + 1, 3 << 20} {
				m, err := request(ctx, "tc.snap.1", []byte(strconv.Itoa(n)), 4<<20)
				if err != nil {
					t.Fatalf("len %d: %v", n, err)
				}
				if !bytes.Equal(m.Data, randomBody(n)) || m.Header.Get("Tc-Seq") != "42" {
					t.Fatalf("len %d: %d bytes, header %v", n, len(m.Data), m.Header)
				}
			}
			if _, err := request(ctx, "tc.snap.1", []byte(strconv.Itoa(5<<20)), 4<<20); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("over the limit: %v", err)
			}
			if _, err := request(ctx, "nobody.here", nil, 0); !errors.Is(err, nats.ErrNoResponders) {
				t.Fatalf("no responders: %v", err)
			}
			short, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel2()
			if _, err := request(short, "silent", nil, 0); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("silent responder: %v", err)
			}
		})
	}
	// Request leaves no subscription behind; the Requester keeps its one
	// until closed.
	if n := req.NumSubscriptions(); n != 1 {
		t.Errorf("%d reply subscriptions, want the Requester's 1", n)
	}
}

// TestRequesterConcurrent: many requests at once on one Requester, their
// replies in windows of parts interleaved on its one subscription, each
// get their own reply whole; Close ends a request still waiting, and
// refuses new ones.
func TestRequesterConcurrent(t *testing.T) {
	ns := startNATS(t, 8<<10)
	resp, req := connect(t, ns), connect(t, ns)
	r, err := NewResponder(resp, ResponderConfig{Window: 12 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	serve(t, resp, "snap", func(reply string, body []byte) error {
		return r.Respond(reply, nats.Header{"Tc-Seq": {"9"}}, body)
	})
	rq := NewRequester(req)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		n := []int{5, 3000, 12<<10 + 1, 100 << 10}[i%4] + i
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := rq.Request(ctx, "snap", []byte(strconv.Itoa(n)), 0)
			if err != nil {
				t.Errorf("len %d: %v", n, err)
				return
			}
			if !bytes.Equal(m.Data, randomBody(n)) || m.Header.Get("Tc-Seq") != "9" {
				t.Errorf("len %d: %d bytes, header %v", n, len(m.Data), m.Header)
			}
		}()
	}
	wg.Wait()
	if n := req.NumSubscriptions(); n != 1 {
		t.Errorf("%d subscriptions for 64 requests, want 1", n)
	}
	rq.mu.Lock()
	left := len(rq.waiting)
	rq.mu.Unlock()
	if left != 0 {
		t.Errorf("%d requests still registered", left)
	}

	silent, _ := resp.Subscribe("silent", func(*nats.Msg) {})
	defer silent.Unsubscribe()
	_ = resp.Flush()
	waited := make(chan error, 1)
	go func() {
		_, err := rq.Request(ctx, "silent", nil, 0)
		waited <- err
	}()
	testsupport.WaitFor(t, 5*time.Second, "the request registered", func() bool {
		rq.mu.Lock()
		defer rq.mu.Unlock()
		return len(rq.waiting) == 1
	})
	if err := rq.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; !errors.Is(err, ErrRequesterClosed) {
		t.Fatalf("waiting request after Close: %v, want ErrRequesterClosed", err)
	}
	if _, err := rq.Request(ctx, "snap", []byte("5"), 0); !errors.Is(err, ErrRequesterClosed) {
		t.Fatalf("request after Close: %v, want ErrRequesterClosed", err)
	}
	if n := req.NumSubscriptions(); n != 0 {
		t.Errorf("%d subscriptions after Close", n)
	}
}

// TestWholeCostsNothing: the common case — a message that fits — is
// published and received without an allocation of the transport's.
func TestWholeCostsNothing(t *testing.T) {
	m := &nats.Msg{Subject: "s", Header: nats.Header{"Tc-Seq": {"1"}}, Data: make([]byte, 512)}
	var nop nopPublisher
	var asm Assembler
	if n := testing.AllocsPerRun(100, func() {
		if err := Publish(nop, m, 1024); err != nil {
			t.Fatal(err)
		}
		if got, err := asm.Add(m); got != m || err != nil {
			t.Fatal(got, err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per whole message", n)
	}
}

type nopPublisher struct{}

func (nopPublisher) PublishMsg(*nats.Msg) error { return nil }
