// Command chaos runs a Threadcast cluster as separate OS processes under
// load and injects faults into it: three nats-server processes routed as a
// JetStream cluster (replicas 3) with the configuration of
// docs/production.md ("Locking the bus": the service nkey, the auth
// callout), two cmd/ingest processes in lease mode, two cmd/fanout
// processes, and the load test (cmd loadtest, a process of its own: agents
// through the SDK with tenant tokens, subscribers over SSE and WebSocket
// spread over both fanouts). scripts/chaos.sh builds the binaries and runs
// it:
//
//	scripts/chaos.sh 10m
//
// # Faults
//
// Every --fault-min to --fault-max (uniform, seeded by --seed), once the
// cluster is healthy again, the harness injects the next kind of a seeded
// shuffle of all seven (so that a short run still sees each), on a random
// process of that kind:
//
//   - nats-kill, ingest-kill, fanout-kill: SIGKILL to the process group,
//     restart after 0.5–2 s (the same store and flags);
//   - nats-stop, ingest-stop, fanout-stop: SIGSTOP, SIGCONT after 2–5 s;
//   - nats-partition: the server's routes are cut for 3–8 s. Every route
//     goes through a TCP proxy the harness owns (proxies[i][j] carries
//     server i's route to server j; each server advertises a route address
//     nothing listens on, so gossip teaches none a direct way round); a
//     cut closes the routes to and from the server and refuses new ones,
//     while its clients stay connected.
//
// A process that exits without the harness causing it is restarted (an
// orchestrator would) and listed in the report.
//
// # Time to recover
//
// The monitor samples every 250 ms: each process's probe (nats-server's
// /healthz, which waits for its JetStream assets to be current; ingest's
// and fanout's /readyz) and the ingests' threadcast_ingest_leases_held.
// The cluster is healthy when every probe answers 200 and the leases held
// sum to the partition count. For a fault injected at t0 and undone at t1:
//
//   - ready = the first healthy sample at or after t1, minus t0;
//   - recover = the end of the first second of the load test's series (its
//     deliveries per second, every subscriber's messages), ending after
//     the ready sample, with deliveries ≥ 90 % of the mean of the 5 whole
//     seconds before t0; minus t0. It is quantised to the series' seconds
//     and includes the fault's own duration (a pause of 4 s recovers in
//     no less than 4 s). A fault not recovered before the load ends
//     counts as not recovered.
//
// # Verdict
//
// Pass needs both: the load test's check (every thread's REST view equals
// the offline reduction of the events the agents had acked, every
// subscriber's final view equals its thread's REST view, no gap,
// duplicate or fold error, nothing tainted by a failed publish, settled
// within --settle), and the harness's own: the event stream read back as
// stored, every thread folded offline as ingest folds
// (history.FoldStored), equal to its REST view at the same seq, and no
// message stored twice in a thread. report.md (also printed) and
// report.json go to --out ($THREADCAST_ARTIFACTS/chaos by default). Exit
// status: 0 pass, 1 a correctness failure, 2 a run that could not start.
//
// # Processes
//
// Each process runs in its own process group and gets SIGKILL if the
// harness dies (Pdeathsig); at the end, or on SIGINT/SIGTERM, the harness
// stops the fanouts, then the ingests (SIGTERM, their drain, SIGKILL after
// 15 s), then the servers, and waits for each. Logs and stores are in
// --work (a temporary directory, kept when the run fails or with --keep).
//
// # Concurrency
//
// run owns every goroutine: the monitor, the fault injector, the load
// test's watcher and each process's waiter (which ends with its process);
// each is stopped and waited for before run returns.
package main
