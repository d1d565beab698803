package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/threadcast/threadcast/wire"
)

const exportStream = `{"type":"RUN_STARTED","threadId":"t1","runId":"r1"}
{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}
{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"hello"}
{"type":"TEXT_MESSAGE_END","messageId":"m1"}
{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"search","parentMessageId":"m1"}
{"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{\"q\":1}"}
{"type":"TOOL_CALL_END","toolCallId":"c1"}
{"type":"TOOL_CALL_RESULT","messageId":"m2","toolCallId":"c1","content":"found"}
{"type":"RUN_FINISHED","threadId":"t1","runId":"r1","usage":[{"provider":"p","model":"m","inputTokens":12,"outputTokens":5}]}
`

func TestExportCommand(t *testing.T) {
	url, js := pubServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tenant := range []string{"acme", "globex"} {
		subj, _ := wire.EventSubject(tenant, "t1")
		for _, line := range strings.Split(strings.TrimSpace(exportStream), "\n") {
			if _, err := js.Publish(ctx, subj, []byte(line)); err != nil {
				t.Fatal(err)
			}
		}
	}
	out := filepath.Join(t.TempDir(), "out")
	var stdout, stderr bytes.Buffer
	args := []string{"export", "--nats-url", url, "--tenant", "acme", "--format", "ndjson", "--out", out}
	if st := run(args, nil, &stdout, &stderr); st != exitOK {
		t.Fatalf("status %d: %s", st, stderr.String())
	}
	if !strings.Contains(stdout.String(), "exported acme: seqs 1..18, 1 parts, 1 runs, 2 messages, 1 tool calls") {
		t.Errorf("stdout: %s", stdout.String())
	}
	rows := readNDJSON(t, filepath.Join(out, "runs-000000.ndjson"))
	if len(rows) != 1 || rows[0]["input_tokens"] != 12.0 || rows[0]["output_tokens"] != 5.0 || rows[0]["total_tokens"] != nil ||
		rows[0]["tenant"] != "acme" || rows[0]["outcome"] != "success" || rows[0]["end_seq"] != 9.0 {
		t.Errorf("runs: %v", rows)
	}
	calls := readNDJSON(t, filepath.Join(out, "tool_calls-000000.ndjson"))
	if len(calls) != 1 || calls[0]["arguments"] != `{"q":1}` || calls[0]["result"] != "found" || calls[0]["parent_message_id"] != "m1" || calls[0]["run_id"] != "r1" {
		t.Errorf("tool calls: %v", calls)
	}

	// Again: complete, nothing to do.
	stdout.Reset()
	if st := run(args, nil, &stdout, &stderr); st != exitOK || !strings.Contains(stdout.String(), "resumed and completed acme") {
		t.Errorf("rerun: status %d, %s%s", st, stdout.String(), stderr.String())
	}

	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no tenant", []string{"--out", out}, "--tenant and --out are required"},
		{"no out", []string{"--tenant", "acme"}, "--tenant and --out are required"},
		{"bad tenant", []string{"--tenant", "Acme", "--out", t.TempDir()}, "invalid tenant"},
		{"bad format", []string{"--tenant", "acme", "--out", out, "--format", "csv"}, `unknown format "csv"`},
		{"bad since", []string{"--tenant", "acme", "--out", out, "--since", "yesterday"}, "--since: export: invalid window bound"},
		{"bad until", []string{"--tenant", "acme", "--out", out, "--until", "0"}, "--until: export: invalid window bound"},
		{"empty window", []string{"--tenant", "acme", "--out", t.TempDir(), "--since", "9", "--until", "3"}, "empty window"},
		{"two identities", []string{"--tenant", "acme", "--out", out, "--nats-creds", "a", "--nats-nkey", "b"}, "two identities"},
		{"another tenant's directory", []string{"--tenant", "globex", "--format", "ndjson", "--out", out}, `tenant is "acme" there, "globex" here`},
		{"another window in the directory", []string{"--tenant", "acme", "--format", "ndjson", "--out", out, "--until", "5"}, `until is "" there, "5" here`},
		{"out under a file", []string{"--tenant", "acme", "--out", filepath.Join(file, "sub")}, "export: output directory"},
		{"no stream", []string{"--tenant", "acme", "--out", t.TempDir(), "--stream", "NOPE"}, "event stream not found: NOPE"},
		{"stray argument", []string{"--tenant", "acme", "--out", out, "extra"}, "unexpected arguments"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"export", "--nats-url", url}, tt.args...)
			if st := run(args, nil, &stdout, &stderr); st != exitUsage || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("status %d, stderr %q; want %d and %q", st, stderr.String(), exitUsage, tt.want)
			}
		})
	}
	t.Run("no server", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		args := []string{"export", "--nats-url", "nats://127.0.0.1:1", "--tenant", "acme", "--out", t.TempDir()}
		if st := run(args, nil, &stdout, &stderr); st != exitUsage || !strings.Contains(stderr.String(), "connect to nats://127.0.0.1:1") {
			t.Errorf("status %d, stderr %q", st, stderr.String())
		}
	})
}

func readNDJSON(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v: %s", path, err, sc.Bytes())
		}
		rows = append(rows, r)
	}
	return rows
}
