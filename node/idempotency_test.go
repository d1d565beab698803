package node_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/threadcast/threadcast/internal/testsupport"
)

// TestNodeBridgeIdempotencyKey: a node's bridge honours Idempotency-Key
// (its bucket is created at start, the window is --dup-window): a retry is
// answered from the record and the view holds the message once.
func TestNodeBridgeIdempotencyKey(t *testing.T) {
	n, err := Start(testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Stop() })
	u := n.URL()
	tok := token(t, "acme")
	body := `{"type":"RUN_STARTED","threadId":"th.k","runId":"r1"}
{"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","role":"assistant","delta":"hello"}
{"type":"RUN_FINISHED","threadId":"th.k","runId":"r1"}
`
	post := func() (int, string, string) {
		req, _ := http.NewRequest("POST", u+"/v1/ingest/acme/th.k", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Idempotency-Key", `"node-key"`)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header.Get("Threadcast-Idempotent-Replay"), string(b)
	}
	c1, r1, b1 := post()
	c2, r2, b2 := post()
	if c1 != 200 || r1 != "" || c2 != 200 || r2 != "true" || b1 != b2 || !strings.Contains(b1, `"accepted":3`) {
		t.Fatalf("first %d %q %s, retry %d %q %s; want 200 twice, the retry replayed", c1, r1, b1, c2, r2, b2)
	}
	testsupport.WaitFor(t, 20*time.Second, "the view", func() bool {
		code, b := do(t, "GET", u+"/v1/threads/th.k", tok, "")
		if code != 200 {
			return false
		}
		var v struct {
			Seq  int `json:"seq"`
			View struct {
				Messages []struct {
					Content string `json:"content"`
				} `json:"messages"`
				Status string `json:"status"`
			} `json:"view"`
		}
		// Three events, three messages (a keyed event travels alone).
		return json.Unmarshal([]byte(b), &v) == nil && v.Seq == 3 && len(v.View.Messages) == 1 &&
			v.View.Messages[0].Content == "hello" && v.View.Status == "finished"
	})
}
