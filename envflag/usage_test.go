package envflag

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
)

func usageSet() (*flag.FlagSet, *strings.Builder) {
	fs := flag.NewFlagSet("tool", flag.ContinueOnError)
	var out strings.Builder
	fs.SetOutput(&out)
	fs.Int("partitions", 8, "partition `count`")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: tool [flags]")
		fs.PrintDefaults()
	}
	return fs, &out
}

// Parse and ParseArgs write nothing themselves, restore the output, and hand
// back the error with the usage for Report.
func TestParseErrorsCarryTheUsage(t *testing.T) {
	noEnv := func(string) string { return "" }
	for _, tt := range []struct {
		name    string
		parse   func(fs *flag.FlagSet) error
		wantErr string
	}{
		{"help", func(fs *flag.FlagSet) error { return Parse(fs, []string{"-h"}, noEnv) }, flag.ErrHelp.Error()},
		{"unknown flag", func(fs *flag.FlagSet) error { return Parse(fs, []string{"--bogus"}, noEnv) }, "flag provided but not defined: -bogus"},
		{"bad env", func(fs *flag.FlagSet) error {
			return Parse(fs, nil, func(k string) string { return map[string]string{"THREADCAST_PARTITIONS": "x"}[k] })
		}, `THREADCAST_PARTITIONS="x"`},
		{"operand", func(fs *flag.FlagSet) error { return Parse(fs, []string{"x"}, noEnv) }, `unexpected arguments ["x"]`},
		{"args: help", func(fs *flag.FlagSet) error { return ParseArgs(fs, []string{"--help"}) }, flag.ErrHelp.Error()},
		{"args: bad value", func(fs *flag.FlagSet) error { return ParseArgs(fs, []string{"--partitions", "many"}) }, `invalid value "many" for flag -partitions`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fs, out := usageSet()
			err := tt.parse(fs)
			var u *UsageError
			if !errors.As(err, &u) || err.Error() != u.Err.Error() || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %#v, want a *UsageError saying %q", err, tt.wantErr)
			}
			if !strings.HasPrefix(u.Usage, "usage: tool [flags]\n") || !strings.Contains(u.Usage, "-partitions count") {
				t.Errorf("usage %q", u.Usage)
			}
			if out.Len() != 0 {
				t.Errorf("wrote %q to the flag set's output", out.String())
			}
			if fs.Output() != out {
				t.Error("the flag set's output was not restored")
			}
		})
	}
}

func TestParseArgsKeepsOperands(t *testing.T) {
	fs, _ := usageSet()
	if err := ParseArgs(fs, []string{"--partitions", "3", "a", "b"}); err != nil {
		t.Fatal(err)
	}
	if got := fs.Args(); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("args %q", got)
	}
}

// Without a Usage function, the flag package's default text is the usage.
func TestDefaultUsage(t *testing.T) {
	fs := flag.NewFlagSet("plain", flag.ContinueOnError)
	fs.Bool("v", false, "verbose")
	var u *UsageError
	if err := ParseArgs(fs, []string{"-h"}); !errors.As(err, &u) || !strings.HasPrefix(u.Usage, "Usage of plain:\n") || !strings.Contains(u.Usage, "-v\tverbose") {
		t.Fatalf("err %v, usage %q", err, u)
	}
}

func TestReport(t *testing.T) {
	fs, _ := usageSet()
	help := ParseArgs(fs, []string{"-h"})
	bad := ParseArgs(fs, []string{"--bogus"})
	for _, tt := range []struct {
		name               string
		err                error
		code               int
		wantOut, wantErr   string
		noUsageInErr, none bool
	}{
		{name: "help", err: help, code: 0, wantOut: "usage: tool [flags]\n"},
		{name: "wrapped help", err: fmt.Errorf("parsing: %w", help), code: 0, wantOut: "usage: tool [flags]\n"},
		{name: "bad flag", err: bad, code: 2, wantErr: "tool: flag provided but not defined: -bogus\nusage: tool [flags]\n"},
		{name: "other error", err: errors.New("--auth-key is required"), code: 2, wantErr: "tool: --auth-key is required\n", noUsageInErr: true},
		{name: "nil", code: 0, none: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			code := Report("tool", tt.err, &stdout, &stderr)
			if code != tt.code {
				t.Errorf("status %d, want %d", code, tt.code)
			}
			switch {
			case tt.none:
				if stdout.Len()+stderr.Len() != 0 {
					t.Errorf("wrote %q, %q", stdout.String(), stderr.String())
				}
			case tt.wantOut != "":
				if !strings.HasPrefix(stdout.String(), tt.wantOut) || !strings.Contains(stdout.String(), "-partitions") || stderr.Len() != 0 {
					t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
				}
			default:
				if !strings.HasPrefix(stderr.String(), tt.wantErr) || stdout.Len() != 0 {
					t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
				}
				if hasUsage := strings.Contains(stderr.String(), "-partitions"); hasUsage == tt.noUsageInErr {
					t.Errorf("usage on stderr: %v, want %v", hasUsage, !tt.noUsageInErr)
				}
			}
		})
	}
}
