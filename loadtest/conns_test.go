package main

import (
	"bufio"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/threadcast/threadcast/connlimit"
)

// The embedded system serves every simulated subscriber, all from one
// loopback address: more connections from it than the node's default cap
// per source (a quarter of its connection cap) are all served.
func TestEmbeddedServesOneSourcePastPerSourceCap(t *testing.T) {
	fds, err := connlimit.FDLimit()
	if err != nil {
		t.Fatal(err)
	}
	nodeMax, err := connlimit.Check(0, fds)
	if err != nil {
		t.Fatal(err)
	}
	perSource, err := connlimit.CheckPerSource(connlimit.AutoPerSource, nodeMax)
	if err != nil {
		t.Fatal(err)
	}
	n := min(perSource+50, nodeMax-50)
	if n <= perSource {
		t.Skipf("the open-file limit (%d) leaves no room above the per-source cap (%d of %d)", fds, perSource, nodeMax)
	}
	sys, err := startEmbedded(2, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sys.Close)
	addr := strings.TrimPrefix(sys.URL, "http://")
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		// Each connection asks once and stays open (keep-alive), so all n
		// are held at once when the last one asks.
		if _, err := c.Write([]byte("GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("connection %d of %d (per-source cap %d): %v", i, n, perSource, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("connection %d of %d (per-source cap %d): %s", i, n, perSource, resp.Status)
		}
	}
}
