// Package testsupport is what the project's tests share to find what the
// repository carries for them, the one rule for a test that needs a tool
// outside Go, and the scaffolding of tests that wait, check for leaked
// goroutines and read event streams. Embedded nats-server instances are
// started by the sub-package natstest, so that tests that need no server do
// not link it.
//
// Waiting: WaitFor and WaitForErr poll a condition until it holds or a
// timeout passes. Goroutines: CountGoroutines takes a baseline that Exited
// checks at a chosen point, and NoLeaks checks in a cleanup. Event streams:
// ReadSSE reads one text/event-stream block from a bufio.Reader, an
// SSEReader reads them and remembers the last id, and OpenSSE opens a
// stream over HTTP.
//
// Data is found from the module root (the directory whose go.mod declares
// module github.com/threadcast/threadcast, found from the working directory
// up), never by a fixed number of "../": the conformance corpus is
// testdata/conformance, the spec's field table testdata/spec/fields.json,
// the reference consumer's harness tools/oracle and the stream generator
// tools/streamgen. Data the repository carries is never skipped for: a test
// that cannot find it fails.
//
// Skip unless required: a test that needs a tool the Go toolchain does not
// provide (Node.js with the installed reference consumer; Chromium) calls
// Require, or a helper that does (Node, OracleDir). Without the tool the test
// is skipped with the reason, unless THREADCAST_REQUIRE_<TOOL> is set to
// anything but "" or "0" (CI sets THREADCAST_REQUIRE_ORACLE=1 and
// THREADCAST_REQUIRE_BROWSER=1): then it fails with the reason.
//
// Tools: ORACLE (Node.js, and the reference consumer installed with npm ci
// in tools/oracle or in THREADCAST_ORACLE_DIR), BROWSER (Chromium), DUCKDB
// (Node.js and @duckdb/node-api installed with npm ci in tools/duckdb:
// DuckDBDir, and DuckQuery runs a query there).
// Generate runs the stream generator and RunOracle the reference consumer
// on a stream, for the differential tests.
//
// Concurrency: every function may be called from parallel tests; the module
// root is looked up once per process. An SSEReader is for one goroutine;
// an SSEStream's Close may be called from any. The goroutine checks count
// every goroutine of the process, so a test that uses them must not run in
// parallel with others.
package testsupport
