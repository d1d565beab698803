package export

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/internal/testsupport/natstest"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/wire"
)

// The child process of TestExportKilled: an export that pauses after each
// thread, so that the parent can kill it -9 in the middle.
const (
	childEnv = "TC_EXPORT_CHILD"
	urlEnv   = "TC_EXPORT_URL"
	outEnv   = "TC_EXPORT_OUT"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

func child() int {
	nc, err := nats.Connect(os.Getenv(urlEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	cfg := killConfig(os.Getenv(outEnv))
	cfg.afterThread = func() { time.Sleep(150 * time.Millisecond) }
	if _, err := Run(context.Background(), js, cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// killConfig is the export the killed child and its rerun make: small parts,
// so that the child completes some before it is killed.
func killConfig(out string) Config {
	return Config{Tenant: "acme", Format: FormatParquet, Out: out, PartRows: 40}
}

// bus starts an embedded JetStream server with the event stream.
func bus(t testing.TB) (*natstest.Server, jetstream.JetStream) {
	t.Helper()
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.ClientURL())
	js := natstest.JetStream(t, nc)
	cfg := pipeline.DefaultConfig()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, pipeline.StreamConfig(&cfg)); err != nil {
		t.Fatal(err)
	}
	return srv, js
}

// want is what a tenant's published workload holds, counted from the
// generated events and the reference consumer's views, not by this package.
type want struct {
	runs, inputTokens, outputTokens, totalTokens int64
	messages, toolCalls, results                 int64
	views                                        map[string][]oracleMessage // thread id → its messages
}

type oracleMessage struct {
	ID         string          `json:"id"`
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"toolCallId"`
	ToolCalls  []struct {
		ID string `json:"id"`
	} `json:"toolCalls"`
}

// publish publishes threads generated streams for tenant (every third
// message a JSONL batch of two events, token usage added to each
// RUN_FINISHED) and returns what they hold. oracle is the reference
// consumer's directory, or "" to skip the views.
func publish(t *testing.T, js jetstream.JetStream, tenant string, threads int, oracle string) want {
	t.Helper()
	gen := testsupport.Streamgen(t)
	w := want{views: map[string][]oracleMessage{}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range threads {
		id := fmt.Sprintf("%s-thread-%d", tenant, i)
		if i%3 == 2 {
			id = fmt.Sprintf("%s thread/%d ✓", tenant, i) // escaped in subjects
		}
		stream := testsupport.Generate(t, gen, "--seed", fmt.Sprintf("%s-%d", tenant, i), "--events", "150", "--no-messages-snapshots")
		if oracle != "" {
			res := testsupport.RunOracle(t, oracle, stream)
			if res.Error != nil {
				t.Fatalf("generator premise: the reference rejects thread %d: %s", i, *res.Error)
			}
			var msgs []oracleMessage
			for _, raw := range res.Messages {
				var m oracleMessage
				if err := json.Unmarshal(raw, &m); err != nil {
					t.Fatal(err)
				}
				msgs = append(msgs, m)
				w.messages++
				w.toolCalls += int64(len(m.ToolCalls))
				if m.Role == "tool" {
					w.results++
				}
			}
			w.views[id] = msgs
		}
		idJSON, _ := json.Marshal(id)
		subj, err := wire.EventSubject(tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(stream)), "\n")
		var pending []string
		for n, line := range lines {
			line = strings.ReplaceAll(line, `"threadId":"thread-1"`, `"threadId":`+string(idJSON))
			switch {
			case strings.HasPrefix(line, `{"type":"RUN_STARTED"`):
				w.runs++
			case strings.HasPrefix(line, `{"type":"RUN_FINISHED"`):
				k := w.runs
				in, out := 100+7*k, 20+3*k
				usage := fmt.Sprintf(`,"usage":[{"provider":"openai","model":"gpt-x","inputTokens":%d,"outputTokens":%d}`, in, out)
				if k%2 == 0 {
					usage += fmt.Sprintf(`,{"provider":"anthropic","model":"c","inputTokens":1,"totalTokens":%d}`, k)
					w.inputTokens++
					w.totalTokens += k
				}
				line = line[:len(line)-1] + usage + "]}"
				w.inputTokens += in
				w.outputTokens += out
			}
			pending = append(pending, line)
			if n%3 == 1 && n+1 < len(lines) {
				continue // batched with the next one
			}
			if _, err := js.PublishAsync(subj, []byte(strings.Join(pending, "\n"))); err != nil {
				t.Fatal(err)
			}
			pending = pending[:0]
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal("publish acks: ", ctx.Err())
	}
	return w
}

// counts reads an export's totals with DuckDB.
func counts(t *testing.T, duck, dir, ext string) map[string]any {
	t.Helper()
	read := func(table string) string {
		if ext == "ndjson" {
			return fmt.Sprintf("read_json_auto('%s/%s-*.ndjson', format='newline_delimited')", dir, table)
		}
		return fmt.Sprintf("'%s/%s-*.parquet'", dir, table)
	}
	q := fmt.Sprintf(`SELECT
	  (SELECT count(*) FROM %[1]s)::BIGINT AS runs,
	  (SELECT count(DISTINCT (thread_id, run_id, end_seq)) FROM %[1]s)::BIGINT AS distinct_runs,
	  (SELECT sum(input_tokens) FROM %[1]s)::BIGINT AS input_tokens,
	  (SELECT sum(output_tokens) FROM %[1]s)::BIGINT AS output_tokens,
	  (SELECT sum(total_tokens) FROM %[1]s)::BIGINT AS total_tokens,
	  (SELECT count(*) FROM %[1]s WHERE tenant <> 'acme')::BIGINT AS other_runs,
	  (SELECT count(*) FROM %[2]s)::BIGINT AS messages,
	  (SELECT count(DISTINCT (thread_id, message_id)) FROM %[2]s)::BIGINT AS distinct_messages,
	  (SELECT count(*) FROM %[2]s WHERE tenant <> 'acme')::BIGINT AS other_messages,
	  (SELECT count(*) FROM %[3]s)::BIGINT AS tool_calls,
	  (SELECT count(DISTINCT (thread_id, tool_call_id)) FROM %[3]s)::BIGINT AS distinct_tool_calls,
	  (SELECT count(*) FROM %[3]s WHERE result IS NOT NULL)::BIGINT AS results,
	  (SELECT count(*) FROM %[3]s WHERE tenant <> 'acme')::BIGINT AS other_tool_calls,
	  (SELECT count(*) FROM %[1]s WHERE ended_at < started_at OR started_at < TIMESTAMPTZ '2020-01-01')::BIGINT AS bad_times`,
		read("runs"), read("messages"), read("tool_calls"))
	rows := testsupport.DuckQuery(t, duck, q)
	if len(rows) != 1 {
		t.Fatalf("duckdb: %d rows", len(rows))
	}
	return rows[0]
}

func checkCounts(t *testing.T, got map[string]any, w want) {
	t.Helper()
	str := func(n int64) string { return strconv.FormatInt(n, 10) }
	for k, v := range map[string]string{
		"runs": str(w.runs), "distinct_runs": str(w.runs),
		"input_tokens": str(w.inputTokens), "output_tokens": str(w.outputTokens), "total_tokens": str(w.totalTokens),
		"messages": str(w.messages), "distinct_messages": str(w.messages),
		"tool_calls": str(w.toolCalls), "distinct_tool_calls": str(w.toolCalls), "results": str(w.results),
		"other_runs": "0", "other_messages": "0", "other_tool_calls": "0", "bad_times": "0",
	} {
		if fmt.Sprint(got[k]) != v {
			t.Errorf("%s: DuckDB reads %v, published %s", k, got[k], v)
		}
	}
}

func TestExportReadByDuckDB(t *testing.T) {
	duck := testsupport.DuckDBDir(t)
	oracle := testsupport.OracleDir(t)
	_, js := bus(t)
	w := publish(t, js, "acme", 6, oracle)
	publish(t, js, "globex", 4, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	pq := t.TempDir()
	res, err := Run(ctx, js, Config{Tenant: "acme", Format: FormatParquet, Out: pq})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Manifest.Complete || res.Threads != 6 || res.Resumed {
		t.Fatalf("manifest %+v, %d threads, resumed %v", res.Manifest, res.Threads, res.Resumed)
	}
	checkCounts(t, counts(t, duck, pq, "parquet"), w)

	// Timestamps are timestamps to DuckDB; nulls are nulls.
	types := testsupport.DuckQuery(t, duck, fmt.Sprintf(`SELECT typeof(started_at) AS s, typeof(ended_at) AS e,
	  (SELECT typeof(first_at) FROM '%[1]s/messages-*.parquet' LIMIT 1) AS m,
	  (SELECT typeof(last_at) FROM '%[1]s/tool_calls-*.parquet' LIMIT 1) AS c,
	  (SELECT count(*) FROM '%[1]s/runs-*.parquet' WHERE total_tokens IS NULL)::BIGINT AS null_totals,
	  (SELECT count(*) FROM '%[1]s/runs-*.parquet' WHERE error IS NOT NULL AND outcome <> 'error')::BIGINT AS stray_errors
	  FROM '%[1]s/runs-*.parquet' LIMIT 1`, pq))
	for _, k := range []string{"s", "e", "m", "c"} {
		if types[0][k] != "TIMESTAMP WITH TIME ZONE" {
			t.Errorf("column %s reads as %v", k, types[0][k])
		}
	}
	if n, _ := strconv.Atoi(fmt.Sprint(types[0]["null_totals"])); n == 0 || int64(n) >= w.runs {
		t.Errorf("%v runs without total_tokens; half of the %d report none", types[0]["null_totals"], w.runs)
	}
	if types[0]["stray_errors"] != "0" {
		t.Errorf("%v runs with an error and another outcome", types[0]["stray_errors"])
	}

	// Each thread's messages, in order, are the reference consumer's.
	rows := testsupport.DuckQuery(t, duck, fmt.Sprintf(`SELECT thread_id, message_id, role, content
	  FROM '%s/messages-*.parquet' ORDER BY thread_id, position`, pq))
	got := map[string][]map[string]any{}
	for _, r := range rows {
		th := r["thread_id"].(string)
		got[th] = append(got[th], r)
	}
	for th, msgs := range w.views {
		if len(got[th]) != len(msgs) {
			t.Errorf("thread %q: %d messages, the reference has %d", th, len(got[th]), len(msgs))
			continue
		}
		for i, m := range msgs {
			g := got[th][i]
			if g["message_id"] != m.ID || g["role"] != m.Role {
				t.Errorf("thread %q message %d: %v/%v, the reference has %s/%s", th, i, g["message_id"], g["role"], m.ID, m.Role)
			}
			var text string
			if json.Unmarshal(m.Content, &text) == nil && g["content"] != text {
				t.Errorf("thread %q message %s: content %q, the reference has %q", th, m.ID, g["content"], text)
			}
		}
	}

	// NDJSON: the same rows.
	nd := t.TempDir()
	if _, err := Run(ctx, js, Config{Tenant: "acme", Format: FormatNDJSON, Out: nd}); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, counts(t, duck, nd, "ndjson"), w)
	diff := testsupport.DuckQuery(t, duck, fmt.Sprintf(`SELECT count(*)::BIGINT AS n FROM (
	  SELECT thread_id, message_id, content, first_seq, last_seq, epoch_us(first_at) FROM '%[1]s/messages-*.parquet'
	  EXCEPT ALL
	  SELECT thread_id, message_id, content, first_seq, last_seq, epoch_us(first_at::TIMESTAMPTZ)
	  FROM read_json_auto('%[2]s/messages-*.ndjson', format='newline_delimited'))`, pq, nd))
	if diff[0]["n"] != "0" {
		t.Errorf("%v messages of the Parquet export differ in the NDJSON one", diff[0]["n"])
	}

	// A complete export run again does nothing.
	again, err := Run(ctx, js, Config{Tenant: "acme", Format: FormatParquet, Out: pq})
	if err != nil || !again.Resumed || again.Threads != 0 {
		t.Fatalf("rerun of a complete export: %+v, %v", again, err)
	}
}

// TestExportKilled kills an export -9 after its first part, runs it again,
// and checks that DuckDB reads the same rows as from an export never
// interrupted: none twice, none missing.
func TestExportKilled(t *testing.T) {
	duck := testsupport.DuckDBDir(t)
	srv, js := bus(t)
	w := publish(t, js, "acme", 9, "")
	publish(t, js, "globex", 3, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	whole := t.TempDir()
	if _, err := Run(ctx, js, killConfig(whole)); err != nil {
		t.Fatal(err)
	}

	killed := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", urlEnv+"="+srv.ClientURL(), outEnv+"="+killed)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill it once a part is recorded and the next part is being written.
	testsupport.WaitFor(t, 30*time.Second, "a part and the next one's files", func() bool {
		m, _, _ := readManifest(killed)
		tmp, _ := filepath.Glob(filepath.Join(killed, "*.parquet"+tmpSuffix))
		return m != nil && len(m.Parts) >= 1 && len(tmp) > 0
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	m, _, err := readManifest(killed)
	if err != nil || m.Complete {
		t.Fatalf("the killed export's manifest: %+v, %v", m, err)
	}
	t.Logf("killed after %d parts", len(m.Parts))

	res, err := Run(ctx, js, killConfig(killed))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Resumed || !res.Manifest.Complete || res.Threads == 0 || res.Threads >= 9 {
		t.Fatalf("rerun: resumed %v, complete %v, %d threads folded", res.Resumed, res.Manifest.Complete, res.Threads)
	}
	checkCounts(t, counts(t, duck, killed, "parquet"), want{
		runs: w.runs, inputTokens: w.inputTokens, outputTokens: w.outputTokens, totalTokens: w.totalTokens,
		messages: countRows(t, duck, whole, "messages"), toolCalls: countRows(t, duck, whole, "tool_calls"),
		results: countResults(t, duck, whole),
	})
	for _, table := range Tables {
		q := fmt.Sprintf(`SELECT
		  (SELECT count(*) FROM (SELECT * FROM '%[1]s/%[3]s-*.parquet' EXCEPT ALL SELECT * FROM '%[2]s/%[3]s-*.parquet'))::BIGINT AS extra,
		  (SELECT count(*) FROM (SELECT * FROM '%[2]s/%[3]s-*.parquet' EXCEPT ALL SELECT * FROM '%[1]s/%[3]s-*.parquet'))::BIGINT AS missing`,
			killed, whole, table)
		r := testsupport.DuckQuery(t, duck, q)[0]
		if r["extra"] != "0" || r["missing"] != "0" {
			t.Errorf("%s: %v rows more and %v fewer than the uninterrupted export", table, r["extra"], r["missing"])
		}
	}
}

func countRows(t *testing.T, duck, dir, table string) int64 {
	r := testsupport.DuckQuery(t, duck, fmt.Sprintf(`SELECT count(*)::BIGINT AS n FROM '%s/%s-*.parquet'`, dir, table))
	n, _ := strconv.ParseInt(fmt.Sprint(r[0]["n"]), 10, 64)
	return n
}

func countResults(t *testing.T, duck, dir string) int64 {
	r := testsupport.DuckQuery(t, duck, fmt.Sprintf(`SELECT count(*)::BIGINT AS n FROM '%s/tool_calls-*.parquet' WHERE result IS NOT NULL`, dir))
	n, _ := strconv.ParseInt(fmt.Sprint(r[0]["n"]), 10, 64)
	return n
}
