package pipeline

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ServerConfig configures an embedded nats-server with JetStream, for
// single-process deployments (cmd/ingest without --nats-url, cmd/threadcast)
// and for tests.
type ServerConfig struct {
	// Host and Port to listen on. Port -1 picks a free port (tests); 0 means
	// the NATS default 4222.
	Host string
	Port int
	// StoreDir is JetStream's file store directory. Required: an embedded
	// server without a store would lose the event log on restart.
	StoreDir string
	// MaxPayload is the server's max message size (0 = DefaultMaxMsgSize,
	// 8 MiB; nats-server allows up to 64 MiB). Must be ≥ the stream's
	// MaxMsgSize; messages larger than it (frames, snapshot replies) travel
	// in parts.
	MaxPayload int32
	// StartTimeout bounds the wait for the server to accept connections.
	StartTimeout time.Duration
	// Logs enables the server's own logging to stderr.
	Logs bool
}

// DefaultServerConfig returns the defaults: loopback, a random port, 10 s
// start timeout. StoreDir is left for the caller.
func DefaultServerConfig() ServerConfig {
	return ServerConfig{Host: "127.0.0.1", Port: -1, StartTimeout: 10 * time.Second}
}

// ErrServerStart is returned when the embedded server does not become ready.
var ErrServerStart = errors.New("pipeline: embedded nats-server did not start")

// StartServer starts an embedded nats-server with JetStream and waits until it
// accepts connections. The caller owns the server: Shutdown then
// WaitForShutdown stops it and every goroutine it started. Connect with
// s.ClientURL() or nats.InProcessServer(s).
func StartServer(cfg ServerConfig) (*server.Server, error) {
	if cfg.StoreDir == "" {
		return nil, fmt.Errorf("%w: no JetStream store directory", ErrServerStart)
	}
	if cfg.MaxPayload <= 0 {
		cfg.MaxPayload = DefaultMaxMsgSize
	}
	opts := &server.Options{
		Host:                  cfg.Host,
		Port:                  cfg.Port,
		JetStream:             true,
		StoreDir:              cfg.StoreDir,
		NoSigs:                true, // signals belong to the process owner (cmd/*), not to a library
		MaxPayload:            cfg.MaxPayload,
		DisableShortFirstPing: true,
	}
	if !cfg.Logs {
		opts.NoLog = true
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrServerStart, err)
	}
	if cfg.Logs {
		s.ConfigureLogger()
	}
	go s.Start() // Start returns once listeners run; the server's goroutines are stopped by Shutdown.
	timeout := cfg.StartTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	if !s.ReadyForConnections(timeout) {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, fmt.Errorf("%w within %v", ErrServerStart, timeout)
	}
	return s, nil
}
