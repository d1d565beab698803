// Package natsembed runs an embedded nats-server with JetStream in the
// process: for single-process deployments (threadcast serve, cmd/ingest
// without --nats-url) and for tests. Start configures it (listen address,
// file store, max payload, optionally locked to Threadcast's service nkeys
// and an auth callout, with agents in an account of their own) and returns
// once it accepts connections.
//
// # Concurrency contract
//
// Start is safe for concurrent use; each call starts its own server. The
// caller owns the server it returns: Shutdown then WaitForShutdown stops it
// and every goroutine it started. The OnWriteError callback is called from
// the server's goroutines.
package natsembed
