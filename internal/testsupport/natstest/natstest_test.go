package natstest_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/internal/testsupport/natstest"
)

// storeOne creates the stream S (subjects s.>) and stores data on s.1.
func storeOne(t *testing.T, ctx context.Context, js jetstream.JetStream, data string) {
	t.Helper()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "s.1", []byte(data)); err != nil {
		t.Fatal(err)
	}
}

// The default server has JetStream with its store in a temporary directory
// and the default max payload.
func TestStartJetStream(t *testing.T) {
	s := natstest.Start(t)
	if dir := s.JetStreamConfig().StoreDir; dir == "" {
		t.Fatal("no JetStream store")
	} else if _, err := os.Stat(dir); err != nil {
		t.Fatalf("store %s: %v", dir, err)
	}
	nc := natstest.Connect(t, s.ClientURL())
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	storeOne(t, ctx, js, "x")
	if got := nc.MaxPayload(); got != 1<<20 {
		t.Fatalf("max payload %d, want the server's default 1 MiB", got)
	}
}

func TestStartOptions(t *testing.T) {
	s := natstest.Start(t, natstest.NoJetStream, natstest.MaxPayload(4096))
	if s.JetStreamEnabled() {
		t.Fatal("JetStream enabled")
	}
	nc := natstest.Connect(t, s.ClientURL())
	if got := nc.MaxPayload(); got != 4096 {
		t.Fatalf("max payload %d, want 4096", got)
	}
	if err := nc.Publish("x", make([]byte, 4097)); !errors.Is(err, nats.ErrMaxPayload) {
		t.Fatalf("publishing over the max payload: %v", err)
	}
	// Any server option, such as users, is a function of the options.
	a := natstest.Start(t, natstest.NoJetStream, func(o *server.Options) {
		o.Users = []*server.User{{Username: "u", Password: "p"}}
	})
	if _, err := nats.Connect(a.ClientURL(), nats.MaxReconnects(0)); err == nil {
		t.Fatal("connected without credentials")
	}
	natstest.Connect(t, a.ClientURL(), nats.UserInfo("u", "p"))
}

// Restart keeps the port and the store: a client reconnects and finds the
// stream's messages.
func TestRestart(t *testing.T) {
	dir := t.TempDir()
	s := natstest.Start(t, natstest.StoreDir(dir))
	port, url := s.Port(), s.ClientURL()
	reconnected := make(chan struct{}, 1)
	nc := natstest.Connect(t, url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond),
		nats.ReconnectHandler(func(*nats.Conn) { reconnected <- struct{}{} }))
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	storeOne(t, ctx, js, "kept")
	s.Restart()
	if s.Port() != port || s.ClientURL() != url || filepath.Dir(s.JetStreamConfig().StoreDir) != dir {
		t.Fatalf("restarted at %s with store %s, was %s with %s", s.ClientURL(), s.JetStreamConfig().StoreDir, url, dir)
	}
	select {
	case <-reconnected:
	case <-ctx.Done():
		t.Fatal("the client did not reconnect")
	}
	var m *jetstream.RawStreamMsg
	testsupport.WaitForErr(t, 10*time.Second, "the stored message", func() error {
		st, err := js.Stream(ctx, "S")
		if err != nil {
			return err
		}
		m, err = st.GetMsg(ctx, 1)
		return err
	})
	if !bytes.Equal(m.Data, []byte("kept")) {
		t.Fatalf("after the restart: %q", m.Data)
	}
}
