package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/internal/testsupport"
)

// TestRunQuotas: the command's quota flags reach the bridge — events/s
// refuses the event over the burst, and once the retained count (polled
// every 100 ms) reaches --quota-events-retained every request is refused
// before its body is read — and Run stops the counter with everything else.
func TestRunQuotas(t *testing.T) {
	base := testsupport.CountGoroutines()
	key := "test-key-0123456789abcdef"
	cfg, err := parseConfig([]string{
		"--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--partitions", "4", "--auth-key", key, "--log-level", "error",
		"--quota-events-per-sec", "0.001", "--quota-events-burst", "3",
		"--quota-events-retained", "2", "--quota-retained-interval", "100ms",
	}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	a := newApp(cfg, io.Discard)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	addr := "http://" + <-a.httpAddr
	<-a.natsURL
	tok, err := auth.Mint([]byte(key), auth.Claims{Tenant: "acme", Scope: auth.ScopePublish, Expiry: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	post := func(body string) (int, string, string) {
		req, _ := http.NewRequest("POST", addr+"/v1/ingest/acme/t", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("RateLimit-Policy"), string(b)
	}
	ev := `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}` + "\n"
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, _, _ := get(addr + "/readyz")
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, policy, body := post(ev + ev); code != 200 {
		t.Fatalf("first post: %d %s %s", code, policy, body)
	}
	if code, policy, body := post(ev + ev); code != 429 || policy != `"events_per_sec";q=1;w=1000` || !strings.Contains(body, `"accepted":1`) {
		t.Fatalf("over the burst: %d %s %s", code, policy, body)
	}
	for { // the stored messages (one or two) reach the retained quota at a poll
		code, policy, body := post(ev)
		if code == 429 && policy == `"events_retained";q=2` && strings.Contains(body, `"accepted":0`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never refused over events_retained: %d %s %s", code, policy, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	base.Exited(t)
}
