package node_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/quota"
)

// TestNodeQuotas: the node holds its bridge and fanout to Config.Quota —
// a tenant over its events/s is refused at the bridge with the ratelimit
// fields, over its streams at the fanout — and another tenant is not.
func TestNodeQuotas(t *testing.T) {
	c := testConfig(t)
	c.Quota.Tenants = map[string]quota.Limits{"tight": {EventsPerSec: 1, EventsBurst: 2, Streams: 1}}
	n, err := Start(c)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := n.Stop(); err != nil {
			t.Error(err)
		}
	}()
	waitReady(t, n)
	body := `{"type":"RUN_STARTED","threadId":"t","runId":"r"}` + "\n" +
		`{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}` + "\n" +
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}` + "\n"
	post := func(tenant string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, n.URL()+"/v1/ingest/"+tenant+"/t", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+mint(t, tenant))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	res, b := post("tight")
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("RateLimit-Policy") != `"events_per_sec";q=1;w=1` ||
		!strings.Contains(b, `"accepted":2`) || !strings.Contains(b, `"quota":"events_per_sec"`) {
		t.Fatalf("bridge: %d %v %s", res.StatusCode, res.Header, b)
	}
	if res, b := post("roomy"); res.StatusCode != http.StatusOK {
		t.Fatalf("another tenant: %d %s", res.StatusCode, b)
	}
	testsupport.WaitFor(t, 10*time.Second, "the view of tight/t", func() bool {
		code, _ := do(t, http.MethodGet, n.URL()+"/v1/threads/t", mint(t, "tight"), "")
		return code == http.StatusOK
	})
	stream := func() *http.Response {
		req, _ := http.NewRequest(http.MethodGet, n.URL()+"/v1/threads/t/events", nil)
		req.Header.Set("Authorization", "Bearer "+mint(t, "tight"))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := stream()
	defer first.Body.Close()
	second := stream()
	second.Body.Close()
	if first.StatusCode != http.StatusOK || second.StatusCode != http.StatusTooManyRequests ||
		second.Header.Get("RateLimit-Policy") != `"streams";q=1;qu="concurrency"` {
		t.Fatalf("fanout: %d then %d %v", first.StatusCode, second.StatusCode, second.Header)
	}
}
