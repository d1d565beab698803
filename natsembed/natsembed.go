package natsembed

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/threadcast/threadcast/wire"
)

// Config configures an embedded nats-server with JetStream, for
// single-process deployments (cmd/ingest without --nats-url, cmd/threadcast)
// and for tests.
type Config struct {
	// Host and Port to listen on. Port -1 picks a free port (tests); 0 means
	// the NATS default 4222.
	Host string
	Port int
	// StoreDir is JetStream's file store directory. Required: an embedded
	// server without a store would lose the event log on restart.
	StoreDir string
	// MaxPayload is the server's max message size (0 = DefaultMaxPayload,
	// 8 MiB; nats-server allows up to 64 MiB). Must be ≥ the stream's
	// MaxMsgSize; messages larger than it (frames, snapshot replies) travel
	// in parts.
	MaxPayload int32
	// MaxFileStore bounds JetStream's file store, in bytes (0: the server's
	// default, 75% of the disk's free space at start). Over it a write is
	// refused at once with "insufficient resources".
	MaxFileStore int64
	// OnWriteError, when set, is called with the server's log line when
	// JetStream reports a critical write error (a full disk: ENOSPC). After
	// one, nats-server stops writing that stream until it restarts, and
	// logs nothing else about it; pipeline.StorageWatch.ReportWriteError
	// keeps it.
	OnWriteError func(line string)
	// StartTimeout bounds the wait for the server to accept connections.
	StartTimeout time.Duration
	// Logs enables the server's own logging to stderr.
	Logs bool
	// Auth locks the server (see Auth). Nil leaves it open to
	// anonymous clients: only for tests that exercise ingest alone.
	Auth *Auth
}

// Auth is how an embedded server authorizes its clients: Threadcast's
// own services by nkey, with full access, in the global account (which
// holds the event stream and the buckets); every other client through the
// auth callout (package busauth), which must be answering on one of the
// Services connections before any other client connects, and which places
// agents in AgentAccount.
//
// Why agents have an account of their own: NATS checks a publish's subject
// against the publisher's permissions but not its reply subject, so an
// agent in the services' account could have JetStream send the ack of its
// own event to any subject there (another tenant's view frames, a KV
// checkpoint). AgentAccount imports only the events subjects, as a service
// from the global account; an ack travels back on the import's private
// reply subject to the agent's account, where nothing but agents' inboxes
// can listen.
type Auth struct {
	// Services are the public user nkeys (U...) of Threadcast's own
	// connections. At least one.
	Services []string
	// CalloutIssuer is the public account nkey (A...) that signs the
	// callout's answers; the server accepts no other signature.
	CalloutIssuer string
	// AgentAccount names the account agents are placed in. Required.
	AgentAccount string
}

// DefaultMaxPayload is Config.MaxPayload's value when it is 0: 8 MiB, the
// largest max_payload nats-server recommends, and the event stream's
// default MaxMsgSize (pipeline.DefaultMaxMsgSize), so that the largest
// event the stream accepts also fits in one message of the server.
const DefaultMaxPayload = 8 << 20

// DefaultConfig returns the defaults: loopback, a random port, 10 s
// start timeout. StoreDir is left for the caller.
func DefaultConfig() Config {
	return Config{Host: "127.0.0.1", Port: -1, StartTimeout: 10 * time.Second}
}

// ErrStart is returned when the embedded server does not become ready.
var ErrStart = errors.New("natsembed: embedded nats-server did not start")

// Start starts an embedded nats-server with JetStream and waits until it
// accepts connections. The caller owns the server: Shutdown then
// WaitForShutdown stops it and every goroutine it started. Connect with
// s.ClientURL() or nats.InProcessServer(s).
func Start(cfg Config) (*server.Server, error) {
	if cfg.StoreDir == "" {
		return nil, fmt.Errorf("%w: no JetStream store directory", ErrStart)
	}
	if cfg.MaxPayload <= 0 {
		cfg.MaxPayload = DefaultMaxPayload
	}
	opts := &server.Options{
		Host:                  cfg.Host,
		Port:                  cfg.Port,
		JetStream:             true,
		StoreDir:              cfg.StoreDir,
		NoSigs:                true, // signals belong to the process owner (cmd/*), not to a library
		MaxPayload:            cfg.MaxPayload,
		JetStreamMaxStore:     cfg.MaxFileStore,
		DisableShortFirstPing: true,
	}
	if !cfg.Logs {
		opts.NoLog = true
	}
	if a := cfg.Auth; a != nil {
		if len(a.Services) == 0 || a.CalloutIssuer == "" || a.AgentAccount == "" || a.AgentAccount == server.DEFAULT_GLOBAL_ACCOUNT {
			return nil, fmt.Errorf("%w: auth needs service nkeys, a callout issuer and an agents' account other than the global one", ErrStart)
		}
		for _, k := range a.Services {
			opts.Nkeys = append(opts.Nkeys, &server.NkeyUser{Nkey: k})
		}
		opts.AuthCallout = &server.AuthCallout{Issuer: a.CalloutIssuer, Account: server.DEFAULT_GLOBAL_ACCOUNT, AuthUsers: a.Services}
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	if cfg.Logs {
		s.ConfigureLogger()
	}
	if cfg.OnWriteError != nil {
		// The server's logger, wrapped (or alone, without Logs) to spot
		// the write errors.
		s.SetLoggerV2(&writeErrorLogger{next: serverLogger(s, cfg.Logs), on: cfg.OnWriteError}, false, false, false)
	}
	go s.Start() // Start returns once listeners run; the server's goroutines are stopped by Shutdown.
	timeout := cfg.StartTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	if !s.ReadyForConnections(timeout) {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, fmt.Errorf("%w within %v", ErrStart, timeout)
	}
	if cfg.Auth != nil {
		if err := agentAccount(s, cfg.Auth.AgentAccount); err != nil {
			s.Shutdown()
			s.WaitForShutdown()
			return nil, fmt.Errorf("%w: %w", ErrStart, err)
		}
	}
	return s, nil
}

// agentAccount creates the agents' account, importing the events subjects
// from the global account (see Auth). It is created once the server
// runs: an account configured beforehand would make the global account
// lose its JetStream (which only a server with no configured accounts
// grants it), and with it the event log already in StoreDir. No agent can
// connect before: the callout has no answer for them until the node starts
// it.
func agentAccount(s *server.Server, name string) error {
	acc, err := s.RegisterAccount(name)
	if err != nil {
		return fmt.Errorf("agents' account %q: %w", name, err)
	}
	g := s.GlobalAccount()
	if err := g.AddServiceExport(wire.EventsWildcard, nil); err != nil {
		return fmt.Errorf("export %s: %w", wire.EventsWildcard, err)
	}
	if err := acc.AddServiceImport(g, wire.EventsWildcard, ""); err != nil {
		return fmt.Errorf("import %s: %w", wire.EventsWildcard, err)
	}
	return nil
}

// writeErrorLogger passes the server's log on and calls on for each
// critical write error.
type writeErrorLogger struct {
	next server.Logger // nil: log nothing
	on   func(string)
}

func (l *writeErrorLogger) Noticef(format string, v ...any) {
	if l.next != nil {
		l.next.Noticef(format, v...)
	}
}

func (l *writeErrorLogger) Warnf(format string, v ...any) {
	if l.next != nil {
		l.next.Warnf(format, v...)
	}
}

func (l *writeErrorLogger) Fatalf(format string, v ...any) {
	if l.next != nil {
		l.next.Fatalf(format, v...)
	}
}

func (l *writeErrorLogger) Errorf(format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	if strings.Contains(line, "critical write error") || strings.Contains(line, "no space left on device") {
		l.on(line)
	}
	if l.next != nil {
		l.next.Errorf(format, v...)
	}
}

func (l *writeErrorLogger) Debugf(format string, v ...any) {
	if l.next != nil {
		l.next.Debugf(format, v...)
	}
}

func (l *writeErrorLogger) Tracef(format string, v ...any) {
	if l.next != nil {
		l.next.Tracef(format, v...)
	}
}

// serverLogger returns the logger ConfigureLogger installed (when logs
// are on), or nil.
func serverLogger(s *server.Server, logs bool) server.Logger {
	if !logs {
		return nil
	}
	return s.Logger()
}
