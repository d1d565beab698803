package testsupport

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// outcome is how a helper ended a test: "fatal", "skip" or "" (returned).
type outcome struct {
	how, msg string
}

// recorder is a testing.TB that records Fatal and Skip and stops the
// goroutine, as the testing package does, records Errorf, and runs its
// cleanups when run's function returns.
type recorder struct {
	testing.TB
	out      outcome
	cleanups []func()
}

func (r *recorder) Errorf(format string, args ...any) {
	r.out = outcome{"error", fmt.Sprintf(format, args...)}
}
func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *recorder) Helper() {}
func (r *recorder) Fatal(args ...any) {
	r.out = outcome{"fatal", fmt.Sprint(args...)}
	runtime.Goexit()
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.out = outcome{"fatal", fmt.Sprintf(format, args...)}
	runtime.Goexit()
}
func (r *recorder) Skipf(format string, args ...any) {
	r.out = outcome{"skip", fmt.Sprintf(format, args...)}
	runtime.Goexit()
}

// run calls f with a recorder in its own goroutine and returns how it ended.
func run(t *testing.T, f func(tb testing.TB)) outcome {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			for i := len(r.cleanups) - 1; i >= 0; i-- {
				r.cleanups[i]()
			}
		}()
		f(r)
	}()
	<-done
	return r.out
}

func TestRootIsTheModule(t *testing.T) {
	r, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	if got := modulePath(filepath.Join(r, "go.mod")); got != Module {
		t.Fatalf("go.mod at %s declares %q", r, got)
	}
	wd, _ := os.Getwd()
	if rel, err := filepath.Rel(r, wd); err != nil || rel != filepath.Join("internal", "testsupport") {
		t.Fatalf("root %s is not two levels above %s (rel %q, %v)", r, wd, rel, err)
	}
}

// A nested module (deploy/helm has its own go.mod) is passed over, and no
// go.mod of the module up to / is an error.
func TestRootFrom(t *testing.T) {
	r, _ := Root()
	got, err := rootFrom(filepath.Join(r, "deploy", "helm"))
	if err != nil || got != r {
		t.Fatalf("rootFrom(deploy/helm) = %q, %v; want %q", got, err, r)
	}
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "go.mod"), []byte("module \"example.com/other\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := rootFrom(other); err == nil || !strings.Contains(err.Error(), "no go.mod of module "+Module) {
		t.Fatalf("rootFrom(another module) = %q, %v; want an error", got, err)
	}
}

func TestModulePath(t *testing.T) {
	dir := t.TempDir()
	for give, want := range map[string]string{
		"module " + Module + "\n\ngo 1.26\n":   Module,
		"// c\n  module \"" + Module + "\" \n": Module,
		"go 1.26\n":                            "",
	} {
		p := filepath.Join(dir, "go.mod")
		if err := os.WriteFile(p, []byte(give), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := modulePath(p); got != want {
			t.Errorf("modulePath(%q) = %q, want %q", give, got, want)
		}
	}
	if got := modulePath(filepath.Join(dir, "none")); got != "" {
		t.Errorf("modulePath(missing) = %q", got)
	}
}

// The corpus is in the repository: both of its sets hold cases.
func TestConformanceDir(t *testing.T) {
	dir := ConformanceDir(t)
	for _, set := range []string{"cases", "official"} {
		files, err := filepath.Glob(filepath.Join(dir, set, "*.json"))
		if err != nil || len(files) == 0 {
			t.Errorf("%s/%s: %d cases, %v", dir, set, len(files), err)
		}
	}
	for _, f := range []string{"README.md", "PROVENANCE.md"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

func TestPathMissingFails(t *testing.T) {
	got := run(t, func(tb testing.TB) { Path(tb, "testdata/no-such-thing") })
	if got.how != "fatal" || !strings.Contains(got.msg, "testdata/no-such-thing is missing") {
		t.Fatalf("Path(missing) ended %+v, want a failure naming it", got)
	}
	got = run(t, func(tb testing.TB) { Path(tb, "testdata/spec/fields.json") })
	if got.how != "" {
		t.Fatalf("Path(testdata/spec/fields.json) ended %+v", got)
	}
}

func TestRequire(t *testing.T) {
	for _, tt := range []struct {
		env  string
		want string
	}{{"", "skip"}, {"0", "skip"}, {"1", "fatal"}, {"yes", "fatal"}} {
		t.Run("env="+tt.env, func(t *testing.T) {
			t.Setenv("THREADCAST_REQUIRE_TESTTOOL", tt.env)
			got := run(t, func(tb testing.TB) { Require(tb, "TESTTOOL", "no testtool here") })
			if got.how != tt.want || !strings.Contains(got.msg, "no testtool here") || !strings.Contains(got.msg, "THREADCAST_REQUIRE_TESTTOOL") {
				t.Fatalf("Require ended %+v, want %s with the reason and the variable", got, tt.want)
			}
		})
	}
}

// fakeInstall makes dir look like an installed reference consumer.
func fakeInstall(t *testing.T, dir string) {
	t.Helper()
	pkg := filepath.Join(dir, "node_modules", "@ag-ui", "client")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(dir, "apply.mjs"), filepath.Join(pkg, "package.json")} {
		if err := os.WriteFile(f, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOracleFromEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(OracleDirEnv, dir)
	_, err := Oracle()
	if err == nil || errors.Is(err, ErrNoOracle) || !strings.Contains(err.Error(), OracleDirEnv+"="+dir) {
		t.Fatalf("Oracle() with an empty %s: %v; want a setup error, not ErrNoOracle", OracleDirEnv, err)
	}
	// A broken setup fails even when the tool is not required.
	t.Setenv("THREADCAST_REQUIRE_ORACLE", "")
	if got := run(t, func(tb testing.TB) { OracleDir(tb) }); got.how != "fatal" {
		t.Fatalf("OracleDir with an empty %s ended %+v, want a failure", OracleDirEnv, got)
	}
	fakeInstall(t, dir)
	if got, err := Oracle(); err != nil || got != dir {
		t.Fatalf("Oracle() = %q, %v; want %q", got, err, dir)
	}
}

func TestRepoOracle(t *testing.T) {
	r := t.TempDir()
	if _, err := repoOracle(r); !errors.Is(err, ErrNoOracle) {
		t.Fatalf("repoOracle(no install) = %v, want ErrNoOracle", err)
	}
	fakeInstall(t, filepath.Join(r, "tools", "oracle"))
	if got, err := repoOracle(r); err != nil || got != filepath.Join(r, "tools", "oracle") {
		t.Fatalf("repoOracle = %q, %v", got, err)
	}
}

func TestStreamgen(t *testing.T) {
	if p := Streamgen(t); filepath.Base(p) != "gen.mjs" {
		t.Fatalf("Streamgen = %s", p)
	}
}
