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

// TestNodeBridgeBatchesFitMaxMsgSize: with a max message size below the
// publisher's default batch size (and the server's max_payload, which is
// at least 1 MiB), the bridge's batches still fit in one stream message:
// a body of many small events, larger than the limit in all, is stored.
func TestNodeBridgeBatchesFitMaxMsgSize(t *testing.T) {
	c := testConfig(t)
	c.Pipeline.MaxMsgSize = 16 << 10
	n, err := Start(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Stop() })
	const events = 400
	var body strings.Builder
	body.WriteString(`{"type":"RUN_STARTED","threadId":"th.b","runId":"r1"}` + "\n")
	body.WriteString(`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}` + "\n")
	for range events - 4 {
		body.WriteString(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"` + strings.Repeat("x", 200) + `"}` + "\n")
	}
	body.WriteString(`{"type":"TEXT_MESSAGE_END","messageId":"m1"}` + "\n")
	body.WriteString(`{"type":"RUN_FINISHED","threadId":"th.b","runId":"r1"}` + "\n")
	code, b := do(t, "POST", n.URL()+"/v1/ingest/acme/th.b", token(t, "acme"), body.String())
	var resp struct {
		Accepted    int `json:"accepted"`
		FailedCount int `json:"failedCount"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(b), &resp) != nil || resp.Accepted != events || resp.FailedCount != 0 {
		t.Fatalf("%d %.300s; want 200 with all %d events accepted", code, b, events)
	}
}
