package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/jsondoc"
)

// The tests run the real binary, built once.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "threadcast-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	binary = filepath.Join(dir, "threadcast")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building threadcast:", err)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type cliResult struct {
	stdout, stderr string
	code           int
}

func runCLI(t *testing.T, stdin []byte, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %v: %v", args, err)
	}
	return cliResult{out.String(), errb.String(), code}
}

// warnings counts the stderr lines that are warnings, and fails on any
// stderr line that is neither a warning nor the fatal error.
func (r cliResult) warnings(t *testing.T) int {
	t.Helper()
	n := 0
	for _, l := range strings.Split(strings.TrimRight(r.stderr, "\n"), "\n") {
		switch {
		case l == "":
		case strings.HasPrefix(l, "warning: "):
			n++
		case strings.HasPrefix(l, "error: "):
		default:
			t.Errorf("stderr line is neither a warning nor an error: %q", l)
		}
	}
	return n
}

func (r cliResult) view(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	var v map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%.300s", err, r.stdout)
	}
	return v
}

// corpusCase is one file of the corpus, as the CLI needs it.
type corpusCase struct {
	name   string
	stream []byte // JSONL
	input  string // path of a RunAgentInput file, or ""
	doc    map[string]json.RawMessage
	// protocol is the AG-UI version the folder was written for: cases/
	// expects a strict 1.0 consumer, official/ was written against 1.1.
	protocol string
}

func loadCases(t *testing.T, sub string) []corpusCase {
	t.Helper()
	conformance := testsupport.ConformanceDir(t)
	files, _ := filepath.Glob(filepath.Join(conformance, sub, "*.json"))
	if len(files) == 0 {
		t.Fatalf("no conformance files in %s/%s", conformance, sub)
	}
	sort.Strings(files)
	dir := t.TempDir()
	var out []corpusCase
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		key := "events"
		if sub == "official" {
			key = "stream"
		}
		var events []json.RawMessage
		if err := json.Unmarshal(doc[key], &events); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		c := corpusCase{name: strings.TrimSuffix(filepath.Base(f), ".json"), doc: doc, protocol: "1.1"}
		if sub == "cases" {
			c.protocol = "1.0"
		}
		for _, e := range events {
			c.stream = append(c.stream, e...)
			c.stream = append(c.stream, '\n')
		}
		var input []byte
		if raw, ok := doc["initial"]; ok {
			var ini struct {
				Messages json.RawMessage `json:"messages"`
				State    json.RawMessage `json:"state"`
			}
			if err := json.Unmarshal(raw, &ini); err != nil {
				t.Fatal(err)
			}
			in := map[string]json.RawMessage{
				"threadId": json.RawMessage(`"t"`), "runId": json.RawMessage(`"r"`), "messages": json.RawMessage(`[]`),
				"tools": json.RawMessage(`[]`), "context": json.RawMessage(`[]`), "forwardedProps": json.RawMessage(`{}`),
			}
			if ini.Messages != nil {
				in["messages"] = ini.Messages
			}
			if ini.State != nil {
				in["state"] = ini.State
			}
			input, _ = json.Marshal(in)
		} else if raw, ok := doc["input"]; ok && string(raw) != "null" {
			input = raw
		}
		if input != nil {
			c.input = filepath.Join(dir, c.name+".input.json")
			if err := os.WriteFile(c.input, input, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, c)
	}
	return out
}

func (c corpusCase) args(sub string) []string {
	args := []string{sub, "--protocol", c.protocol}
	if c.input == "" {
		return args
	}
	return append(args, "--input", c.input)
}

// TestReduceCases runs `threadcast reduce` on every case of the corpus and
// checks the exit status, the warnings on stderr and the messages and state
// on stdout against the case's expectations.
func TestReduceCases(t *testing.T) {
	for _, c := range loadCases(t, "cases") {
		t.Run(c.name, func(t *testing.T) {
			r := runCLI(t, c.stream, c.args("reduce")...)
			var exp struct {
				Messages json.RawMessage `json:"messages"`
				State    json.RawMessage `json:"state"`
			}
			if err := json.Unmarshal(c.doc["expected"], &exp); err != nil {
				t.Fatal(err)
			}
			var wantWarn int
			_ = json.Unmarshal(c.doc["expectedWarnings"], &wantWarn)
			wantCode := exitOK
			if e := c.doc["expectedError"]; e != nil && string(e) != "null" {
				wantCode = exitRejected
			}
			if r.code != wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", r.code, wantCode, r.stderr)
			}
			if n := r.warnings(t); n != wantWarn {
				t.Errorf("%d warnings on stderr, want %d:\n%s", n, wantWarn, r.stderr)
			}
			if wantCode == exitRejected && !strings.Contains(r.stderr, "error: ") {
				t.Errorf("rejected stream, but no error line on stderr:\n%s", r.stderr)
			}
			v := r.view(t)
			for _, k := range []string{"messages", "state"} {
				want := exp.Messages
				if k == "state" {
					want = exp.State
				}
				if eq, err := jsondoc.Equal(v[k], want); err != nil || !eq {
					t.Errorf("%s:\n got %s\nwant %s", k, v[k], want)
				}
			}
		})
	}
}

// TestReduceOfficial runs the protocol's own fixtures, holding the CLI to
// the keys a consumer can show (see the conformance README): outcome,
// message count, messages and state as subset matches, warnings.
func TestReduceOfficial(t *testing.T) {
	for _, c := range loadCases(t, "official") {
		t.Run(c.name, func(t *testing.T) {
			r := runCLI(t, c.stream, c.args("reduce")...)
			var exp struct {
				Outcome      string          `json:"outcome"`
				MessageCount *int            `json:"messageCount"`
				Messages     json.RawMessage `json:"messages"`
				State        json.RawMessage `json:"state"`
				NoWarnings   bool            `json:"noWarnings"`
				Warnings     []string        `json:"warnings"`
			}
			if err := json.Unmarshal(c.doc["expect"], &exp); err != nil {
				t.Fatal(err)
			}
			switch exp.Outcome {
			case "failed":
				if r.code != exitRejected {
					t.Errorf("exit %d, want %d (rejected)", r.code, exitRejected)
				}
			case "completed", "":
				if r.code != exitOK {
					t.Errorf("exit %d, want 0; stderr:\n%s", r.code, r.stderr)
				}
			}
			n := r.warnings(t)
			if exp.NoWarnings && n != 0 {
				t.Errorf("%d warnings, want none:\n%s", n, r.stderr)
			}
			if len(exp.Warnings) > 0 && n == 0 {
				t.Errorf("no warning, want at least one (%q)", exp.Warnings)
			}
			v := r.view(t)
			var msgs []any
			if err := json.Unmarshal(v["messages"], &msgs); err != nil {
				t.Fatal(err)
			}
			if exp.MessageCount != nil && len(msgs) != *exp.MessageCount {
				t.Errorf("%d messages, want %d", len(msgs), *exp.MessageCount)
			}
			for _, k := range []string{"messages", "state"} {
				want := exp.Messages
				if k == "state" {
					want = exp.State
				}
				if want == nil {
					continue
				}
				if path, ok := subsetMatch(decodeAny(t, want), decodeAny(t, v[k])); !ok {
					t.Errorf("%s differs at %s:\n got %s\nwant (subset) %s", k, path, v[k], want)
				}
			}
		})
	}
}

func decodeAny(t *testing.T, raw []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("not JSON: %v: %.200s", err, raw)
	}
	return v
}

// subsetMatch is the official fixtures' comparison: arrays of the same length
// matched element by element, objects only on the keys want names, other
// values equal (numbers as float64).
func subsetMatch(want, got any) (string, bool) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return "", false
		}
		for k, wv := range w {
			if p, ok := subsetMatch(wv, g[k]); !ok {
				return "." + k + p, false
			}
		}
		return "", true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return "", false
		}
		for i := range w {
			if p, ok := subsetMatch(w[i], g[i]); !ok {
				return fmt.Sprintf("[%d]%s", i, p), false
			}
		}
		return "", true
	default:
		return "", reflect.DeepEqual(want, got)
	}
}

var seqRE = regexp.MustCompile(`seq [0-9]+`)

// TestCompactRoundTrip: `threadcast compact | threadcast reduce` gives the
// view `threadcast reduce` gives, on every stream of the corpus, with the
// same exit status.
func TestCompactRoundTrip(t *testing.T) {
	cases := append(loadCases(t, "cases"), loadCases(t, "official")...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			orig := runCLI(t, c.stream, c.args("reduce")...)
			comp := runCLI(t, c.stream, c.args("compact")...)
			if comp.code != orig.code {
				t.Fatalf("compact exit %d, reduce exit %d", comp.code, orig.code)
			}
			if comp.warnings(t) != orig.warnings(t) {
				t.Errorf("compact reported %d warnings, reduce %d", comp.warnings(t), orig.warnings(t))
			}
			back := runCLI(t, []byte(comp.stdout), c.args("reduce")...)
			ov, bv := orig.view(t), back.view(t)
			// The codec's own warnings (stripped properties, dropped
			// events) are reported by compact and not carried into its
			// output, which holds the events as the codec accepted them.
			if back.warnings(t) > orig.warnings(t) {
				t.Errorf("reducing the compacted stream warned %d times, the original %d", back.warnings(t), orig.warnings(t))
			}
			keys := []string{"messages", "state"}
			if strings.Contains(orig.stderr, "error: codec") {
				// A malformed event ends compact's output: the view
				// before it is all that can be compared.
			} else {
				keys = append(keys, "status", "runs", "steps", "subagents", "error")
				if back.code != orig.code {
					t.Errorf("reducing the compacted stream exits %d, the original %d", back.code, orig.code)
				}
			}
			for _, k := range keys {
				o, b := seqRE.ReplaceAll(ov[k], []byte("seq N")), seqRE.ReplaceAll(bv[k], []byte("seq N"))
				if eq, err := jsondoc.Equal(o, b); err != nil || !eq {
					t.Errorf("%s differs after compaction:\n got %s\nwant %s\ncompacted stream:\n%s", k, b, o, comp.stdout)
				}
			}
		})
	}
}

// TestFormats: the same stream as JSONL, a JSON array and SSE gives the same
// view.
func TestFormats(t *testing.T) {
	events := []string{
		`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`,
		`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"Hel"}`,
		`{"type":"TEXT_MESSAGE_CHUNK","delta":"lo"}`,
		`{"type":"STATE_SNAPSHOT","snapshot":{"n":1}}`,
		`{"type":"RUN_FINISHED","threadId":"t","runId":"r"}`,
	}
	jsonl := strings.Join(events, "\n") + "\n"
	array := "[" + strings.Join(events, ",\n") + "]"
	sse := ": comment\n\ndata: " + strings.Join(events, "\n\ndata: ") + "\n\n"
	want := runCLI(t, []byte(jsonl), "reduce")
	if want.code != 0 || !strings.Contains(want.stdout, `"content":"Hello"`) {
		t.Fatalf("JSONL: exit %d, stdout %s, stderr %s", want.code, want.stdout, want.stderr)
	}
	for name, in := range map[string]string{"array": array, "sse": sse} {
		got := runCLI(t, []byte(in), "reduce")
		if got.code != 0 || got.stdout != want.stdout {
			t.Errorf("%s: exit %d\n got %s\nwant %s\nstderr %s", name, got.code, got.stdout, want.stdout, got.stderr)
		}
	}
	// A file argument reads the same as stdin.
	f := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(f, []byte(jsonl), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := runCLI(t, nil, "reduce", f); got.stdout != want.stdout {
		t.Errorf("file argument:\n got %s\nwant %s", got.stdout, want.stdout)
	}
	comp := runCLI(t, []byte(sse), "compact")
	if comp.code != 0 || strings.Count(comp.stdout, "\n") != 4 || !strings.Contains(comp.stdout, `"delta":"Hello"`) {
		t.Errorf("compact of SSE: exit %d, stdout:\n%s", comp.code, comp.stdout)
	}
}

// TestErrors covers every error path: exit statuses and what stderr says.
func TestErrors(t *testing.T) {
	dir := t.TempDir()
	badInput := filepath.Join(dir, "bad-input.json")
	if err := os.WriteFile(badInput, []byte(`{"threadId":`), 0o600); err != nil {
		t.Fatal(err)
	}
	goodInput := filepath.Join(dir, "input.json")
	if err := os.WriteFile(goodInput, []byte(`{"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":"hi"}],"state":{"s":1},"tools":[],"context":[],"forwardedProps":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	run := `{"type":"RUN_STARTED","threadId":"t","runId":"r"}` + "\n"
	tests := []struct {
		name       string
		args       []string
		stdin      string
		wantCode   int
		wantStdout string // substring
		wantStderr string // substring
	}{
		{"flags without a subcommand are serve's", []string{"--bogus"}, "", exitUsage, "", "usage: threadcast [serve]"},
		{"help", []string{"help"}, "", exitOK, "reduce", ""},
		{"unknown subcommand", []string{"frobnicate"}, "", exitUsage, "", `unknown subcommand "frobnicate"`},
		{"reduce --help", []string{"reduce", "--help"}, "", exitOK, "usage: threadcast reduce", ""},
		{"compact --help", []string{"compact", "-h"}, "", exitOK, "usage: threadcast compact", ""},
		{"bad flag", []string{"reduce", "--bogus"}, "", exitUsage, "", "flag provided but not defined"},
		{"unknown protocol version", []string{"reduce", "--protocol", "2.0"}, "", exitUsage, "", "--protocol"},
		{"two stream files", []string{"reduce", "a", "b"}, "", exitUsage, "", "at most one stream file"},
		{"missing stream file", []string{"compact", filepath.Join(dir, "nope.jsonl")}, "", exitUsage, "", "no such file"},
		{"missing input file", []string{"reduce", "--input", filepath.Join(dir, "nope.json")}, run, exitUsage, "", "--input"},
		{"input not JSON", []string{"reduce", "--input", badInput}, run, exitUsage, "", "--input"},
		// Bytes after delivered events that frame no event end the stream,
		// rejected, with what was delivered still applied and printed
		// (processing.md X13 and §3, patterns.md §1.7).
		// A cut inside an event is a truncated run: the view as it stands,
		// no outcome invented (processing.md X13, L9).
		{"stream ends inside an event", []string{"reduce"}, run + `{"type":"RUN_FINISHED"`, exitRejected, `"runId":"r","threadId":"t","status":"running","verdict":"ok"`, "error: codec: seq 2: line 2: truncated stream: stream ends inside a JSON value"},
		{"stream cut after a closed run", []string{"reduce"}, run + `{"type":"RUN_FINISHED","threadId":"t","runId":"r"}` + "\n" + `{"type":"RUN_STA`, exitRejected, `"status":"finished","verdict":"ok"`, "truncated stream"},
		{"SSE connection drops mid-event", []string{"reduce"},
			"data: " + run + "\ndata: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\"}\n\ndata: {\"type\":\"TEXT_MESS", exitRejected, `"messages":[{"id":"m","role":"assistant","content":""}]`, "error: codec: seq 3"},
		{"bad array framing", []string{"compact"}, "[" + run + " {", exitRejected, `"type":"RUN_STARTED"`, "error: codec: seq 2"},
		// Bytes that are no event are a decode failure: the stream is rejected there.
		{"garbage line after events", []string{"reduce"}, run + "not json\n", exitRejected, `"status":"error","verdict":"rejected"`, "bad stream framing"},
		{"nothing frames an event", []string{"reduce"}, `{"type":`, exitUsage, "", "unusable stream"},
		{"stream file is a directory", []string{"reduce", dir}, "", exitUsage, "", "unusable stream"},
		{"input sets messages and state", []string{"reduce", "--input", goodInput}, run, exitOK, `"state":{"s":1}`, ""},
		{"malformed event is fatal, view still printed", []string{"reduce"},
			run + `{"type":"TEXT_MESSAGE_START","messageId":7}` + "\n", exitRejected, `"messages":[]`, "error: codec"},
		{"protocol violation is fatal", []string{"reduce"},
			run + `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}` + "\n", exitRejected, `"status":"rejected"`, "error: "},
		// A fatal error ends the run, not the stream: a later RUN_STARTED
		// begins a new run (patterns.md §1.1, Failed → Active), as in the
		// live view of the same events; what comes between is refused.
		{"a run after a protocol violation is folded", []string{"reduce"},
			run + `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}` + "\n" +
				`{"type":"TEXT_MESSAGE_START","messageId":"lost"}` + "\n" +
				`{"type":"RUN_STARTED","threadId":"t","runId":"r2"}` + "\n" +
				`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m2","delta":"again"}` + "\n" +
				`{"type":"RUN_FINISHED","threadId":"t","runId":"r2"}` + "\n",
			exitRejected, `"messages":[{"id":"m2","role":"assistant","content":"again"}],"state":{},"runs":[{"runId":"r","threadId":"t","status":"error","verdict":"rejected"`, "seq 3 TEXT_MESSAGE_START refused"},
		{"a run after a malformed event is folded", []string{"reduce"},
			run + `{"type":"TEXT_MESSAGE_START","messageId":7}` + "\n" +
				`{"type":"RUN_STARTED","threadId":"t","runId":"r2"}` + "\n" +
				`{"type":"RUN_FINISHED","threadId":"t","runId":"r2"}` + "\n",
			exitRejected, `{"runId":"r2","threadId":"t","status":"finished","verdict":"ok"}`, "error: codec: seq 2"},
		{"--thread removes an event naming another thread", []string{"reduce", "--thread", "t"},
			`{"type":"RUN_STARTED","threadId":"other","runId":"r0"}` + "\n" + run + `{"type":"RUN_FINISHED","threadId":"t","runId":"r"}` + "\n",
			exitOK, `"threadId":"t","seq":3,"status":"finished","messages":[],"state":{},"runs":[{"runId":"r","threadId":"t","status":"finished","verdict":"ok"}],"steps":[],"subagents":[],"warnings":1`,
			`warning: seq 1: pipeline: RUN_STARTED: threadId "other" is not the thread "t" of its subject; event removed`},
		{"warnings one per line", []string{"reduce"},
			run + `{"type":"ACTIVITY_DELTA","messageId":"ghost","activityType":"x","patch":[]}` + "\n" +
				`{"type":"NOT_A_TYPE"}` + "\n", exitOK, `"warnings":2`, "warning: "},
		{"compact of a rejected stream", []string{"compact"},
			run + `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}` + "\n", exitRejected, "TEXT_MESSAGE_CONTENT", "error: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, []byte(tt.stdin), tt.args...)
			if r.code != tt.wantCode {
				t.Errorf("exit %d, want %d\nstdout %s\nstderr %s", r.code, tt.wantCode, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, tt.wantStdout) {
				t.Errorf("stdout %q does not contain %q", r.stdout, tt.wantStdout)
			}
			if !strings.Contains(r.stderr, tt.wantStderr) {
				t.Errorf("stderr %q does not contain %q", r.stderr, tt.wantStderr)
			}
		})
	}
}

// TestWarningLines: every warning is one line starting with "warning: ".
func TestWarningLines(t *testing.T) {
	stream := `{"type":"RUN_STARTED","threadId":"t","runId":"r","bogus":1}` + "\n" +
		`{"type":"STATE_DELTA","delta":[{"op":"remove","path":"/nope"}]}` + "\n" +
		`{"type":"RUN_FINISHED","threadId":"t","runId":"r"}` + "\n"
	r := runCLI(t, []byte(stream), "reduce")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if n := r.warnings(t); n != 2 {
		t.Errorf("%d warning lines, want 2 (stripped property, failed patch):\n%s", n, r.stderr)
	}
}
