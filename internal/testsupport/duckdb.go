package testsupport

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// DuckDBDir returns tools/duckdb once `npm ci` has installed
// @duckdb/node-api there, after checking that node is on PATH; otherwise
// it ends the test by Require(t, "DUCKDB").
func DuckDBDir(t testing.TB) string {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "tools", "duckdb")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@duckdb", "node-api", "package.json")); err != nil {
		Require(t, "DUCKDB", "DuckDB for Node is not installed (cd tools/duckdb && npm ci): "+err.Error())
	}
	if _, err := exec.LookPath("node"); err != nil {
		Require(t, "DUCKDB", "node is not on PATH: "+err.Error())
	}
	return dir
}

// DuckQuery runs one SQL query with DuckDB (tools/duckdb/query.mjs, in dir
// from DuckDBDir) and returns its rows, each an object of column name to
// DuckDB's JSON value (BIGINT and TIMESTAMP values are strings). Paths in
// the query are relative to dir unless absolute. It fails t on an error.
func DuckQuery(t testing.TB, dir, sql string) []map[string]any {
	t.Helper()
	cmd := exec.Command("node", "query.mjs", sql)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("duckdb: %v: %s\nquery: %s", err, stderr.Bytes(), sql)
	}
	var rows []map[string]any
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("duckdb printed no JSON rows: %v: %.200s", err, out)
	}
	return rows
}
