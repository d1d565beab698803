// Package demo is Threadcast's demo agents: a seeded generator of realistic
// AG-UI 1.0 traffic, and a runner that plays it through the publisher SDK at
// a chosen pace, for the dashboard demo (cmd/threadcast --demo) and for the
// load generator (loadtest/), which reuses its shapes.
//
// # The generator
//
// NewScript returns the Script of one thread; NextRun produces its next run
// as a slice of Events (JSON bytes plus a timing hint). A run looks like what
// a production assistant streams: RUN_STARTED; the user's message; the agent
// state — a plan — restated by STATE_SNAPSHOT or amended by STATE_DELTA;
// reasoning (a span, a reasoning message streamed token by token, sometimes
// an encrypted reasoning artefact); then a shuffled selection of a web_search
// activity whose results arrive as ACTIVITY_DELTA patches, tool calls with
// arguments streamed and results returned, subagent invocations (one, two in
// parallel with interleaved events, or one nested in another; sometimes
// spawned by a "delegate" tool call, sometimes failing with SUBAGENT_ERROR),
// and an activity of a type no dashboard knows; and finally the answer,
// streamed as many short TEXT_MESSAGE_CONTENT deltas while a checklist
// activity is ticked off, closed with metadata carrying the model, token
// usage and finish reason, and RUN_FINISHED with the run's `usage`. Now and
// then a run fails with RUN_ERROR at a random point (abandoning whatever was
// open, as the spec allows), fails late after RUN_FINISHED, or is cancelled
// by the user (cancelled outcome).
//
// Every stream is valid AG-UI 1.0: the codec accepts each event without a
// warning, and the reducer and the TypeScript reference consumer apply the
// stream without an error or a warning (tests check all three). The same seed
// and Options give the same bytes. Text content is not sanitised for HTML
// (some of it contains markup-like text such as <b>), because the dashboard
// must treat model output as untrusted text, and the demo is how that is
// exercised.
//
// The generator writes its own metadata under keys starting with MetaPrefix;
// it never writes under the reserved `ag-ui` key, under which AG-UI 1.0
// defines nothing.
//
// # The runner
//
// Run plays Config.Agents agents across Config.Tenants, each playing threads
// one after another, at Config.Rate events per second overall or at the
// scripts' own timing. It stamps each event with the wall clock (`timestamp`,
// Unix ms) when publishing it, so that the pipeline's end-to-end latency can
// be measured from it.
//
// # Concurrency
//
// A Script is not safe for concurrent use: each belongs to one goroutine.
// Run starts one goroutine per agent and returns only after all of them have
// returned; it calls Publisher.Publish concurrently, each thread's events from
// one goroutine and in order. The package has no mutable package-level state.
package demo
