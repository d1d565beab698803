package envflag

import (
	"flag"
	"fmt"
	"strings"
)

// Prefix starts the name of every environment variable that sets a flag.
const Prefix = "THREADCAST_"

// EnvName is the environment variable that sets the flag called name:
// Prefix, then name upper case with '-' as '_' ("nats-url" →
// "THREADCAST_NATS_URL").
func EnvName(name string) string {
	return Prefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Parse sets every flag defined on fs from the environment, then parses args
// over it, so that the command line wins. An environment variable that is
// unset or empty leaves its flag's default.
//
// Errors:
//   - a value the flag rejects in the environment: `NAME="value": <the
//     flag's error>`, for the first such variable in flag-name order; args
//     are then not parsed;
//   - what fs.Parse returns for args, with the same text (flag.ErrHelp for
//     -h or --help, so the caller can print its usage and exit 0);
//   - `unexpected arguments ["a" "b"]` when operands remain after the flags:
//     the commands that use this package take none.
//
// Every error is a *UsageError carrying fs's usage text, and Parse writes
// nothing to fs's output (the flag package's own messages are discarded):
// the command reports the error once, with Report.
func Parse(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	return usageError(fs, silently(fs, func() error { return parse(fs, args, getenv) }))
}

func parse(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if envErr != nil {
			return
		}
		name := EnvName(f.Name)
		if v := getenv(name); v != "" {
			if err := f.Value.Set(v); err != nil {
				envErr = fmt.Errorf("%s=%q: %w", name, v, err)
			}
		}
	})
	if envErr != nil {
		return envErr
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return nil
}
