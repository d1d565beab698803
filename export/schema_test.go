package export

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/wire"
)

// TestSchemaColumns checks that docs/export.md documents every column of
// every table, in file order, with its Parquet type and nullability.
func TestSchemaColumns(t *testing.T) {
	doc, err := os.ReadFile(testsupport.Path(t, "docs/export.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `([a-z_]+)` \\| ([A-Z0-9]+) \\| (yes|no) \\|")
	documented := map[string][][3]string{}
	table := ""
	for _, line := range strings.Split(string(doc), "\n") {
		if name, ok := strings.CutPrefix(line, "### "); ok {
			table = name
		}
		if m := row.FindStringSubmatch(line); m != nil && table != "" {
			documented[table] = append(documented[table], [3]string{m[1], m[2], m[3]})
		}
	}
	for table, model := range map[string]any{TableRuns: RunRow{}, TableMessages: MessageRow{}, TableToolCalls: ToolCallRow{}} {
		schema := parquet.SchemaOf(model)
		var got [][3]string
		for _, f := range schema.Fields() {
			null := "no"
			if f.Optional() {
				null = "yes"
			}
			got = append(got, [3]string{f.Name(), parquetType(t, f), null})
		}
		if !equalRows(got, documented[table]) {
			t.Errorf("%s: the schema is\n%v\ndocs/export.md says\n%v", table, got, documented[table])
		}
		if cols := Columns(model); len(cols) != len(got) {
			t.Errorf("%s: Columns has %d, the schema %d", table, len(cols), len(got))
		}
	}
}

// parquetType names a leaf's type as docs/export.md does.
func parquetType(t *testing.T, f parquet.Field) string {
	lt := ""
	if l := f.Type().LogicalType(); l != nil {
		lt = l.String()
	}
	switch {
	case strings.HasPrefix(lt, "TIMESTAMP"):
		if lt != "TIMESTAMP(isAdjustedToUTC=true,unit=MICROS)" {
			t.Errorf("%s: %s, want micros adjusted to UTC", f.Name(), lt)
		}
		return "TIMESTAMP"
	case lt == "JSON":
		return "JSON"
	case lt == "STRING":
		return "STRING"
	case f.Type().Kind() == parquet.Int64 && lt == "INT(64,true)":
		return "INT64"
	}
	return "unknown " + f.Type().String() + " " + lt
}

func equalRows(a, b [][3]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestNDJSONRow(t *testing.T) {
	in, e := int64(12), "bad <thing> \"x\""
	r := RunRow{Tenant: "acme", ThreadID: "t/1", RunID: "r1", StartSeq: 3, EndSeq: 9,
		StartedAt: time.Date(2026, 12, 1, 9, 30, 0, 123456000, time.UTC).UnixMicro(), EndedAt: 0,
		Outcome: "error", Error: &e, InputTokens: &in}
	got := string(appendNDJSON(nil, r))
	want := `{"tenant":"acme","thread_id":"t/1","run_id":"r1","start_seq":3,"end_seq":9,` +
		`"started_at":"2026-12-01T09:30:00.123456Z","ended_at":"1970-01-01T00:00:00.000000Z","duration_ms":0,` +
		`"outcome":"error","error":"bad <thing> \"x\"","code":null,"events":0,"messages":0,"tool_calls":0,` +
		`"activities":0,"reasoning":0,"subagents":0,"input_tokens":12,"output_tokens":null,"total_tokens":null,` +
		`"reasoning_tokens":null,"cached_input_tokens":null,"cache_write_input_tokens":null,"usage":null}` + "\n"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	var keys []string
	dec := json.NewDecoder(strings.NewReader(got))
	tok, _ := dec.Token()
	for dec.More() && tok != nil {
		k, _ := dec.Token()
		keys = append(keys, k.(string))
		var v any
		_ = dec.Decode(&v)
	}
	if strings.Join(keys, ",") != strings.Join(Columns(RunRow{}), ",") {
		t.Errorf("keys %v, columns %v", keys, Columns(RunRow{}))
	}
}

func TestParseBound(t *testing.T) {
	ts := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		in   string
		want Bound
		err  bool
	}{
		{"", Bound{}, false},
		{"1", Bound{Seq: 1}, false},
		{"18446744073709551615", Bound{Seq: 1<<64 - 1}, false},
		{"2026-12-01T00:00:00Z", Bound{Time: ts}, false},
		{"2026-12-01T01:00:00+01:00", Bound{Time: ts}, false},
		{"0", Bound{}, true},
		{"-3", Bound{}, true},
		{"18446744073709551616", Bound{}, true},
		{"2026-12-01", Bound{}, true},
		{"yesterday", Bound{}, true},
	} {
		got, err := ParseBound(tt.in)
		if (err != nil) != tt.err || (err == nil && (got.Seq != tt.want.Seq || !got.Time.Equal(tt.want.Time))) {
			t.Errorf("ParseBound(%q) = %+v, %v", tt.in, got, err)
		}
		if err != nil && !errors.Is(err, ErrBadBound) {
			t.Errorf("ParseBound(%q): %v is not ErrBadBound", tt.in, err)
		}
		if err == nil && tt.in != "" {
			if again, _ := ParseBound(got.String()); again.Seq != got.Seq || !again.Time.Equal(got.Time) {
				t.Errorf("ParseBound(%q).String() = %q reads back as %+v", tt.in, got.String(), again)
			}
		}
	}
}

func TestConfigErrors(t *testing.T) {
	ts := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ok := Config{Tenant: "acme", Format: FormatParquet, Out: "x"}
	for _, tt := range []struct {
		name string
		edit func(*Config)
		want error
	}{
		{"tenant", func(c *Config) { c.Tenant = "Acme" }, ErrBadTenant},
		{"no tenant", func(c *Config) { c.Tenant = "" }, wire.ErrBadTenant},
		{"format", func(c *Config) { c.Format = "csv" }, ErrBadFormat},
		{"no out", func(c *Config) { c.Out = "" }, ErrOut},
		{"seqs", func(c *Config) { c.Since, c.Until = Bound{Seq: 5}, Bound{Seq: 4} }, ErrBadWindow},
		{"times", func(c *Config) { c.Since, c.Until = Bound{Time: ts}, Bound{Time: ts} }, ErrBadWindow},
	} {
		c := ok
		tt.edit(&c)
		if err := c.fill(); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	c := ok
	c.Since, c.Until = Bound{Seq: 4}, Bound{Seq: 4}
	if err := c.fill(); err != nil || c.Stream != wire.DefaultStream || c.PartRows != DefaultPartRows {
		t.Errorf("a one-seq window: %v, %+v", err, c)
	}
	if _, err := ParseFormat("ndjson"); err != nil {
		t.Error(err)
	}
}

func TestOutputDirErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := prepareDir(filepath.Join(file, "sub")); !errors.Is(err, ErrOut) {
		t.Errorf("a directory under a file: %v", err)
	}
	for name, body := range map[string]string{"garbage": "{", "version": `{"version":2}`} {
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, ManifestName), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, found, err := readManifest(d); !found || !errors.Is(err, ErrBadManifest) {
			t.Errorf("%s manifest: found %v, %v", name, found, err)
		}
	}
	// A part whose directory went away fails to commit, and leaves nothing.
	gone := filepath.Join(t.TempDir(), "gone")
	if err := os.Mkdir(gone, 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := newPart(gone, 0, FormatParquet)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(gone); err != nil {
		t.Fatal(err)
	}
	if err := p.commit(); !errors.Is(err, ErrWrite) {
		t.Errorf("commit into a removed directory: %v", err)
	}
	if err := writeManifest(gone, &Manifest{}); !errors.Is(err, ErrWrite) {
		t.Errorf("manifest into a removed directory: %v", err)
	}
	if m, found, err := readManifest(t.TempDir()); m != nil || found || err != nil {
		t.Errorf("no manifest: %v %v %v", m, found, err)
	}
	// Written, read back, and checked against each field.
	d := t.TempDir()
	cfg := Config{Tenant: "acme", Stream: "S", Format: FormatNDJSON, Out: d, Until: Bound{Seq: 9}}
	m := &Manifest{Version: manifestVersion, Tenant: "acme", Stream: "S", Format: FormatNDJSON, Until: "9", From: 1, To: 9}
	if err := writeManifest(d, m); err != nil {
		t.Fatal(err)
	}
	back, found, err := readManifest(d)
	if err != nil || !found || back.check(&cfg) != nil || back.To != 9 {
		t.Fatalf("read back: %+v %v %v", back, found, err)
	}
	for name, edit := range map[string]func(*Config){
		"tenant": func(c *Config) { c.Tenant = "globex" },
		"stream": func(c *Config) { c.Stream = "T" },
		"format": func(c *Config) { c.Format = FormatParquet },
		"since":  func(c *Config) { c.Since = Bound{Seq: 2} },
		"until":  func(c *Config) { c.Until = Bound{} },
	} {
		c := cfg
		edit(&c)
		if err := back.check(&c); !errors.Is(err, ErrManifestMismatch) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if tmp, _ := filepath.Glob(filepath.Join(d, "*"+tmpSuffix)); len(tmp) != 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
}

// A hand-made thread of three runs, for the window tests.
const windowStream = `{"type":"RUN_STARTED","threadId":"w","runId":"r1"}
{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}
{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"one"}
{"type":"TEXT_MESSAGE_END","messageId":"m1"}
{"type":"RUN_FINISHED","threadId":"w","runId":"r1"}
{"type":"RUN_STARTED","threadId":"w","runId":"r2"}
{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"f","parentMessageId":"m2"}
{"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{}"}
{"type":"TOOL_CALL_END","toolCallId":"c1"}
{"type":"RUN_FINISHED","threadId":"w","runId":"r2","usage":[{"inputTokens":3}]}
{"type":"RUN_STARTED","threadId":"w","runId":"r3"}
{"type":"TOOL_CALL_RESULT","messageId":"m3","toolCallId":"c1","content":"ok"}
{"type":"RUN_ERROR","message":"boom","code":"E1"}
{"type":"RUN_STARTED","threadId":"w","runId":"r4"}
{"type":"TEXT_MESSAGE_START","messageId":"m4","role":"assistant"}`

func TestWindow(t *testing.T) {
	_, js := bus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	subj, _ := wire.EventSubject("acme", "w")
	other, _ := wire.EventSubject("globex", "w")
	for _, line := range strings.Split(windowStream, "\n") {
		for _, s := range []string{subj, other} {
			if _, err := js.Publish(ctx, s, []byte(line)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// acme's events are the odd seqs 1..29: r1 ends at 9, r2 at 19, r3 at
	// 25; r4 (27..29) is open.
	export := func(since, until Bound) (runs, msgs, calls []map[string]any, m *Manifest) {
		t.Helper()
		out := t.TempDir()
		res, err := Run(ctx, js, Config{Tenant: "acme", Format: FormatNDJSON, Out: out, Since: since, Until: until})
		if err != nil {
			t.Fatal(err)
		}
		return readRows(t, out, TableRuns), readRows(t, out, TableMessages), readRows(t, out, TableToolCalls), res.Manifest
	}
	ids := func(rows []map[string]any, key string) string {
		var s []string
		for _, r := range rows {
			s = append(s, r[key].(string))
		}
		return strings.Join(s, ",")
	}

	runs, msgs, calls, m := export(Bound{}, Bound{})
	if ids(runs, "run_id") != "r1,r2,r3" || m.From != 1 || m.To != 30 {
		t.Errorf("whole: runs %s, window %d..%d", ids(runs, "run_id"), m.From, m.To)
	}
	if ids(msgs, "message_id") != "m1,m2,m3,m4" || ids(calls, "tool_call_id") != "c1" {
		t.Errorf("whole: messages %s, calls %s", ids(msgs, "message_id"), ids(calls, "tool_call_id"))
	}
	if r := runs[2]; r["outcome"] != "error" || r["error"] != "boom" || r["code"] != "E1" || r["end_seq"] != 25.0 {
		t.Errorf("r3: %v", r)
	}
	if c := calls[0]; c["result"] != "ok" || c["result_message_id"] != "m3" || c["last_seq"] != 23.0 || c["first_seq"] != 13.0 || c["run_id"] != "r2" {
		t.Errorf("c1: %v", c)
	}

	// Two windows split the runs; each row's last change is in its window.
	runs1, msgs1, calls1, m1 := export(Bound{}, Bound{Seq: 19})
	runs2, msgs2, calls2, m2 := export(Bound{Seq: 20}, Bound{})
	if ids(runs1, "run_id") != "r1,r2" || ids(runs2, "run_id") != "r3" || m1.To != 19 || m2.From != 20 || m2.To != 30 {
		t.Errorf("split: %s | %s, windows %d..%d and %d..%d", ids(runs1, "run_id"), ids(runs2, "run_id"), m1.From, m1.To, m2.From, m2.To)
	}
	if ids(msgs1, "message_id") != "m1,m2" || ids(msgs2, "message_id") != "m3,m4" {
		t.Errorf("split messages: %s | %s", ids(msgs1, "message_id"), ids(msgs2, "message_id"))
	}
	// c1 changed in both windows (its events, then its result): in each,
	// as it stood at that window's end.
	if len(calls1) != 1 || calls1[0]["result"] != nil || len(calls2) != 1 || calls2[0]["result"] != "ok" {
		t.Errorf("split calls: %v | %v", calls1, calls2)
	}

	// Times: until is exclusive, resolved by when the events were stored.
	stream, err := js.Stream(ctx, wire.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	at := func(seq uint64) time.Time {
		msg, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		return msg.Time
	}
	runs3, _, _, m3 := export(Bound{Time: at(3)}, Bound{Time: at(21)})
	// Stored times are not unique at this rate: the window is at least
	// 3..19 and at most 1..20, which holds r1 and r2 only.
	if ids(runs3, "run_id") != "r1,r2" && ids(runs3, "run_id") != "r2" || m3.From > 3 || m3.To < 19 || m3.To > 20 {
		t.Errorf("times: runs %s, window %d..%d", ids(runs3, "run_id"), m3.From, m3.To)
	}
	_, _, _, m4 := export(Bound{Time: time.Now().Add(time.Hour)}, Bound{})
	if m4.From != 31 || len(m4.Parts) != 1 || m4.Parts[0].Runs != 0 {
		t.Errorf("since the future: %+v", m4)
	}
}

func readRows(t *testing.T, dir, table string) []map[string]any {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, table+"-*.ndjson"))
	var rows []map[string]any
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r map[string]any
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatal(err)
			}
			rows = append(rows, r)
		}
		f.Close()
	}
	return rows
}

func TestRunErrors(t *testing.T) {
	_, js := bus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := Run(ctx, js, Config{Tenant: "acme", Stream: "NOPE", Format: FormatParquet, Out: t.TempDir()}); !errors.Is(err, ErrNoStream) {
		t.Errorf("no stream: %v", err)
	}
	out := t.TempDir()
	res, err := Run(ctx, js, Config{Tenant: "acme", Format: FormatParquet, Out: out})
	if err != nil || !res.Manifest.Complete || len(res.Manifest.Parts) != 1 {
		t.Fatalf("empty tenant: %+v, %v", res.Manifest, err)
	}
	for _, table := range Tables {
		if _, err := os.Stat(filepath.Join(out, partFile(table, 0, FormatParquet))); err != nil {
			t.Errorf("empty export: %v", err)
		}
	}
	if _, err := Run(ctx, js, Config{Tenant: "globex", Format: FormatParquet, Out: out}); !errors.Is(err, ErrManifestMismatch) {
		t.Errorf("another tenant's directory: %v", err)
	}
	if _, err := Run(ctx, js, Config{Tenant: "acme", Format: FormatParquet, Out: out, PartRows: 5}); err != nil {
		t.Errorf("the same export with another part size (not part of the rows): %v", err)
	}
	// Stray temporary files of an interrupted run are removed.
	out2 := t.TempDir()
	if err := writeManifest(out2, &Manifest{Version: manifestVersion, Tenant: "acme", Stream: wire.DefaultStream, Format: FormatParquet, From: 1, Parts: []Part{}}); err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(out2, partFile(TableRuns, 0, FormatParquet)+tmpSuffix)
	if err := os.WriteFile(stray, []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res, err := Run(ctx, js, Config{Tenant: "acme", Format: FormatParquet, Out: out2}); err != nil || !res.Resumed || !res.Manifest.Complete {
		t.Fatalf("resume of an empty one: %+v, %v", res, err)
	}
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Errorf("the stray temporary file: %v", err)
	}
}
