package node_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/node"
	"github.com/threadcast/threadcast/node/ingestrole"
	"github.com/threadcast/threadcast/web"
)

// A whole Threadcast in a test or a program: embedded NATS on free ports,
// ingest, fanout and the dashboard with a tenant's token, stopped in order.
func ExampleStart() {
	dir, err := os.MkdirTemp("", "threadcast-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	key := []byte("example-key-0123456789")
	tok, err := auth.Mint(key, auth.Claims{Tenant: "acme", Expiry: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		panic(err)
	}

	ic := ingestrole.DefaultConfig() // ingest, the bridge, the embedded server
	ic.NatsListen, ic.DataDir = "127.0.0.1:0", dir
	cfg := node.DefaultConfig()
	cfg.HTTP, cfg.IngestRole = "127.0.0.1:0", ic
	cfg.AuthKey = key
	cfg.DashboardTenants = []web.Tenant{{Tenant: "acme", Token: tok}}
	cfg.Logger = slog.New(slog.DiscardHandler)
	n, err := node.Start(cfg)
	if err != nil {
		panic(err)
	}
	defer n.Stop()

	// Ready once ingest has bound its consumers.
	for {
		res, err := http.Get(n.URL() + "/readyz")
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			fmt.Printf("readyz: %s", body)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Publish with n.Conn() (package agent), read with the token at
	// n.URL()+"/v1/threads/...", open the dashboard at n.URL().
	fmt.Println(n.Stop())
	// Output:
	// readyz: ok
	// <nil>
}
