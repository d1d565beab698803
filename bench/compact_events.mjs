#!/usr/bin/env node
// compactEvents of the reference client (@ag-ui/client 1.0.0) on the two
// workloads of the reference bench (same seeds and options as bench.mjs),
// for `go run ./bench -only compact`. Prints one JSON line per workload:
// {workload, eventsIn, bytesIn, eventsOut, bytesOut, seconds}. Each thread
// is compacted on its own; seconds is the median of --runs runs.
//
//   node compact_events.mjs --oracle DIR --gen DIR/../streamgen [--runs N]

import { pathToFileURL } from "node:url";
import { join } from "node:path";

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const oracle = opt("--oracle");
const gen = opt("--gen", oracle && join(oracle, "..", "streamgen"));
const runs = Number(opt("--runs", 3));
if (!oracle) {
  process.stderr.write("compact_events.mjs: --oracle DIR is required\n");
  process.exit(2);
}
for (const key of ["NODE_ENV", "VITEST_WORKER_ID", "SUPPRESS_TRANSFORMATION_WARNINGS"]) delete process.env[key];

const { compactEvents } = await import(pathToFileURL(join(oracle, "node_modules", "@ag-ui", "client", "dist", "index.mjs")).href);
const { generateStream, generateThreads } = await import(pathToFileURL(join(gen, "random.mjs")).href);

const workloads = [
  {
    name: "threads 1000x100",
    threads: () => generateThreads("agui-bulk-threads-v1", 1000, 100, { verbosity: 1 }).map((t) => t.events),
  },
  {
    name: "single 100k",
    threads: () => [generateStream("agui-bulk-100k-v1", { events: 100000, verbosity: 8, runLength: [200, 1500] })],
  },
];

const jsonlBytes = (events) => events.reduce((n, e) => n + Buffer.byteLength(JSON.stringify(e)) + 1, 0);

for (const w of workloads) {
  const threads = w.threads();
  let eventsIn = 0;
  let bytesIn = 0;
  for (const t of threads) {
    eventsIn += t.length;
    bytesIn += jsonlBytes(t);
  }
  let out;
  const secs = [];
  for (let r = 0; r < runs + 1; r++) {
    const t0 = process.hrtime.bigint();
    out = threads.map((t) => compactEvents(t));
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    if (r > 0) secs.push(s); // the first run warms up the JIT
  }
  secs.sort((a, b) => a - b);
  let eventsOut = 0;
  let bytesOut = 0;
  for (const t of out) {
    eventsOut += t.length;
    bytesOut += jsonlBytes(t);
  }
  process.stdout.write(
    `${JSON.stringify({ workload: w.name, eventsIn, bytesIn, eventsOut, bytesOut, seconds: secs[secs.length >> 1] })}\n`,
  );
}
