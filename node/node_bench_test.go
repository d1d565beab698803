package node_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/threadcast/threadcast/natsembed"
)

// BenchmarkStartReadyStop measures a node's whole life without traffic:
// Start, /readyz answering 200 (ingest's consumers bound), Stop with every
// goroutine returned — what a user waits for at `threadcast serve` and at
// Ctrl-C, beyond the embedded NATS server's own start and stop, which
// BenchmarkEmbeddedServerBaseline measures alone.
func BenchmarkStartReadyStop(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		c := DefaultConfig()
		c.HTTP, c.NatsListen, c.DataDir, c.AuthKey = "127.0.0.1:0", "127.0.0.1:0", b.TempDir(), []byte("bench-key-0123456789")
		c.Pipeline.Partitions = 16
		c.Drain = 10 * time.Second
		n, err := Start(c)
		if err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			res, err := http.Get(n.URL() + "/readyz")
			if err == nil {
				res.Body.Close()
				if res.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				b.Fatal("not ready")
			}
			time.Sleep(time.Millisecond)
		}
		if err := n.Stop(); err != nil {
			b.Fatal(err)
		}
		http.DefaultClient.CloseIdleConnections()
	}
}

// BenchmarkEmbeddedServerBaseline: the embedded NATS server with JetStream
// alone, started and shut down.
func BenchmarkEmbeddedServerBaseline(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sc := natsembed.DefaultConfig()
		sc.StoreDir = b.TempDir()
		srv, err := natsembed.Start(sc)
		if err != nil {
			b.Fatal(err)
		}
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}
