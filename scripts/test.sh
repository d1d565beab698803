#!/usr/bin/env bash
# The project's test command (the second command at the top of README.md).
# Runs every test package with the race detector, then the lifetime-poisoning
# build of the packages that hand out views into reused buffers, then the
# tagged suites (cluster, buscluster, browser) whose tools are present.
#
# Everything the tests read is in the repository (testdata/conformance,
# testdata/spec, tools/); a plain clone runs this script as is. The
# differential tests need the TypeScript reference consumer, tools/oracle
# (@ag-ui/client 1.0.0): unless THREADCAST_ORACLE_DIR names an install, npm ci
# installs its locked dependencies into tools/oracle/node_modules (ignored by
# git), where the tests find it (internal/testsupport). A test whose tool is
# missing (node, the reference consumer, chromium) is skipped with the
# reason; CI sets THREADCAST_REQUIRE_ORACLE=1, THREADCAST_REQUIRE_BROWSER=1 and
# THREADCAST_REQUIRE_DUCKDB=1 so that it fails instead.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

if [ -z "${THREADCAST_ORACLE_DIR:-}" ]; then
  if command -v npm >/dev/null 2>&1; then
    (cd tools/oracle && npm ci --silent --no-audit --no-fund)
  else
    echo "npm not found: the tests that need the reference consumer will skip (install Node.js 20 or later)"
  fi
fi
# The export tests read their Parquet and NDJSON files back with DuckDB
# (@duckdb/node-api, locked in tools/duckdb; node_modules ignored by git).
if command -v npm >/dev/null 2>&1; then
  (cd tools/duckdb && npm ci --silent --no-audit --no-fund)
else
  echo "npm not found: the tests that read exports with DuckDB will skip (install Node.js 20 or later)"
fi
export THREADCAST_ARTIFACTS="${THREADCAST_ARTIFACTS:-$PWD/test-artifacts}"
mkdir -p "$THREADCAST_ARTIFACTS"

# Jaeger v2, the OTLP receiver of the export test near the end, is a large
# build (Jaeger's module has replace directives, so go install cannot build
# it: it is built as a tool of a scratch module, pinned, into GOPATH's bin,
# and reused when there). It builds in the background at the lowest CPU
# priority, one package at a time, so that it takes only the time the
# suites below leave idle. THREADCAST_JAEGER may name a binary already built.
JAEGER="${THREADCAST_JAEGER:-$(go env GOPATH)/bin/jaeger-v1.76.0}"
jaegerlog="$(mktemp)"
mkdir -p "$(dirname "$JAEGER")"
(
  if [ ! -x "$JAEGER" ]; then
    jaegermod="$(mktemp -d)"
    trap 'rm -rf "$jaegermod"' EXIT
    cd "$jaegermod" && go mod init jaegerbuild >/dev/null 2>&1 &&
      nice -n 19 go get -tool github.com/jaegertracing/jaeger/cmd/jaeger@v1.76.0 &&
      nice -n 19 go build -p 1 -o "$JAEGER.tmp" github.com/jaegertracing/jaeger/cmd/jaeger &&
      mv "$JAEGER.tmp" "$JAEGER"
  fi
) >"$jaegerlog" 2>&1 &
jaegerbuild=$!

# Every package, with the tagged suites that need only this machine and Node:
# oracle (differential tests against the reference consumer) and integration
# (the SIGKILL crash test of ingest, the load generator's scenarios).
go test -race -count=1 -tags oracle,integration -timeout 15m ./...
# The lifetime-poisoning build: recycled buffers are overwritten with '#'.
go test -race -count=1 -tags tcpoison,oracle -timeout 10m ./codec/... ./reducer/...

# The largest threads (tag large): 100,000 messages and a 55 MB view over
# REST, SSE and WebSocket, windowed joins of the same, a 20 MB state.
# Without -race, under which these take minutes and their timeouts fire on
# a small machine; the same paths run under -race on smaller threads above.
go test -count=1 -tags large -run 'TestLongThread100k|TestWindowedJoins100k|TestLargeState20MB' -timeout 10m ./fanout ./pipeline

# The scale-out fault test: a three-server NATS cluster in the process, two
# lease-mode ingest instances, two fanout nodes, faults under load.
go test -count=1 -tags cluster -run TestClusterFaults -timeout 5m ./pipeline

# The abuse soak: tenant quiet's load on a node alone, then while tenant
# noisy abuses every door (idle connections past its cap per source, each
# refused with the documented 503, tap floods, connect churn, bogus cursors,
# bad bridge bodies), alternating; quiet loses nothing, its p99 under abuse
# stays within 2x of its quiet p99, RSS under the bound the limits give. 60 s
# of abuse (THREADCAST_SOAK_DURATION for a longer one); without -race, which
# would change both the latencies and the memory it measures. The attacker
# is a process of its own at niceness 19, as one on machines of its own
# takes none of the node's CPU; on 2 cores the ratio measured 1.2-1.4x with
# the machine otherwise idle, 0.5-1.1x under other work's load (README.md,
# "Tests, benchmarks, load test").
go test -count=1 -tags soak -run TestSoak -timeout 10m ./node

# The bus locked down: three nats-server processes configured from
# docs/production.md, a node joined to them with the service nkey and the
# auth callout, and the cross-tenant matrix. nats-server is built from the
# Go module proxy, pinned to the version in go.mod.
natsbin="$(mktemp -d)"
GOBIN="$natsbin" go install github.com/nats-io/nats-server/v2@v2.15.2
THREADCAST_NATS_SERVER="$natsbin/nats-server" go test -race -count=1 -tags buscluster -run TestBusMatrixCluster -timeout 5m ./node

# A short chaos run on the same nats-server: three of them, two lease-mode
# ingest and two fanout processes under the load test, a process killed or
# paused or a server's routes cut every 10-20 s (every kind of fault:
# scripts/chaos.sh, internal/chaos); fails on any lost, duplicated or
# diverging event. 45 s of load, about 75 s in all; the seed changes daily
# (the report names it).
THREADCAST_NATS_SERVER="$natsbin/nats-server" timeout 5m bash scripts/chaos.sh 45s --seed "$(date -u +%Y%m%d)"
rm -rf "$natsbin"

# The OTLP export of runs received by a real Jaeger v2 (OTLP gRPC and HTTP
# receivers, in-memory storage), its span trees read back through the query
# API. Its binary was built in the background since the start (above).
wait "$jaegerbuild" || { echo "building Jaeger failed:"; cat "$jaegerlog"; exit 1; }
THREADCAST_JAEGER="$JAEGER" THREADCAST_REQUIRE_JAEGER=1 go test -race -count=1 -tags otlp -run TestJaeger -timeout 5m ./otelexport

# The Helm chart: lint, render, and decode every manifest strictly into the
# Kubernetes types (its own Go module under deploy/helm). helm is built from
# the Go module proxy, pinned, when it is not on PATH.
HELM="${HELM:-$(command -v helm || true)}"
if [ -z "$HELM" ]; then
  GOBIN="$(go env GOPATH)/bin" go install helm.sh/helm/v3/cmd/helm@v3.22.0
  HELM="$(go env GOPATH)/bin/helm"
fi
HELM="$HELM" bash deploy/helm/check.sh

if command -v chromium >/dev/null 2>&1 || [ -n "${THREADCAST_REQUIRE_BROWSER:-}" ]; then
  go test -count=1 -tags browser -run Browser -timeout 5m ./web/
else
  echo "browser tests not run: chromium is not installed (apt-get install chromium)"
fi

# The image: built without a Docker daemon (podman, FROM scratch, static
# binaries built here) and run: /readyz, the dashboard, SIGTERM, a volume
# across a restart (scripts/image.sh). CI sets THREADCAST_REQUIRE_IMAGE=1 so
# that a missing podman fails instead of skipping.
if command -v podman >/dev/null 2>&1 || [ "${THREADCAST_REQUIRE_IMAGE:-}" = 1 ]; then
  THREADCAST_REQUIRE_IMAGE=1 bash scripts/image.sh test
else
  echo "image test not run: podman is not installed (apt-get install podman runc)"
fi
