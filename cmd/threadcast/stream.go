package main

// What reduce and compact share: opening the stream and the starting input,
// and folding the stream into a reducer.Thread with the codec's and the
// reducer's diagnostics reported on stderr, one per line.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/envflag"
	"github.com/threadcast/threadcast/history"
	"github.com/threadcast/threadcast/reducer"
)

// streamFlags are the flags every stream-reading subcommand takes.
type streamFlags struct {
	input    string
	protocol string
	thread   string
}

func (f *streamFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.input, "input", "", "start from the RunAgentInput in `FILE` (its messages and state), as a run would")
	fs.StringVar(&f.thread, "thread", "", "the thread `ID` the stream was published to: an event whose threadId (or input.threadId) names another is removed with a warning, as ingest does; empty: no such check, and the view's threadId is \"threadcast\"")
	fs.StringVar(&f.protocol, "protocol", "1.1", "the AG-UI `VERSION` to consume as: 1.1 (encryptedValueType is known; a producer declaring 1.1 is not newer) or 1.0 (a strict 1.0 consumer: encryptedValueType is stripped with a warning, a 1.1 declaration warns as newer)")
}

// parseFlags parses args with fs and returns the stream to read (the one
// positional argument, "-" or none for stdin). ok is false when the caller
// should return status (help was printed on stdout, or the flags were bad:
// the error and the usage were printed on stderr).
func parseFlags(fs *flag.FlagSet, args []string, stdin io.Reader, stdout, stderr io.Writer) (r io.ReadCloser, status int, ok bool) {
	if err := envflag.ParseArgs(fs, args); err != nil {
		return nil, envflag.Report("threadcast "+fs.Name(), err, stdout, stderr), false
	}
	switch fs.NArg() {
	case 0:
		return io.NopCloser(stdin), 0, true
	case 1:
		if fs.Arg(0) == "-" {
			return io.NopCloser(stdin), 0, true
		}
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			fmt.Fprintf(stderr, "threadcast %s: %v\n", fs.Name(), err)
			return nil, exitUsage, false
		}
		return f, 0, true
	default:
		fmt.Fprintf(stderr, "threadcast %s: at most one stream file, got %d arguments\n", fs.Name(), fs.NArg())
		fs.Usage()
		return nil, exitUsage, false
	}
}

// folder folds one stream into a Thread.
type folder struct {
	name   string // subcommand, for messages
	th     *reducer.Thread
	thread string // the subject's thread id (--thread), or "" for no check
	stderr io.Writer
	dec    codec.Decoder
	ev     codec.Event
	seq    uint64
	fatal  bool // a fatal protocol error was reported
	// protocol is the AG-UI version the decoders consume as ("" = the
	// codec's default).
	protocol string
	// until, when not 0, is the last seq folded: each stops reading
	// after it (reduce --until).
	until uint64
}

func newFolder(name string, stderr io.Writer) *folder {
	return &folder{name: name, th: reducer.NewThread("threadcast"), stderr: stderr}
}

// folder returns the folder the flags describe for subcommand name: its
// protocol set and its --input loaded. ok is false (the message written to
// stderr) when a flag's value is unusable: the caller exits with exitUsage.
func (sf *streamFlags) folder(name string, stderr io.Writer) (f *folder, ok bool) {
	f = newFolder(name, stderr)
	if sf.thread != "" {
		f.th, f.thread = reducer.NewThread(sf.thread), sf.thread
	}
	if err := f.setProtocol(sf.protocol); err != nil {
		fmt.Fprintf(stderr, "threadcast %s: --protocol: %v\n", name, err)
		return nil, false
	}
	if sf.input != "" {
		if err := f.loadInput(sf.input); err != nil {
			fmt.Fprintf(stderr, "threadcast %s: --input: %v\n", name, err)
			return nil, false
		}
	}
	return f, true
}

// setProtocol makes the folder's decoders consume as AG-UI version v.
func (f *folder) setProtocol(v string) error {
	if err := f.dec.SetProtocolVersion(v); err != nil {
		return err
	}
	f.protocol = v
	return nil
}

// loadInput sets the thread's starting point from a RunAgentInput file.
// The input's bytes stay referenced by the thread's copy only.
func (f *folder) loadInput(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var d codec.Decoder
	if f.protocol != "" {
		if err := d.SetProtocolVersion(f.protocol); err != nil {
			return err
		}
	}
	in := new(codec.RunInput)
	if err := d.DecodeRunInput(data, in); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, w := range d.Warnings() {
		f.warnf("input: %v", w)
		f.th.Warn(0, reducer.CodecWarning(0, w))
	}
	return f.th.SetInput(in)
}

func (f *folder) warnf(format string, args ...any) {
	fmt.Fprintf(f.stderr, "warning: "+format+"\n", args...)
}

// each reads every event of r, folds it into the thread as ingest does
// (reducer.Thread.ApplyDecoded), and calls fn with each event the codec
// accepted and the reducer's Result. A fatal protocol error or a malformed
// event ends the current run, not the reading: later events are folded too
// (the reducer accepts only RUN_STARTED then), so the view is the one the
// live pipeline shows for the same events. It returns exitUsage if the
// stream could not be read (or framed no event at all), exitRejected if a
// fatal protocol error occurred or the stream broke off or went bad after
// some events, exitOK otherwise.
func (f *folder) each(r io.Reader, fn func(ev *codec.Event, res reducer.Result)) int {
	sr := codec.NewStreamReader(r)
	for {
		if f.until > 0 && f.seq >= f.until {
			break
		}
		raw, err := sr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			var ce *codec.Error
			if !errors.As(err, &ce) || f.seq == 0 {
				// The reader failed, or nothing in the input frames an event.
				fmt.Fprintf(f.stderr, "threadcast %s: unusable stream: %v\n", f.name, err)
				return exitUsage
			}
			// The stream breaks off after delivered events, which stay
			// applied (transports.md §2, patterns.md §1.7). Cut inside an
			// event, it is a truncated run (processing.md X13, L9): no
			// outcome, so the view is left as it stands (a run still
			// running, or one that closed before the cut), and the exit
			// status says the stream did not end cleanly. Bytes that are
			// no event at all are a decode failure, fatal (§3): the stream
			// is rejected there, and no later event can be framed.
			f.seq++
			ce.Seq = f.seq
			fmt.Fprintf(f.stderr, "error: %v\n", err)
			if ce.Kind != codec.KindTruncated {
				f.th.Reject(f.seq, err)
			}
			f.fatal = true
			return exitRejected
		}
		f.seq++
		err = f.dec.Decode(raw, &f.ev)
		warns := f.dec.Warnings()
		for _, w := range warns {
			w.Seq = f.seq
			f.warnf("%v", w)
		}
		var ce *codec.Error
		if errors.As(err, &ce) {
			ce.Seq = f.seq
		}
		if err == nil && f.thread != "" {
			if other := history.OtherThread(&f.ev, f.thread); other != nil {
				f.warnf("seq %d: %v", f.seq, other)
				history.FoldStored(f.th, f.thread, f.seq, &f.ev, nil, warns)
				continue
			}
		}
		res := f.th.ApplyDecoded(f.seq, &f.ev, err, warns)
		switch {
		case err != nil && ce != nil && ce.Verdict != codec.Fatal:
			f.warnf("%v", ce)
			continue
		case err != nil:
			// A malformed event: the run ends here, the stream goes on.
			fmt.Fprintf(f.stderr, "error: %v\n", err)
			f.fatal = true
			continue
		}
		for _, w := range res.Warnings {
			f.warnf("%s", w.Message)
		}
		if fn != nil {
			fn(&f.ev, res)
		}
		if res.Fatal != nil {
			fmt.Fprintf(f.stderr, "error: %v\n", res.Fatal)
			f.fatal = true
		}
	}
	if f.fatal {
		return exitRejected
	}
	return exitOK
}
