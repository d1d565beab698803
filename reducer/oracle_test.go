//go:build oracle

package reducer

// Helpers for the differential test: running the TypeScript reference
// consumer (../shared/tools/oracle, installed with npm ci) and the seeded
// stream generator (../shared/tools/streamgen) as subprocesses.

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// oracleDir returns the directory holding the installed oracle (apply.mjs
// with its node_modules), from THREADCAST_ORACLE_DIR, or skips the test.
func oracleDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("THREADCAST_ORACLE_DIR")
	if dir == "" {
		t.Skip("THREADCAST_ORACLE_DIR is not set: it must name a directory holding the reference consumer's apply.mjs " +
			"with node_modules installed (d=$(mktemp -d) && cp -r ../shared/tools/. $d && (cd $d/oracle && npm ci) && " +
			"export THREADCAST_ORACLE_DIR=$d/oracle)")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@ag-ui", "client")); err != nil {
		t.Fatalf("THREADCAST_ORACLE_DIR=%s has no installed @ag-ui/client (run npm ci there): %v", dir, err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("THREADCAST_ORACLE_DIR is set but node is not on PATH: %v", err)
	}
	return dir
}

// streamgenPath finds gen.mjs: beside the installed oracle (the install
// copies the whole tools folder), else in the shared tree.
func streamgenPath(t *testing.T, oracle string) string {
	t.Helper()
	for _, p := range []string{
		filepath.Join(oracle, "..", "streamgen", "gen.mjs"),
		filepath.Join("..", "..", "shared", "tools", "streamgen", "gen.mjs"),
	} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("streamgen/gen.mjs not found beside the oracle nor under ../shared/tools")
	return ""
}

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
