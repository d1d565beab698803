package testsupport

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Module is the module path whose go.mod marks the root.
const Module = "github.com/threadcast/threadcast"

// OracleDirEnv names a directory holding an installed reference consumer
// (apply.mjs beside node_modules/@ag-ui/client) to use instead of
// tools/oracle.
const OracleDirEnv = "THREADCAST_ORACLE_DIR"

// ErrNoOracle is returned by Oracle when the reference consumer is not
// installed (and OracleDirEnv is not set).
var ErrNoOracle = errors.New("testsupport: the reference consumer is not installed: run `npm ci` in tools/oracle (bash scripts/test.sh does), or set " + OracleDirEnv)

var root struct {
	once sync.Once
	dir  string
	err  error
}

// Root returns the module root: the nearest directory, from the working
// directory up, whose go.mod declares Module.
func Root() (string, error) {
	root.once.Do(func() { root.dir, root.err = findRoot() })
	return root.dir, root.err
}

func findRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("testsupport: %w", err)
	}
	return rootFrom(wd)
}

// rootFrom returns the nearest directory from wd up whose go.mod declares
// Module (a nested module's go.mod, such as deploy/helm's, is passed over).
func rootFrom(wd string) (string, error) {
	for dir := wd; ; {
		if modulePath(filepath.Join(dir, "go.mod")) == Module {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("testsupport: no go.mod of module %s in %s or above", Module, wd)
		}
		dir = parent
	}
}

// modulePath returns the module path declared by the go.mod file at path,
// or "" when there is none.
func modulePath(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// Path returns the file or directory at rel (slash-separated) under the
// module root. It fails t when the root cannot be found or nothing is at
// rel: what the repository carries is never a reason to skip.
func Path(t testing.TB, rel string) string {
	t.Helper()
	r, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(r, filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("testsupport: the repository's %s is missing: %v", rel, err)
	}
	return p
}

// ConformanceDir returns the conformance corpus, testdata/conformance (its
// cases/ and official/ folders; README.md and PROVENANCE.md describe them).
func ConformanceDir(t testing.TB) string {
	t.Helper()
	return Path(t, "testdata/conformance")
}

// Required reports whether THREADCAST_REQUIRE_<tool> makes a missing tool a
// failure: it is set to anything but "" or "0".
func Required(tool string) bool {
	v := os.Getenv("THREADCAST_REQUIRE_" + tool)
	return v != "" && v != "0"
}

// Require ends the test for a missing tool, with why: it fails when
// Required(tool), and skips otherwise.
func Require(t testing.TB, tool, why string) {
	t.Helper()
	env := "THREADCAST_REQUIRE_" + tool
	if Required(tool) {
		t.Fatalf("%s (and %s says it is required)", why, env)
	}
	t.Skipf("%s (%s=1 makes this a failure)", why, env)
}

// Node returns the path of node, or ends the test by Require(t, "ORACLE").
func Node(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		Require(t, "ORACLE", "node is not on PATH: "+err.Error())
	}
	return p
}

// Oracle returns the directory of the installed reference consumer
// (@ag-ui/client 1.0.0 and apply.mjs): the one OracleDirEnv names, or else
// the repository's tools/oracle once `npm ci` has run there. The error wraps
// ErrNoOracle when it is simply not installed; a directory named by
// OracleDirEnv that holds no install is a different error (a broken setup,
// never skipped for).
func Oracle() (string, error) {
	if dir := os.Getenv(OracleDirEnv); dir != "" {
		if err := installed(dir); err != nil {
			return "", fmt.Errorf("testsupport: %s=%s: %w", OracleDirEnv, dir, err)
		}
		return filepath.Abs(dir)
	}
	r, err := Root()
	if err != nil {
		return "", err
	}
	return repoOracle(r)
}

// repoOracle returns root's tools/oracle if the consumer is installed there.
func repoOracle(root string) (string, error) {
	dir := filepath.Join(root, "tools", "oracle")
	if err := installed(dir); err != nil {
		return "", fmt.Errorf("%w (%v)", ErrNoOracle, err)
	}
	return dir, nil
}

// installed checks that dir holds apply.mjs and an installed @ag-ui/client.
func installed(dir string) error {
	for _, f := range []string{"apply.mjs", filepath.Join("node_modules", "@ag-ui", "client", "package.json")} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return fmt.Errorf("no %s (run npm ci there): %w", f, err)
		}
	}
	return nil
}

// OracleDir returns Oracle's directory after checking that node is on PATH.
// When the consumer is not installed or node is missing it ends the test by
// Require(t, "ORACLE"); a broken OracleDirEnv fails it.
func OracleDir(t testing.TB) string {
	t.Helper()
	dir, err := Oracle()
	switch {
	case errors.Is(err, ErrNoOracle):
		Require(t, "ORACLE", err.Error())
	case err != nil:
		t.Fatal(err)
	}
	Node(t)
	return dir
}

// Streamgen returns the seeded stream generator, tools/streamgen/gen.mjs
// (run it with node; it needs no install).
func Streamgen(t testing.TB) string {
	t.Helper()
	return Path(t, "tools/streamgen/gen.mjs")
}
