// Package ingestrole is the ingest side of a node (node.IngestRole): the
// sharded reducers (package pipeline) in static or lease partition mode,
// the HTTP bridge (package bridge), the demo agents (package demo, through
// the publisher SDK, package agent) and the embedded NATS server (package
// natsembed). A node holds it only through node.IngestRole, so that a node
// without it, the fanout command's, links none of these.
//
// Its Config is what a command that runs ingest, the demo or an embedded
// server (cmd/ingest, `threadcast serve`, the load test) sets as the
// node's Config.IngestRole; Open gives the node a Side, whose methods the
// node calls in the order node.IngestSide documents: the embedded server
// first, the stream, the reducers and the bridge before the HTTP port
// opens, the demo agents after; on stop the demo agents first, the bridge's
// acks once HTTP has stopped, then the reducers' drain and checkpoints,
// and the embedded server last, after the node's connections have closed.
//
// # Concurrency
//
// The node calls a Side's start and stop methods from one goroutine;
// NotReady, Lag and DemoStats are safe beside them. Every goroutine a Side
// starts is stopped and waited for by its Stop methods.
package ingestrole
