// Package envflag parses flag sets whose every flag can also be set by an
// environment variable THREADCAST_<FLAG> (the flag's name upper case, '-' as
// '_': --nats-url is THREADCAST_NATS_URL); a flag on the command line wins
// over the environment. It is the one place the commands (cmd/fanout,
// cmd/ingest, threadcast serve) spell that rule, and the one place every
// command's way of answering its command line is written: -h or --help
// prints the usage on stdout and exits 0; a flag it refuses prints the error
// and the usage on stderr and exits 2 (Report; ParseArgs for the commands
// that read no environment).
//
// The package never reads the process environment itself: the caller passes
// a getenv function (os.Getenv in cmd/*, a map in tests), because only cmd/*
// reads the environment (STYLE.md).
//
// Errors are not prefixed with "envflag:": they are the user's command-line
// mistakes, reported by the command under its own name, with the same text
// as the flag package's own errors for the command line.
//
// Concurrency: Parse mutates the FlagSet and the variables its flags point
// to, so a FlagSet must not be parsed by two goroutines at once; there is no
// package state.
package envflag
