// Command threadcast is Threadcast in one binary. Each subcommand lives in
// its own file, which registers it from an init function; adding a
// subcommand is adding one file.
//
//	threadcast [serve] [flags]          run everything: NATS, ingest, fanout, dashboard, demo
//	threadcast token   [flags]          mint a subscriber token
//	threadcast publish [flags] [FILE]   publish a recorded stream into a running Threadcast
//	threadcast reduce  [flags] [FILE]   print the view a stream produces
//	threadcast compact [flags] [FILE]   print the stream, compacted, as JSONL
//	threadcast export  [flags]          write a tenant's runs, messages and tool calls as Parquet or NDJSON
//
// Without a subcommand (no arguments, or flags only) it runs serve.
//
// Exit status: 0 on success, 1 when the stream was rejected (a fatal protocol
// error) or the server could not start or failed, 2 for unusable input or
// bad flags.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// Exit statuses shared by every subcommand.
const (
	exitOK       = 0
	exitRejected = 1 // a fatal protocol error; the output up to it was printed
	exitUsage    = 2 // unusable input, bad flags, unknown subcommand
)

// command is one subcommand. run gets the arguments after the subcommand's
// name and returns the exit status; it must not call os.Exit, so that tests
// can run it in-process.
type command struct {
	name    string
	summary string
	run     func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

// commands is filled by the init functions of the subcommand files, before
// main runs, and only read afterwards.
var commands = map[string]command{}

func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("threadcast: subcommand registered twice: " + c.name)
	}
	commands[c.name] = c
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run dispatches to the subcommand named by args[0].
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		return commands["serve"].run(nil, stdin, stdout, stderr)
	case args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help":
		usage(stdout)
		return exitOK
	case strings.HasPrefix(args[0], "-"):
		// Flags without a subcommand are serve's: `threadcast --http :9090`.
		return commands["serve"].run(args, stdin, stdout, stderr)
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "threadcast: unknown subcommand %q\n\n", args[0])
		usage(stderr)
		return exitUsage
	}
	return c.run(args[1:], stdin, stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: threadcast [<subcommand>] [flags]   (no subcommand: serve)")
	fmt.Fprintln(w, "\nsubcommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'threadcast <subcommand> --help' for its flags.")
	fmt.Fprintln(w, "Exit status: 0 ok, 1 stream rejected (fatal protocol error) or server failed, 2 unusable input or bad flags.")
}
