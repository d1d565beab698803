package testsupport

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"
)

// Generate runs the seeded stream generator gen (Streamgen's path) in its
// "random" mode with args and returns the stream as JSONL. It fails t if the
// generator fails.
func Generate(t testing.TB, gen string, args ...string) []byte {
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

// OracleResult is what the reference consumer's apply.mjs prints for a
// stream: the messages and state it ends with, its warnings, and the error
// that stopped it (nil: none).
type OracleResult struct {
	Messages []json.RawMessage `json:"messages"`
	State    json.RawMessage   `json:"state"`
	Warnings []json.RawMessage `json:"warnings"`
	Error    *string           `json:"error"`
}

// RunOracle applies a JSONL stream with the reference consumer installed in
// dir (OracleDir) and returns what it printed. It fails t if the consumer
// fails or prints something that is not its JSON result.
func RunOracle(t testing.TB, dir string, stream []byte) OracleResult {
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
	var r OracleResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("oracle output is not JSON: %v\n%.400s", err, out)
	}
	return r
}
