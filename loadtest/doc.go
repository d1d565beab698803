// Command loadtest is Threadcast's load generator: simulated agents publish
// realistic AG-UI streams through the publisher SDK while simulated
// subscribers follow the threads over SSE and WebSocket, in agui and view
// mode; it measures end-to-end latency and throughput and, at the end,
// checks that nothing was lost, duplicated or reordered.
//
//	go run ./loadtest [flags]                       # against an embedded Threadcast
//	go run ./loadtest --target http://127.0.0.1:8080 --nats-url nats://127.0.0.1:4222 --auth-key K
//
// # What runs
//
// Agents: --agents goroutines, each owning threads/agents of the --threads
// threads (a tenant per agent, --tenants tenants round robin), publishing
// one event per tick round robin over its threads so that many runs are
// open at once. Their ticks are spread evenly over the interval (agent i
// ticks i/agents of an interval after agent 0), as independent agents'
// would be, and each thread's first run is made before the load starts. The events are the demo generator's (demo.NewScript: runs
// with reasoning, tool calls, subagents, activities, state patches, long
// streamed answers, errors and cancellations), stamped with the wall clock
// (`timestamp`, ms) and published with agent.Publisher (batching on, its
// defaults). The total rate is --rate events/s, shaped over time by the
// scenario. Every acked event is applied, with its stream seq, to an offline
// reducer.Thread of its thread (the reference the check compares with) and
// its publish time is recorded under that seq.
//
// Subscribers: --subscribers, each on one thread: --hot-threads threads
// share --hot-fraction of them (a few threads watched by thousands), the
// rest are dealt one per thread over the other threads (the long tail).
// --ws of them use WebSocket, --view of them view mode (independently, so
// all four variants occur). Each folds what it receives: agui streams into a
// reducer.Thread (as any AG-UI consumer would), view streams into a view
// document (the wire format of web/static/viewdoc.js). A subscriber starts
// when its thread's first event is stored, reconnects on a dropped stream
// with its cursor (SSE Last-Event-ID, view WebSocket ?after=; agui over
// WebSocket has no cursor and restarts from a snapshot), and restarts from a
// fresh snapshot after a gap.
//
// Joining is the expensive part of a subscriber's life: it is a snapshot
// request, answered by the thread's ingest shard between two batches from a
// bounded queue (pipeline: 256 per shard, "busy" beyond), and a refused
// join is a 503. With 5,000 subscribers over 2,000 threads joining within
// 5 s on this 2-core machine the queues overflowed and the retries kept
// them full (thousands of 503s; with package node's single NATS connection
// no frame was delivered for the whole 20-s load phase); spread over 20 s,
// every join succeeded. Hence --join-over, and EventSource-like backoff.
//
// # What is measured
//
// Latency is per stored event per subscriber that received it live: from
// the Publish call to the arrival of the frame that carried it — the frame
// end's SSE id, or the view payload's seq, names the stream seq it brings
// the view to, and every event with a seq up to it not yet accounted was
// delivered then. Agui over WebSocket carries no seq; there content and
// delta events are measured from their `timestamp` (1 ms resolution). Events
// a subscriber got through a snapshot are not samples; slow subscribers are
// not sampled. The histogram (hist.go) is log-linear, HDR style: exact
// below 128 ns, then 128 sub-buckets per power of two (≤0.8 % error), lock-free.
// Also: events/s in, messages/s and bytes/s out, resyncs, reconnects,
// errors, per second; the fanout's resync and drop counters from /metrics.
//
// # The check
//
// After --duration the agents close the runs they left open (RUN_ERROR, as
// the demo agents do), each at its pace during the load (--rate over
// --agents), so the close is not a burst of one event per thread in one
// instant; the publisher drains, and the settle phase waits (up
// to --settle) until every thread's REST view (GET /v1/threads/{thread}) is
// at the last stored seq and every subscriber has caught up. Then: every
// thread's REST view must equal its offline reduction (the whole view,
// seq included); every view-mode subscriber's document must equal the REST
// view, and every agui-mode subscriber's messages and state must (an AG-UI
// stream restates messages and state on join; a late joiner cannot rebuild
// the run history); no gap (a view payload whose prev is not the held seq),
// no duplicate (a seq at or below the held one), no fold error. The run
// fails (exit status 1) otherwise, or if it did not settle.
//
// # Scenarios (--scenario)
//
//   - steady: the target rate throughout.
//   - ramp: from 10 % of the rate to 100 %, linearly over the run: where do
//     latency and throughput bend.
//   - burst: 30 % of the rate, with 3-second bursts at 300 % every 10 s
//     (same mean as steady ×0.84): batching and queueing under surges.
//   - reconnect-storm: steady; at half time half of the subscribers drop
//     their connection at once and reconnect immediately with their cursor:
//     the resume path (ring) and the snapshot path under a thundering herd.
//   - slow-subscribers: steady; 10 % of the subscribers pause 250 ms after
//     every message they read (4 messages/s): their backlogs are
//     consolidated (fewer, larger messages) rather than dropped, and the
//     report's "Slow subscribers" section says whether they converged and
//     what they received beside fast subscribers of the same threads; the
//     others' latency must not suffer. Their receive buffer is 16 KiB
//     (SO_RCVBUF, set before they connect): the server paces a stream by
//     the window its client announces, and a receiver's window does not
//     shrink for the first tens of KiB left unread in a larger buffer, so
//     a slow reader with the kernel's default buffer has that much raw
//     backlog to read before it sees a consolidated message. A scenario
//     file's "slowRecvBuffer" sets it (0: the kernel's default).
//   - ingest-restart: steady; at 40 % of the run the embedded ingest is
//     stopped (graceful drain), left down for 2 s, and a new one started:
//     recovery from checkpoints, frames resuming, subscribers continuing.
//     Needs the embedded system.
//
// Or --scenario-file FILE: a JSON scenario with a piecewise-linear rate
// curve and any of the disturbances above (scenariofile.go shows the
// format).
//
// # Several fanout nodes
//
// --target takes a comma-separated list of fanout URLs (and --nats-url one
// of NATS servers): subscriber i connects to node i mod n and, after a
// failed connection, to the next one, resuming with its cursor, as a client
// behind a load balancer would; REST views are read from the first node
// that answers.
//
// # Report
//
// --out DIR (default a new directory under the temp dir, named on stderr)
// receives report.md (also printed), chart.svg (latency p50/p99 and
// throughput per second, drawn here without external tools) and
// report.json (every figure and the per-second series).
//
// # Traces
//
// --trace FILE writes the Go execution trace of the load's first
// --trace-for (5 s); --trace-stalls DIR keeps the last five seconds in a
// flight recorder and writes them for every second of the load whose p50
// passes 3x the median of the seconds before it (at most five a run,
// stalls.go). Both cover this process: the load generator and an embedded
// Threadcast.
//
// # Bounds
//
// A run stops by itself after --duration plus at most --settle. Targets
// other than loopback addresses are refused unless --allow-remote is given.
// The embedded system (without --target) lives in a temporary directory,
// on loopback ports, and is removed at the end: --embedded node (the
// default) is package node, the assembly `threadcast serve` runs (embedded
// NATS with JetStream, ingest and the fanout); --embedded parts is two
// nodes, one with the embedded NATS and the fanout, the other with ingest
// alone on the first's NATS, as separate processes would be, so that its
// ingest can be restarted alone (ingest-restart selects it).
//
// # The generator's own weight
//
// Without --target the load generator and the system it measures share one
// process, so they share its collector: every cycle marks the generator's
// heap too, and a mark phase slows every goroutine that allocates. So the
// generator keeps its share small. The setup (tenants, tokens, every
// thread's first run, the subscribers) is built, and its garbage collected,
// before the clock starts; left to the collector, it would be marked in the
// first seconds of the load, on the join storm they measure. Each thread's
// current run is kept as one byte slice and its events' offsets
// (simThread), not as some 400 demo.Event values: 2,000 threads' runs would
// be close to a million small objects, 11 % of the process's heap objects
// in the storm run of docs/latency.md. What remains of the generator is the
// subscribers' folds, which the check needs, and their HTTP clients.
//
// # Concurrency
//
// Every goroutine (agents, subscribers, progress, scenario events, the
// embedded system) is started by Run and waited for before it returns. A
// subscriber's fold and counters belong to its goroutine and are read only
// after it returned; shared counters are atomics; a thread's acked-event
// table is guarded by its mutex (the agent appends, subscribers read).
package main
