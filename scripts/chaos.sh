#!/usr/bin/env bash
# The chaos run: a Threadcast cluster as separate OS processes (three
# nats-server, two lease-mode ingest, two fanout) under the load test, with
# processes killed, paused and cut off from their peers meanwhile
# (internal/chaos/doc.go). Usage:
#
#   scripts/chaos.sh DURATION [chaos flags...]     e.g. scripts/chaos.sh 10m
#
# DURATION is the load phase (faults every 10-20 s during it); start-up,
# the settle phase and the checks come on top. THREADCAST_NATS_SERVER names
# the nats-server binary; without it nats-server v2.15.2 is built from the
# Go module proxy. The report (report.md, report.json) goes to
# $THREADCAST_ARTIFACTS/chaos (default test-artifacts/chaos). Exit status:
# 0 the correctness check passed, 1 it failed, 2 the run could not start.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
if [ $# -lt 1 ]; then
  echo "usage: scripts/chaos.sh DURATION [chaos flags...]" >&2
  exit 2
fi
duration="$1"
shift

bin="$(mktemp -d)"
pid=""
cleanup() {
  # The harness stops and waits for every process it started (each in its
  # own process group, each killed if the harness dies); wait for it.
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$bin"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "${THREADCAST_NATS_SERVER:-}" ]; then
  GOBIN="$bin" go install github.com/nats-io/nats-server/v2@v2.15.2
  export THREADCAST_NATS_SERVER="$bin/nats-server"
fi
go build -o "$bin/" ./cmd/ingest ./cmd/fanout ./loadtest ./internal/chaos
export THREADCAST_ARTIFACTS="${THREADCAST_ARTIFACTS:-$PWD/test-artifacts}"

"$bin/chaos" --duration "$duration" --bin "$bin" --repo . "$@" &
pid=$!
set +e
wait "$pid"
status=$?
set -e
pid=""
exit "$status"
