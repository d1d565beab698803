package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/threadcast/threadcast/internal/testsupport"
)

// TestServeDevTokensOnTheBus: the development tokens `threadcast serve`
// prints are an agent's NATS credential too: `threadcast publish --token`
// and a plain token connection as `nats pub --token` makes (no inbox
// prefix, no subscription) publish into their tenant; a connection without
// a token is refused.
func TestServeDevTokensOnTheBus(t *testing.T) {
	_, flags := freeFlags(t)
	s := startServer(t, nil, append(flags, "--demo=false")...)
	var natsURL string
	for _, l := range strings.Split(s.stdout.String(), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "NATS:" {
			natsURL = f[1]
		}
	}
	if !strings.Contains(s.stdout.String(), "agents:     nats pub --server "+natsURL+" --token <dev token> agui.<tenant>.<thread>.events") {
		t.Errorf("no agents line naming %s in %q", natsURL, s.stdout)
	}
	tok := s.tokens["acme"]
	if natsURL == "" || tok == "" {
		t.Fatalf("no NATS URL or acme dev token in %q", s.stdout)
	}
	if nc, err := nats.Connect(natsURL, nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Error("an anonymous client connected to the embedded server")
	}

	var stdout, stderr bytes.Buffer
	ev := `{"type":"RUN_STARTED","threadId":"viacli","runId":"r1"}` + "\n" + `{"type":"RUN_FINISHED","threadId":"viacli","runId":"r1"}`
	if code := run([]string{"publish", "--nats-url", natsURL, "--token", tok, "--tenant", "acme", "--thread", "viacli"}, strings.NewReader(ev), &stdout, &stderr); code != exitOK {
		t.Fatalf("threadcast publish --token: exit %d: %s", code, stderr.String())
	}

	errs := make(chan error, 4)
	nc, err := nats.Connect(natsURL, nats.Token(tok), nats.MaxReconnects(0),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	if err != nil {
		t.Fatalf("a token connection (nats pub --token): %v", err)
	}
	defer nc.Close()
	if err := nc.Publish("agui.acme.viapub.events", []byte(`{"type":"RUN_STARTED","threadId":"viapub","runId":"r1"}`)); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		t.Fatalf("nats pub --token: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	testsupport.WaitFor(t, 20*time.Second, "both threads listed", func() bool {
		ids := s.threads(t, tok)
		return slices.Contains(ids, "viacli") && slices.Contains(ids, "viapub")
	})
	if code := s.stop(t, 30*time.Second); code != exitOK {
		t.Errorf("exit %d\nstderr:\n%s", code, s.stderr)
	}
}
