package cmd

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/threadcast/threadcast/internal/testsupport"
)

// commandsUnder are the main packages the test must find at least (it runs
// every main package of the module, these and any other).
var commandsUnder = []string{"bench", "cmd/fanout", "cmd/ingest", "cmd/threadcast", "loadtest"}

// buildAll builds every main package of the module once, into a temporary
// directory, and returns the binaries' paths by package path relative to
// the module root.
func buildAll(t *testing.T) map[string]string {
	t.Helper()
	root, err := testsupport.Root()
	if err != nil {
		t.Fatal(err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		// go test does not always put go on PATH; the toolchain that built
		// this test binary has it in its GOROOT.
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	list := exec.Command(goBin, "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`, testsupport.Module+"/...")
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := strings.Fields(string(out))
	dir := t.TempDir()
	build := exec.Command(goBin, append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	bins := map[string]string{}
	for _, p := range pkgs {
		bins[strings.TrimPrefix(p, testsupport.Module+"/")] = filepath.Join(dir, path.Base(p))
	}
	for _, want := range commandsUnder {
		if bins[want] == "" {
			t.Fatalf("main package %s not found (found %v)", want, pkgs)
		}
	}
	return bins
}

type result struct {
	code           int
	stdout, stderr string
}

// run runs bin with args, no stdin, no THREADCAST_* variable and an empty
// working directory (what a command writes stays out of the tree), and kills
// it after a while: a command that ignores --help and starts serving fails
// here instead of hanging the test.
func run(t *testing.T, bin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "THREADCAST_") })
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %q did not exit within 30s (stderr %.300s)", filepath.Base(bin), args, stderr.String())
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, stdout.String(), stderr.String()}
}

// subcommands reads the subcommand names from threadcast's help.
func subcommands(t *testing.T, bin string) []string {
	t.Helper()
	r := run(t, bin, "--help")
	_, list, ok := strings.Cut(r.stdout, "\nsubcommands:\n")
	if !ok {
		t.Fatalf("threadcast --help lists no subcommands:\n%s", r.stdout)
	}
	var names []string
	for _, line := range strings.Split(list, "\n") {
		if !strings.HasPrefix(line, "  ") {
			break
		}
		names = append(names, strings.Fields(line)[0])
	}
	if !slices.Contains(names, "serve") || len(names) < 3 {
		t.Fatalf("subcommands %q from:\n%s", names, r.stdout)
	}
	return names
}

// nested returns the subcommands of threadcast's subcommand sub that its
// usage names at the start of a line ("threadcast token jwks ..."): words,
// not flags or placeholders.
func nested(usage, sub string) []string {
	re := regexp.MustCompile(`(?m)^\s*(?:usage: )?threadcast ` + regexp.QuoteMeta(sub) + ` ([a-z][a-z0-9-]*)\b`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(usage, -1) {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

func TestNested(t *testing.T) {
	usage := `usage: threadcast token (--key K | --data DIR) --tenant T
         [--threads PATTERN]... [--ttl D]
       threadcast token jwks --ed25519-key FILE --kid ID
       threadcast token keygen FILE

Use "threadcast token jwks" to print the key set; threadcast token mints.
`
	if got := nested(usage, "token"); !slices.Equal(got, []string{"jwks", "keygen"}) {
		t.Errorf("nested = %q", got)
	}
	if got := nested("usage: threadcast reduce [--input FILE] [STREAM]\n", "reduce"); len(got) != 0 {
		t.Errorf("nested = %q", got)
	}
}

// TestHelpAndBadFlagConventions runs every command, every subcommand of
// threadcast, and every subcommand a subcommand's usage names, with -h,
// --help and an unknown flag.
func TestHelpAndBadFlagConventions(t *testing.T) {
	bins := buildAll(t)
	type command struct {
		name string
		bin  string
		args []string // before the flag: the subcommand
	}
	var cmds []command
	for pkg, bin := range bins {
		cmds = append(cmds, command{pkg, bin, nil})
		if pkg == "cmd/threadcast" {
			for _, sub := range subcommands(t, bin) {
				cmds = append(cmds, command{pkg + " " + sub, bin, []string{sub}})
				for _, n := range nested(run(t, bin, sub, "--help").stdout, sub) {
					cmds = append(cmds, command{pkg + " " + sub + " " + n, bin, []string{sub, n}})
				}
			}
		}
	}
	slices.SortFunc(cmds, func(a, b command) int { return strings.Compare(a.name, b.name) })
	for _, c := range cmds {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			// threadcast alone lists its subcommands; flags without a
			// subcommand are serve's, so a bad one prints serve's usage.
			top := c.name == "cmd/threadcast"
			var usage string
			for _, help := range []string{"-h", "--help"} {
				r := run(t, c.bin, append(slices.Clone(c.args), help)...)
				if r.code != 0 || r.stderr != "" {
					t.Errorf("%s: exit %d, stderr %.300q; want 0 and nothing on stderr", help, r.code, r.stderr)
				}
				if !strings.Contains(strings.ToLower(r.stdout), "usage") {
					t.Errorf("%s: stdout is no usage:\n%s", help, r.stdout)
				}
				if usage == "" {
					usage = r.stdout
				} else if r.stdout != usage {
					t.Errorf("-h and --help print different usages")
				}
			}
			if top {
				usage = run(t, c.bin, "serve", "--help").stdout
			}
			r := run(t, c.bin, append(slices.Clone(c.args), "--no-such-flag")...)
			if r.code != 2 || r.stdout != "" {
				t.Errorf("--no-such-flag: exit %d, stdout %q; want 2 and nothing on stdout", r.code, r.stdout)
			}
			if !strings.Contains(r.stderr, "flag provided but not defined: -no-such-flag") {
				t.Errorf("--no-such-flag: stderr does not name the flag:\n%s", r.stderr)
			}
			if usage != "" && !strings.Contains(r.stderr, usage) {
				t.Errorf("--no-such-flag: stderr does not hold the usage:\n%s", r.stderr)
			}
		})
	}
}
