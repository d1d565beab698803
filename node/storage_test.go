package node_test

import (
	"strings"
	"testing"
	"time"

	"github.com/threadcast/threadcast/internal/testsupport"
)

// TestNodeStorageFull: a node whose store has less free space than its
// headroom (here a headroom larger than any disk) fails /readyz with the
// reason and answers bridge requests 507 with Retry-After, at once.
func TestNodeStorageFull(t *testing.T) {
	c := testConfig(t)
	c.StoreMinFree = 1 << 60
	n, err := Start(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Stop() })
	u := n.URL()
	testsupport.WaitFor(t, 20*time.Second, "/readyz to name the full store", func() bool {
		code, b := do(t, "GET", u+"/readyz", "", "")
		return code == 503 && strings.Contains(b, "storage full") && strings.Contains(b, "bytes free")
	})
	code, b := do(t, "POST", u+"/v1/ingest/acme/th.full", token(t, "acme"), `{"type":"RUN_STARTED","threadId":"th.full","runId":"r1"}`+"\n")
	if code != 507 || !strings.Contains(b, "store-min-free") {
		t.Fatalf("bridge: %d %s; want 507 naming the headroom flag", code, b)
	}
}
