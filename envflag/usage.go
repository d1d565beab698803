package envflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// UsageError is a command line (or environment) that a flag set refused,
// or a request for help: Err is flag.ErrHelp for -h and --help. Usage is the
// flag set's usage text, as its Usage function writes it.
type UsageError struct {
	Err   error
	Usage string
}

func (e *UsageError) Error() string { return e.Err.Error() }

func (e *UsageError) Unwrap() error { return e.Err }

// ParseArgs parses args with fs, as fs.Parse does, for a command that takes
// no environment and may take operands (fs.Args). Like Parse it writes
// nothing to fs's output and returns its errors as *UsageError, for Report.
func ParseArgs(fs *flag.FlagSet, args []string) error {
	return usageError(fs, silently(fs, func() error { return fs.Parse(args) }))
}

// Report writes what a command must say about err, a parse error of Parse or
// ParseArgs or any other error in the command's configuration, and returns
// the exit status, by the conventions every Threadcast command follows:
//
//   - help (err is a *UsageError of flag.ErrHelp): the usage on stdout; 0;
//   - any other *UsageError: "prog: err" and the usage on stderr; 2;
//   - any other error: "prog: err" on stderr; 2;
//   - nil: nothing; 0.
func Report(prog string, err error, stdout, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var u *UsageError
	isUsage := errors.As(err, &u)
	if isUsage && errors.Is(u.Err, flag.ErrHelp) {
		fmt.Fprint(stdout, u.Usage)
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\n", prog, err)
	if isUsage {
		fmt.Fprint(stderr, u.Usage)
	}
	return 2
}

// silently runs parse with fs's output discarded: the flag package would
// otherwise print the error and the usage itself, before Report does.
func silently(fs *flag.FlagSet, parse func() error) error {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	defer fs.SetOutput(out)
	return parse()
}

// usageError wraps a non-nil err with fs's usage text.
func usageError(fs *flag.FlagSet, err error) error {
	if err == nil {
		return nil
	}
	var b strings.Builder
	out := fs.Output()
	fs.SetOutput(&b)
	defer fs.SetOutput(out)
	if fs.Usage != nil {
		fs.Usage()
	} else {
		fmt.Fprintf(&b, "Usage of %s:\n", fs.Name())
		fs.PrintDefaults()
	}
	return &UsageError{Err: err, Usage: b.String()}
}
