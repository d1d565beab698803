//go:build otlp

package otelexport_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/node"
	"github.com/threadcast/threadcast/node/ingestrole"
	"github.com/threadcast/threadcast/otelexport"
)

// The Jaeger v2 binary (github.com/jaegertracing/jaeger/cmd/jaeger, built
// by scripts/test.sh) is named by THREADCAST_JAEGER; without it the test
// skips, unless THREADCAST_REQUIRE_JAEGER=1.
func jaegerBin(t *testing.T) string {
	bin := os.Getenv("THREADCAST_JAEGER")
	if bin == "" {
		if os.Getenv("THREADCAST_REQUIRE_JAEGER") == "1" {
			t.Fatal("THREADCAST_REQUIRE_JAEGER=1 but THREADCAST_JAEGER names no jaeger binary")
		}
		t.Skip("THREADCAST_JAEGER names no jaeger binary (scripts/test.sh builds one)")
	}
	return bin
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

type jaeger struct {
	grpc, http, query string // OTLP gRPC and HTTP endpoints, query API base URL
}

// startJaeger runs an all-in-one Jaeger on loopback ports with in-memory
// storage, and waits for its query API.
func startJaeger(t *testing.T) jaeger {
	bin := jaegerBin(t)
	g, h, q, hc := freePort(t), freePort(t), freePort(t), freePort(t)
	cfg := fmt.Sprintf(`
service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
    metrics:
      receivers: [otlp]
      exporters: [nop]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:%d
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%d
      http:
        endpoint: 127.0.0.1:%d
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
  nop:
`, hc, q, freePort(t), g, h)
	dir := t.TempDir()
	path := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "jaeger.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", "file:"+path)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("jaeger log:\n%s", b)
		}
	})
	j := jaeger{grpc: fmt.Sprintf("http://127.0.0.1:%d", g), http: fmt.Sprintf("http://127.0.0.1:%d", h), query: fmt.Sprintf("http://127.0.0.1:%d", q)}
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := http.Get(j.query + "/api/services")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return j
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("jaeger exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("jaeger's query API did not come up")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// otlpSpan is the part of a span in Jaeger's /api/v3 answer (OTLP JSON)
// that the test reads.
type otlpSpan struct {
	TraceID      string `json:"traceId"`
	SpanID       string `json:"spanId"`
	ParentSpanID string `json:"parentSpanId"`
	Name         string `json:"name"`
	Start        string `json:"startTimeUnixNano"`
	End          string `json:"endTimeUnixNano"`
	Attributes   []struct {
		Key   string `json:"key"`
		Value struct {
			String *string `json:"stringValue"`
			Int    *string `json:"intValue"`
			Bool   *bool   `json:"boolValue"`
		} `json:"value"`
	} `json:"attributes"`
	Status struct {
		Code    any    `json:"code"`
		Message string `json:"message"`
	} `json:"status"`
	Links []struct {
		TraceID string `json:"traceId"`
		SpanID  string `json:"spanId"`
	} `json:"links"`
}

func (s *otlpSpan) attr(k string) string {
	for _, a := range s.Attributes {
		if a.Key == k {
			switch {
			case a.Value.String != nil:
				return *a.Value.String
			case a.Value.Int != nil:
				return *a.Value.Int
			case a.Value.Bool != nil:
				return fmt.Sprint(*a.Value.Bool)
			}
		}
	}
	return ""
}

type otlpTrace struct {
	Result struct {
		ResourceSpans []struct {
			Resource struct {
				Attributes []struct {
					Key   string `json:"key"`
					Value struct {
						String string `json:"stringValue"`
					} `json:"value"`
				} `json:"attributes"`
			} `json:"resource"`
			ScopeSpans []struct {
				Spans []otlpSpan `json:"spans"`
			} `json:"scopeSpans"`
		} `json:"resourceSpans"`
	} `json:"result"`
}

// getTrace reads a trace from Jaeger's query API: nil when it has none.
func getTrace(t *testing.T, j jaeger, id string) (spans []otlpSpan, service string) {
	res, err := http.Get(j.query + "/api/v3/traces/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode == http.StatusNotFound {
		return nil, ""
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET trace %s: %s: %s", id, res.Status, body)
	}
	var tr otlpTrace
	if err := json.Unmarshal(body, &tr); err != nil {
		t.Fatalf("trace %s: %v: %s", id, err, body)
	}
	for _, rs := range tr.Result.ResourceSpans {
		for _, a := range rs.Resource.Attributes {
			if a.Key == "service.name" {
				service = a.Value.String
			}
		}
		for _, ss := range rs.ScopeSpans {
			spans = append(spans, ss.Spans...)
		}
	}
	return spans, service
}

// waitTrace polls until the trace has n spans.
func waitTrace(t *testing.T, j jaeger, id string, n int) ([]otlpSpan, string) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		spans, svc := getTrace(t, j, id)
		if len(spans) >= n {
			return spans, svc
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s: %d spans, want %d", id, len(spans), n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func traceHex(tenant, thread, run string) string {
	id := otelexport.TraceID(tenant, thread, run)
	return hex.EncodeToString(id[:])
}

// TestJaeger runs a node exporting over each protocol to a real Jaeger
// v2, publishes runs with tool calls, subagents, usage, an error run and a
// run of an excluded tenant, stops the node (the export is flushed after
// ingest drains) and reads the traces back through Jaeger's query API.
func TestJaeger(t *testing.T) {
	j := startJaeger(t)
	for _, proto := range []string{"grpc", "http"} {
		t.Run(proto, func(t *testing.T) {
			endpoint := j.grpc
			if proto == "http" {
				endpoint = j.http
			}
			thread := "t-" + proto
			ic := ingestrole.DefaultConfig()
			ic.NatsListen, ic.DataDir, ic.Bridge = "127.0.0.1:0", t.TempDir(), false
			ic.OTLP = otelexport.Config{Enabled: true, Endpoint: endpoint, Protocol: proto, AgentName: "planner",
				ServiceName: "threadcast-test", ExcludeTenants: []string{"globex"}, BatchTimeout: 100 * time.Millisecond}
			cfg := node.DefaultConfig()
			cfg.HTTP, cfg.IngestRole, cfg.Fanout, cfg.Dashboard = "127.0.0.1:0", ic, false, false
			cfg.Logger = slog.New(slog.DiscardHandler)
			n, err := node.Start(cfg)
			if err != nil {
				t.Fatal(err)
			}
			stopped := false
			defer func() {
				if !stopped {
					n.Stop()
				}
			}()
			js, err := jetstream.New(n.Conn())
			if err != nil {
				t.Fatal(err)
			}
			publish := func(tenant, thread string, events ...string) {
				subj, err := agent.Subject(tenant, thread)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range events {
					if _, err := js.Publish(context.Background(), subj, []byte(e)); err != nil {
						t.Fatal(err)
					}
				}
			}
			now := time.Now().Add(-time.Minute).UnixMilli()
			at := func(d int64) string { return fmt.Sprint(now + d) }
			publish("acme", thread,
				`{"type":"RUN_STARTED","threadId":"`+thread+`","runId":"r1","timestamp":`+at(0)+`}`,
				`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant","timestamp":`+at(10)+`}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"let me look","timestamp":`+at(20)+`}`,
				`{"type":"TEXT_MESSAGE_END","messageId":"m1","timestamp":`+at(30)+`}`,
				`{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"delegate","parentMessageId":"m1","timestamp":`+at(100)+`}`,
				`{"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{\"q\":\"secret args\"}","timestamp":`+at(110)+`}`,
				`{"type":"TOOL_CALL_END","toolCallId":"c1","timestamp":`+at(120)+`}`,
				`{"type":"SUBAGENT_STARTED","subagentRunId":"sa1","name":"researcher","parentToolCallId":"c1","timestamp":`+at(200)+`}`,
				`{"type":"TOOL_CALL_START","toolCallId":"c2","toolCallName":"search","subagentRunId":"sa1","timestamp":`+at(300)+`}`,
				`{"type":"TOOL_CALL_END","toolCallId":"c2","subagentRunId":"sa1","timestamp":`+at(310)+`}`,
				`{"type":"TOOL_CALL_RESULT","messageId":"tm2","toolCallId":"c2","content":"found","subagentRunId":"sa1","timestamp":`+at(800)+`}`,
				`{"type":"SUBAGENT_FINISHED","subagentRunId":"sa1","timestamp":`+at(900)+`}`,
				`{"type":"TOOL_CALL_RESULT","messageId":"tm1","toolCallId":"c1","content":"done","timestamp":`+at(1000)+`}`,
				`{"type":"RUN_FINISHED","threadId":"`+thread+`","runId":"r1","timestamp":`+at(2000)+`,"usage":[{"provider":"openai","model":"gpt-4o","inputTokens":120,"outputTokens":30,"cachedInputTokens":40}]}`,
				`{"type":"RUN_STARTED","threadId":"`+thread+`","runId":"r2","parentRunId":"r1","timestamp":`+at(3000)+`}`,
				`{"type":"RUN_ERROR","message":"provider down: secret text","code":"UPSTREAM_503","timestamp":`+at(3500)+`}`,
			)
			publish("globex", thread,
				`{"type":"RUN_STARTED","threadId":"`+thread+`","runId":"r1"}`,
				`{"type":"RUN_FINISHED","threadId":"`+thread+`","runId":"r1"}`)
			// Wait for ingest to have applied everything, then stop the
			// node: the runs leave with the export's flush.
			deadline := time.Now().Add(30 * time.Second)
			for n.IngestSide().(*ingestrole.Side).Lag() > 0 || !metricAtLeast(t, n, `threadcast_ingest_runs_total{outcome="error"}`, 1) {
				if time.Now().After(deadline) {
					t.Fatal("ingest did not apply the runs")
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err := n.Stop(); err != nil {
				t.Fatal(err)
			}
			stopped = true

			spans, svc := waitTrace(t, j, traceHex("acme", thread, "r1"), 4)
			if svc != "threadcast-test" {
				t.Errorf("service.name %q", svc)
			}
			byName := map[string]*otlpSpan{}
			for i := range spans {
				byName[spans[i].Name] = &spans[i]
			}
			run, del, res, search := byName["invoke_agent planner"], byName["execute_tool delegate"], byName["invoke_agent researcher"], byName["execute_tool search"]
			if run == nil || del == nil || res == nil || search == nil || len(spans) != 4 {
				names := []string{}
				for _, s := range spans {
					names = append(names, s.Name)
				}
				t.Fatalf("spans %v", names)
			}
			if run.ParentSpanID != "" || del.ParentSpanID != run.SpanID || res.ParentSpanID != del.SpanID || search.ParentSpanID != res.SpanID {
				t.Errorf("tree: run %s←%q, delegate %s←%s, researcher %s←%s, search ←%s", run.SpanID, run.ParentSpanID, del.SpanID, del.ParentSpanID, res.SpanID, res.ParentSpanID, search.ParentSpanID)
			}
			want := map[string]string{
				"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner", "gen_ai.conversation.id": thread,
				"gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": "120",
				"gen_ai.usage.output_tokens": "30", "gen_ai.usage.cache_read.input_tokens": "40", "threadcast.tenant": "acme",
				"threadcast.run.outcome": "success",
			}
			for k, v := range want {
				if got := run.attr(k); got != v {
					t.Errorf("run span %s = %q, want %q", k, got, v)
				}
			}
			if del.attr("gen_ai.operation.name") != "execute_tool" || del.attr("gen_ai.tool.name") != "delegate" || del.attr("gen_ai.tool.call.id") != "c1" {
				t.Errorf("tool span attributes %+v", del.Attributes)
			}
			if d := nanos(t, del.End) - nanos(t, del.Start); d != 900*int64(time.Millisecond) {
				t.Errorf("delegate lasted %v, want 900ms (start to result)", time.Duration(d))
			}
			if s := nanos(t, run.Start); s != now*int64(time.Millisecond) {
				t.Errorf("run started %d, want the event's %d ms", s, now)
			}
			if res.attr("gen_ai.agent.name") != "researcher" || res.attr("gen_ai.agent.id") != "sa1" {
				t.Errorf("subagent span attributes %+v", res.Attributes)
			}
			for _, s := range spans {
				for _, a := range s.Attributes {
					if a.Value.String != nil && strings.Contains(*a.Value.String, "secret") {
						t.Errorf("content exported: %s %s=%s", s.Name, a.Key, *a.Value.String)
					}
				}
			}

			errSpans, _ := waitTrace(t, j, traceHex("acme", thread, "r2"), 1)
			e := &errSpans[0]
			if e.attr("error.type") != "UPSTREAM_503" || fmt.Sprint(e.Status.Code) != "STATUS_CODE_ERROR" && fmt.Sprint(e.Status.Code) != "2" {
				t.Errorf("error run: error.type %q, status %+v", e.attr("error.type"), e.Status)
			}
			if strings.Contains(e.Status.Message, "secret") {
				t.Errorf("error message exported without --otlp-content: %q", e.Status.Message)
			}
			if len(e.Links) != 1 || !strings.EqualFold(e.Links[0].TraceID, traceHex("acme", thread, "r1")) || !strings.EqualFold(e.Links[0].SpanID, run.SpanID) {
				t.Errorf("error run links %+v, want the parent run's span %s", e.Links, run.SpanID)
			}

			if spans, _ := getTrace(t, j, traceHex("globex", thread, "r1")); len(spans) != 0 {
				t.Errorf("excluded tenant exported: %d spans", len(spans))
			}
		})
	}
}

func nanos(t *testing.T, s string) int64 {
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	return n
}

// metricAtLeast reads one sample of the node's registry.
func metricAtLeast(t *testing.T, n *node.Node, series string, min float64) bool {
	mfs, err := n.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	name, labels, _ := strings.Cut(strings.TrimSuffix(series, "}"), "{")
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			var l []string
			for _, lp := range m.Label {
				l = append(l, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
			}
			if strings.Join(l, ",") == labels && m.GetCounter().GetValue() >= min {
				return true
			}
		}
	}
	return false
}
