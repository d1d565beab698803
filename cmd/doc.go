// Package cmd holds no code: its directories are Threadcast's commands
// (threadcast, ingest, fanout). Its test builds every command of the module
// (these, bench and loadtest: every main package) and holds each to the
// command-line conventions: -h and --help print the usage on stdout and
// exit 0; a flag the command does not know prints the error and the usage
// on stderr and exits 2. The commands follow them through envflag.Report.
// It also holds the import graph to its seams: cmd/fanout links nothing of
// the ingest side, and package wire imports only the standard library and
// the NATS client.
package cmd
