package fanout

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/wire"
)

// expiringToken returns a token of tenant that, on a server whose clock is
// the returned now, expires after about in.
func expiringToken(t *testing.T, tenant string, in time.Duration) (string, func() time.Time) {
	t.Helper()
	exp := time.Now().Add(time.Hour).Unix()
	tok, err := auth.Mint(testKey, auth.Claims{Tenant: tenant, Expiry: exp})
	if err != nil {
		t.Fatal(err)
	}
	shift := time.Until(time.Unix(exp, 0)) - in
	return tok, func() time.Time { return time.Now().Add(shift) }
}

// A stream ends when its token expires, after everything queued, with the
// cursor it reached; a resume from that cursor with a fresh token gets
// exactly the rest: nothing lost, nothing twice. The expired token itself
// is then refused.
func TestStreamEndsAtTokenExpiry(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "ex")
	th.publish(t, "a;")
	short, now := expiringToken(t, "acme", 1500*time.Millisecond)
	srv, hs := newServer(t, nc, func(c *Config) { c.Now = now; c.Heartbeat = time.Hour })
	url := hs.URL + "/v1/threads/ex/events"

	c := openSSE(t, url, short, nil)
	var a aguiModel
	a.follow(t, c, th.Text, 5*time.Second)
	th.publish(t, "b;", "c;")
	a.follow(t, c, th.Text, 5*time.Second)
	var end string
	for end == "" {
		m, err := c.next()
		if err != nil {
			t.Fatalf("stream ended without an end comment: %v", err)
		}
		if m.data != "" {
			a.apply(t, m.data)
		}
		if strings.HasPrefix(m.comment, "end ") {
			end = m.comment
		}
	}
	after := c.lastID
	if want := "end reason=token_expired after=" + after; end != want || after == "" {
		t.Fatalf("end %q, want %q", end, want)
	}
	if _, err := c.next(); err == nil {
		t.Fatal("the stream went on after its end comment")
	}
	if got := counterValue(srv.m.Ended.WithLabelValues(EndTokenExpired)); got != 1 {
		t.Errorf("ended{token_expired} = %v", got)
	}
	if _, status := tryOpenSSE(t, url, short, nil); status != http.StatusUnauthorized {
		t.Errorf("the expired token reconnects: %d", status)
	}

	// What was published while the client was away comes with the resume.
	th.publish(t, "d;")
	c2 := openSSE(t, url, token(t, "acme"), http.Header{"Last-Event-Id": {after}})
	b := aguiModel{text: a.text}
	b.follow(t, c2, th.Text, 5*time.Second)
	if b.snapshots != 0 {
		t.Errorf("the resume took %d snapshots, want the ring's frames only", b.snapshots)
	}
}

// The WebSocket stream closes with StatusTokenExpired and the cursor in
// the reason text.
func TestWebSocketEndsAtTokenExpiry(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "wx")
	th.publish(t, "a;")
	short, now := expiringToken(t, "acme", 1500*time.Millisecond)
	_, hs := newServer(t, nc, func(c *Config) { c.Now = now; c.Heartbeat = time.Hour })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(hs.URL, "http") + "/v1/threads/wx/events?mode=view&access_token="
	conn, _, err := websocket.Dial(ctx, wsURL+short, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	th.publish(t, "b;")
	var last string
	for {
		_, data, err := conn.Read(ctx)
		var ce websocket.CloseError
		if errors.As(err, &ce) {
			if ce.Code != StatusTokenExpired || ce.Reason != "token_expired after=4" {
				t.Fatalf("closed with %d %q, want %d \"token_expired after=3\" (last message %s)", ce.Code, ce.Reason, StatusTokenExpired, last)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		last = string(data)
	}
	if !strings.HasPrefix(last, `{"type":"changes","seq":4,`) {
		t.Fatalf("last message before the close %s, want the change at seq 4", last)
	}
	// Resumed with a fresh token from the cursor: the next change only.
	th.publish(t, "c;")
	conn2, _, err := websocket.Dial(ctx, wsURL+token(t, "acme")+"&after=4", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.CloseNow()
	if _, data, err := conn2.Read(ctx); err != nil || string(data) != `{"type":"changes","seq":6,"prev":4,"changes":{"append":"c;"}}` {
		t.Fatalf("resumed: %s %v", data, err)
	}
}

// The tap and the live thread list end too, with an end comment: they
// deliver until their token's deadline, and end then, not before.
func TestTapEndsAtTokenExpiry(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "tx")
	th.publish(t, "a;")
	const in = 1500 * time.Millisecond
	for _, tt := range []struct {
		path    string
		publish func()
		want    string // in a data line delivered before the end
	}{
		{"/v1/tap", func() {
			_ = nc.Publish(wire.TapSubject("acme", "RUN_STARTED", "tx"), []byte(`{"n":"before-expiry"}`))
		}, "before-expiry"},
		{"/v1/threads?live=1", func() { th.publish(t, "b;") }, `"tx"`},
	} {
		t.Run(tt.path, func(t *testing.T) {
			start := time.Now()
			short, now := expiringToken(t, "acme", in)
			_, hs := newServer(t, nc, func(c *Config) { c.Now = now; c.Heartbeat = time.Hour })
			c := openSSE(t, hs.URL+tt.path, short, nil)
			tt.publish()
			delivered := false
			for {
				m, err := c.next()
				if err != nil {
					t.Fatalf("ended without the end comment: %v", err)
				}
				if strings.Contains(m.data, tt.want) {
					delivered = true
				}
				if m.comment == "end reason=token_expired" {
					break
				}
			}
			if !delivered {
				t.Errorf("nothing with %s delivered before the end", tt.want)
			}
			if d := time.Since(start); d < in {
				t.Errorf("ended %v after the token was minted, before its deadline (%v)", d, in)
			}
		})
	}
}

// An AG-UI HttpAgent's POST stream, which otherwise ends after the run's
// terminal event, ends at its token's deadline too, with the cursor.
func TestPostStreamEndsAtTokenExpiry(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "px")
	th.publish(t, "a;")
	short, now := expiringToken(t, "acme", 1500*time.Millisecond)
	_, hs := newServer(t, nc, func(c *Config) { c.Now = now; c.Heartbeat = time.Hour })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+"/v1/threads/px/events", strings.NewReader(`{"threadId":"px","runId":"r1","messages":[]}`))
	req.Header.Set("Authorization", "Bearer "+short)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST: %v %v", err, resp)
	}
	defer resp.Body.Close()
	c := &sseClient{resp: resp, br: bufio.NewReader(resp.Body), cancel: cancel}
	th.publish(t, "b;")
	var end string
	for end == "" {
		m, err := c.next()
		if err != nil {
			t.Fatalf("the POST stream ended without an end comment: %v", err)
		}
		if strings.HasPrefix(m.comment, "end ") {
			end = m.comment
		}
	}
	if want := "end reason=token_expired after=" + c.lastID; end != want || c.lastID == "" {
		t.Fatalf("end %q, want %q", end, want)
	}
}
