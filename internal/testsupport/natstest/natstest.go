// Package natstest starts real nats-server instances inside a test process
// and connects to them. It is apart from testsupport so that tests that need
// no server do not link nats-server.
//
// Every server listens on 127.0.0.1 on a port of its own, logs nothing,
// installs no signal handlers and, with JetStream, keeps its store in a
// directory of t.TempDir(); t.Cleanup shuts it down and waits for it. The
// options a test needs beyond that (no JetStream, a max payload, accounts
// and users) are functions that change the server.Options before the start.
//
// Concurrency: every function may be called from parallel tests; a Server's
// Restart is for the goroutine of its test.
package natstest

import (
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ReadyTimeout is how long Start waits for a server to accept connections.
const ReadyTimeout = 10 * time.Second

// Option changes the options of a server before it starts.
type Option func(*server.Options)

// NoJetStream starts a server without JetStream (core NATS only).
func NoJetStream(o *server.Options) { o.JetStream = false }

// MaxPayload sets the largest message the server accepts.
func MaxPayload(n int32) Option { return func(o *server.Options) { o.MaxPayload = n } }

// MaxPending sets how many bytes the server buffers for a slow client.
func MaxPending(n int64) Option { return func(o *server.Options) { o.MaxPending = n } }

// StoreDir keeps the JetStream store in dir rather than in a new temporary
// directory.
func StoreDir(dir string) Option { return func(o *server.Options) { o.StoreDir = dir } }

// Server is a running embedded nats-server.
type Server struct {
	*server.Server
	t    testing.TB
	opts server.Options
	port int
}

// Start starts a server with JetStream (unless NoJetStream) on a random
// port, changed by opts, and shuts it down in t.Cleanup. It fails t when the
// server cannot start or is not ready within ReadyTimeout.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	o := server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, NoLog: true, NoSigs: true}
	for _, f := range opts {
		f(&o)
	}
	if o.JetStream && o.StoreDir == "" {
		o.StoreDir = t.TempDir()
	}
	s := &Server{t: t, opts: o}
	s.Server = s.start(o)
	s.port = s.Addr().(*net.TCPAddr).Port
	return s
}

func (s *Server) start(o server.Options) *server.Server {
	s.t.Helper()
	ns, err := server.NewServer(&o)
	if err != nil {
		s.t.Fatal(err)
	}
	go ns.Start()
	s.t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(ReadyTimeout) {
		s.t.Fatal("nats-server not ready")
	}
	return ns
}

// Port returns the port the server listens on (or, stopped, listened on).
func (s *Server) Port() int { return s.port }

// Stop shuts the server down and waits until it has stopped.
func (s *Server) Stop() {
	s.Shutdown()
	s.WaitForShutdown()
}

// Restart stops the server if it runs and starts it again with the same
// options on the same port (and with the same store), so that clients
// reconnect to it. It fails the test when the new server cannot start.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.opts.Port = s.port
	s.Server = s.start(s.opts)
}

// Connect connects to url with opts and closes the connection in t.Cleanup.
func Connect(t testing.TB, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// JetStream returns the JetStream context of nc.
func JetStream(t testing.TB, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
