package fanout

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/wire"
)

type agentResult struct {
	Messages []struct {
		ID      string `json:"id"`
		Role    string `json:"role"`
		Content any    `json:"content"`
	} `json:"messages"`
	State any    `json:"state"`
	Error string `json:"error"`
}

// The reference AG-UI client (@ag-ui/client 1.0 HttpAgent under Node)
// POSTs a RunAgentInput to the agui endpoint, parses the SSE stream with
// its own parser, verifies and applies it: for a thread joined idle and one
// joined mid-run it accepts the stream and ends with the REST view's
// messages and state.
func TestInteropHttpAgent(t *testing.T) {
	// @ag-ui/client is the oracle's locked package set (tools/oracle).
	dir := testsupport.OracleDir(t)
	node := testsupport.Node(t)
	ns := startNATS(t)
	const parts = 8
	startIngest(t, ns, parts)
	srv, hs := newServer(t, connect(t, ns), func(c *Config) { c.Hub.Partitions = parts })
	tok := token(t, "acme")
	js, _ := jetstream.New(connect(t, ns))
	ctx := context.Background()
	pub := func(t *testing.T, thread string, evs ...string) {
		subj, _ := wire.EventSubject("acme", thread)
		for _, ev := range evs {
			if _, err := js.Publish(ctx, subj, []byte(ev)); err != nil {
				t.Fatal(err)
			}
		}
	}
	restView := func(t *testing.T, thread string) (status string, view struct {
		Messages []map[string]any `json:"messages"`
		State    any              `json:"state"`
	}) {
		code, body := do(t, "GET", hs.URL+"/v1/threads/"+thread, tok, "", nil)
		if code == http.StatusNotFound { // not ingested yet
			return "", view
		}
		var v struct {
			Status string          `json:"status"`
			View   json.RawMessage `json:"view"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &v) != nil || json.Unmarshal(v.View, &view) != nil {
			t.Fatalf("REST view: %d %.200s", code, body)
		}
		return v.Status, view
	}
	runAgent := func(t *testing.T, thread string) *exec.Cmd {
		cmd := exec.Command(node, "testdata/httpagent.cjs", dir, hs.URL+"/v1/threads/"+thread+"/events", tok, thread)
		cmd.Stdout = &bytes.Buffer{}
		cmd.Stderr = &bytes.Buffer{}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	check := func(t *testing.T, thread string, cmd *exec.Cmd) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("HttpAgent failed: %v\nstdout: %s\nstderr: %s", err, cmd.Stdout, cmd.Stderr)
			}
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("HttpAgent did not finish (the stream must end after the run's terminal event)\nstderr: %s", cmd.Stderr)
		}
		var got agentResult
		if err := json.Unmarshal(cmd.Stdout.(*bytes.Buffer).Bytes(), &got); err != nil || got.Error != "" {
			t.Fatalf("HttpAgent output %q (%v)", cmd.Stdout, err)
		}
		_, view := restView(t, thread)
		if len(got.Messages) != len(view.Messages) {
			t.Fatalf("client has %d messages, view %d\nclient: %+v\nview: %+v", len(got.Messages), len(view.Messages), got.Messages, view.Messages)
		}
		for i, m := range got.Messages {
			w := view.Messages[i]
			if m.ID != w["id"] || m.Role != w["role"] || !reflect.DeepEqual(m.Content, w["content"]) {
				t.Fatalf("message %d: client %+v, view %+v", i, m, w)
			}
		}
		if !reflect.DeepEqual(got.State, view.State) {
			t.Fatalf("state: client %v, view %v", got.State, view.State)
		}
	}

	t.Run("joined idle", func(t *testing.T) {
		pub(t, "idle-1",
			`{"type":"RUN_STARTED","threadId":"idle-1","runId":"r1"}`,
			`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Hello"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":", world"}`,
			`{"type":"TEXT_MESSAGE_END","messageId":"m1"}`,
			`{"type":"STATE_SNAPSHOT","snapshot":{"plan":["a","b"],"n":1}}`,
			`{"type":"RUN_FINISHED","threadId":"idle-1","runId":"r1"}`)
		testsupport.WaitFor(t, 10*time.Second, "run finished", func() bool { s, _ := restView(t, "idle-1"); return s == "finished" })
		check(t, "idle-1", runAgent(t, "idle-1"))
	})

	t.Run("joined mid-run", func(t *testing.T) {
		pub(t, "mid-1",
			`{"type":"RUN_STARTED","threadId":"mid-1","runId":"r1"}`,
			`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"part one"}`,
			`{"type":"STATE_SNAPSHOT","snapshot":{"step":1}}`)
		testsupport.WaitFor(t, 10*time.Second, "run started", func() bool { s, _ := restView(t, "mid-1"); return s == "running" })
		before := counterValue(srv.m.Subscribers.WithLabelValues(AguiSSE.String()))
		cmd := runAgent(t, "mid-1")
		testsupport.WaitFor(t, 10*time.Second, "the agent to subscribe", func() bool {
			return counterValue(srv.m.Subscribers.WithLabelValues(AguiSSE.String())) > before
		})
		pub(t, "mid-1",
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":", part two"}`,
			`{"type":"TEXT_MESSAGE_END","messageId":"m1"}`,
			`{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/step","value":2}]}`,
			`{"type":"RUN_FINISHED","threadId":"mid-1","runId":"r1"}`)
		check(t, "mid-1", cmd)
		if _, v := restView(t, "mid-1"); !strings.Contains(mustString(v.Messages), "part one, part two") {
			t.Fatalf("view %v", v.Messages)
		}
	})

	t.Run("two runs, joined during the second", func(t *testing.T) {
		pub(t, "two-1",
			`{"type":"RUN_STARTED","threadId":"two-1","runId":"r1"}`,
			`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"first answer"}`,
			`{"type":"TEXT_MESSAGE_END","messageId":"m1"}`,
			`{"type":"RUN_FINISHED","threadId":"two-1","runId":"r1"}`,
			`{"type":"RUN_STARTED","threadId":"two-1","runId":"r2"}`,
			`{"type":"TEXT_MESSAGE_START","messageId":"m2","role":"assistant"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m2","delta":"second"}`)
		testsupport.WaitFor(t, 10*time.Second, "second run started", func() bool { s, _ := restView(t, "two-1"); return s == "running" })
		before := counterValue(srv.m.Subscribers.WithLabelValues(AguiSSE.String()))
		cmd := runAgent(t, "two-1")
		testsupport.WaitFor(t, 10*time.Second, "the agent to subscribe", func() bool {
			return counterValue(srv.m.Subscribers.WithLabelValues(AguiSSE.String())) > before
		})
		pub(t, "two-1",
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m2","delta":" answer"}`,
			`{"type":"TEXT_MESSAGE_END","messageId":"m2"}`,
			`{"type":"RUN_FINISHED","threadId":"two-1","runId":"r2"}`)
		check(t, "two-1", cmd)
	})
}

func mustString(v any) string { b, _ := json.Marshal(v); return string(b) }
