//go:build oracle

package compact

// Helpers for the differential test: running the TypeScript reference
// consumer (tools/oracle, installed with npm ci; testsupport.OracleDir finds
// it) and the seeded stream generator (tools/streamgen) as subprocesses.

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"
)

// generate runs streamgen and returns the stream as JSONL.
func generate(t *testing.T, gen string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("node", append([]string{gen, "random"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("streamgen %v: %v\n%s", args, err, stderr.Bytes())
	}
	return out
}

// oracleResult is what apply.mjs prints.
type oracleResult struct {
	Messages []json.RawMessage `json:"messages"`
	State    json.RawMessage   `json:"state"`
	Warnings []json.RawMessage `json:"warnings"`
	Error    *string           `json:"error"`
}

// runOracle applies a JSONL stream with the reference consumer.
func runOracle(t *testing.T, dir string, stream []byte) oracleResult {
	t.Helper()
	cmd := exec.Command("node", "apply.mjs")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(stream)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("oracle: %v\n%s", err, stderr.Bytes())
	}
	var r oracleResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("oracle output is not JSON: %v\n%.400s", err, out)
	}
	return r
}
