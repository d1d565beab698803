package ingestrole

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/demo"
	"github.com/threadcast/threadcast/natsembed"
	"github.com/threadcast/threadcast/node"
	"github.com/threadcast/threadcast/otelexport"
	"github.com/threadcast/threadcast/pipeline"
)

// Side is the running ingest side of one node (node.IngestSide); the node
// calls its methods in the order that interface documents.
type Side struct {
	cfg  Config
	h    node.Host
	node node.Config
	log  *slog.Logger

	srv     *server.Server // embedded server, or nil
	in      ingester       // nil when ingest is off
	storage *pipeline.StorageWatch
	bridge  *agent.Publisher     // the bridge's publisher, or nil
	otlp    *otelexport.Exporter // ingest's run export, or nil

	demoConns []demoConn
	// The running parts: each is stopped by its cancel and has returned
	// when its done is closed.
	demo, ingest node.Part
	demoStats    demo.Stats // set before demo.Done() is closed
}

// ingester is ingest in either partition mode: *pipeline.Restarting
// (static) or *pipeline.LeasedIngest (lease).
type ingester interface {
	Run(ctx context.Context, drain time.Duration) error
	Ready() bool
	Lag() uint64
}

// Config returns the side's configuration.
func (s *Side) Config() Config { return s.cfg }

// Server returns the embedded NATS server (nil: the node uses an external
// one), for tests and tools that inspect it.
func (s *Side) Server() *server.Server { return s.srv }

// Lag returns the messages waiting for ingest (0 when ingest is off).
func (s *Side) Lag() uint64 {
	if s.in == nil {
		return 0
	}
	return s.in.Lag()
}

// StartServer starts the embedded NATS server in DataDir on NatsListen.
func (s *Side) StartServer(auth *node.ServerAuth) (string, error) {
	if err := PrepareDataDir(s.cfg.DataDir); err != nil {
		return "", err
	}
	host, port, err := listenAddr(s.cfg.NatsListen)
	if err != nil {
		return "", err
	}
	sc := natsembed.DefaultConfig()
	sc.Host, sc.Port, sc.StoreDir = host, port, s.cfg.DataDir
	sc.MaxPayload = max(s.cfg.Pipeline.MaxMsgSize, 1<<20)
	if auth != nil {
		sc.Auth = &natsembed.Auth{Services: auth.Services, AgentAccount: auth.AgentAccount, CalloutIssuer: auth.CalloutIssuer}
	}
	sc.OnWriteError = s.storage.ReportWriteError
	if s.srv, err = natsembed.Start(sc); err != nil {
		return "", err
	}
	url := s.srv.ClientURL()
	s.log.Info("embedded NATS server started", "url", url, "data", s.cfg.DataDir)
	return url, nil
}

// NotReady says why ingest cannot do its job: consumers not bound, lag
// over ReadyMaxLag, or the store full ("" when none).
func (s *Side) NotReady() string {
	switch {
	case s.in != nil && !s.in.Ready():
		return "ingest: consumers not bound"
	case s.in != nil && s.in.Lag() > s.cfg.ReadyMaxLag:
		return fmt.Sprintf("ingest: lag %d over %d", s.in.Lag(), s.cfg.ReadyMaxLag)
	case s.storage.Check() != nil:
		return s.storage.Check().Error()
	}
	return ""
}

// StopAgents stops the demo agents (each open run ends with RUN_ERROR) and
// waits for their publishers' acks.
func (s *Side) StopAgents() error {
	var errs []error
	if s.demo.Started() {
		errs = keep(errs, "demo", s.demo.Stop())
	}
	for _, d := range s.demoConns {
		errs = keep(errs, "demo publisher "+d.tenant, s.closePub(d.pub))
		d.close()
	}
	if s.demo.Started() {
		st := s.demoStats
		s.log.Info("demo agents stopped", "events", st.Events, "runs", st.Runs, "threads", st.Threads, "errors", st.Errors)
	}
	return errors.Join(errs...)
}

// StopBridge waits for the acks of the bridge's publisher.
func (s *Side) StopBridge() error {
	return errors.Join(keep(nil, "bridge publisher", s.closePub(s.bridge))...)
}

// StopIngest stops the reducers: they stop fetching, finish, checkpoint
// and ack; then the OTLP export is flushed.
func (s *Side) StopIngest() error {
	var errs []error
	if s.ingest.Started() {
		err := s.ingest.Stop()
		if err != nil {
			s.log.Error("ingest drained: views not all checkpointed", "err", err)
		} else {
			s.log.Info("ingest drained: views checkpointed")
		}
		errs = keep(errs, "ingest", err)
	}
	// The runs that ended while ingest drained are in the export's queue:
	// flushed now, within the drain bound.
	if s.otlp != nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.node.Drain)
		err := s.otlp.Shutdown(ctx)
		cancel()
		// Telemetry that could not leave is counted and logged, not a
		// failure of the node's shutdown.
		if err != nil {
			s.log.Warn("OTLP export not flushed", "err", err)
		}
	}
	return errors.Join(errs...)
}

// StopServer shuts the embedded server down and waits for it.
func (s *Side) StopServer() {
	if s.srv == nil {
		return
	}
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	s.log.Info("embedded NATS server stopped")
}

// keep adds err, named by what, to errs unless it is nil or a
// cancellation.
func keep(errs []error, what string, err error) []error {
	if err != nil && !errors.Is(err, context.Canceled) {
		errs = append(errs, fmt.Errorf("node: %s: %w", what, err))
	}
	return errs
}

// closePub waits, within the node's drain bound, for p's acks (nil: no
// publisher).
func (s *Side) closePub(p *agent.Publisher) error {
	if p == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.node.Drain)
	defer cancel()
	return p.Close(ctx)
}

// PrepareDataDir creates dir (mode 0700) and proves it writable, so that an
// unusable directory is reported as such (node.ErrDataDir) rather than as a
// JetStream failure.
func PrepareDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%w: %w", node.ErrDataDir, err)
	}
	f, err := os.CreateTemp(dir, ".write-test-*")
	if err != nil {
		return fmt.Errorf("%w: %s is not writable: %w", node.ErrDataDir, dir, err)
	}
	name := f.Name()
	_ = f.Close()
	_ = os.Remove(name)
	return nil
}

// listenAddr parses the embedded server's address and, for a fixed port,
// proves it free: nats-server reports a taken port only in its own log and
// then lets the start-up time out, which would leave the user waiting for
// an unrelated error. (The port could be taken between this check and the
// server's listen; the start-up then fails with natsembed.ErrStart.)
func listenAddr(addr string) (string, int, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%w: %q: %w", node.ErrNatsListen, addr, err)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < -1 || port > 65535 {
		return "", 0, fmt.Errorf("%w: %q: bad port", node.ErrNatsListen, addr)
	}
	if port <= 0 {
		return host, -1, nil // a free port, as nats-server spells it
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", 0, fmt.Errorf("%w: %w", node.ErrNatsListen, err)
	}
	_ = ln.Close()
	return host, port, nil
}
