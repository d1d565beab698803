#!/usr/bin/env bash
# Lint and render the Threadcast chart the way CI does, with its real NATS
# dependency: helm lint --strict and helm template with the default values
# (the bundled NATS chart), with ci/bus-values.yaml (the bundled NATS chart
# locked down) and with ci/prod-values.yaml (an external cluster). Then, with
# HELM_TEST=1 (default), the Go test (tag helm) decodes every rendered
# manifest strictly into the Kubernetes types, checks what the Threadcast
# pods are wired to, and has nats-server -t validate each rendered nats.conf.
#
#   HELM=/path/to/helm deploy/helm/check.sh
#
# The NATS chart: threadcast/charts/nats-<version>.tgz, vendored
# (VENDORED.md), is verified against its recorded sha256 and used; when it
# is absent, `helm dependency build` fetches it from the chart repository
# (internet access needed). Either way the repository's chart is rendered
# from a staging copy.
#
# helm: `go install helm.sh/helm/v3/cmd/helm@v3.22.0` (pinned).
set -euo pipefail
cd "$(dirname "$0")"
HELM=${HELM:-helm}
chart=threadcast
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"$HELM" version --short
version=$(awk '/- name: nats/{f=1} f&&/version:/{print $2; exit}' "$chart/Chart.yaml")
cp -r "$chart" "$out/$chart"
if [ -e "$chart/charts/nats-$version.tgz" ]; then
	echo "== NATS chart $version: vendored"
	sha256sum -c "nats-$version.tgz.sha256"
else
	echo "== NATS chart $version: helm dependency build"
	# build resolves the repository of Chart.lock by its URL among the
	# configured ones.
	"$HELM" repo add nats "$(awk '/- name: nats/{f=1} f&&/repository:/{print $2; exit}' "$chart/Chart.yaml")" --force-update
	"$HELM" dependency build "$out/$chart"
fi
if [ ! -e "$out/$chart/charts/nats-$version.tgz" ]; then
	echo "check.sh: charts/nats-$version.tgz missing after the dependency step" >&2
	exit 1
fi

for values in "" "$chart/ci/bus-values.yaml" "$chart/ci/prod-values.yaml"; do
	args=()
	name=default
	if [ -n "$values" ]; then
		args+=(-f "$(pwd)/$values")
		name=$(basename "$values" -values.yaml)
	fi
	echo "== lint ($name)"
	"$HELM" lint --strict "$out/$chart" "${args[@]}"
	echo "== template ($name)"
	"$HELM" template tc "$out/$chart" --kube-version 1.30.0 --namespace threadcast "${args[@]}" >"$out/$name.yaml"
	echo "rendered $(grep -c '^kind:' "$out/$name.yaml") manifests"
done
# The schema must refuse bad values (a typo'd key, a floating tag).
# A ratio out of range, as --set makes it (a string) and as a number.
for bad in "ingest.partitonMode=lease" "image.tag=latest" "ingest.partitionMode=dynamic" "fanout.memoryLimitRatio=1.5"; do
	if "$HELM" template tc "$out/$chart" --kube-version 1.30.0 --set "$bad" >/dev/null 2>&1; then
		echo "values.schema.json accepted --set $bad" >&2
		exit 1
	fi
done
if "$HELM" template tc "$out/$chart" --kube-version 1.30.0 --set-json ingest.memoryLimitRatio=1.5 >/dev/null 2>&1; then
	echo "values.schema.json accepted --set-json ingest.memoryLimitRatio=1.5" >&2
	exit 1
fi
# ... and accept one in range both ways.
"$HELM" template tc "$out/$chart" --kube-version 1.30.0 --set ingest.memoryLimitRatio=0.8 --set-json fanout.memoryLimitRatio=0.75 >/dev/null
echo "== schema refuses bad values"
if [ "${HELM_TEST:-1}" = 1 ]; then
	# The rendered nats.conf files are validated by the NATS server the
	# repository pins (go.mod), unless THREADCAST_NATS_SERVER names one.
	if [ -z "${THREADCAST_NATS_SERVER:-}" ]; then
		(cd ../.. && go build -o "$out/nats-server" github.com/nats-io/nats-server/v2)
		THREADCAST_NATS_SERVER="$out/nats-server"
	fi
	echo "== strict decode into k8s.io/api types, nats.conf validated by $("$THREADCAST_NATS_SERVER" --version)"
	CHART_DIR="$out/$chart" HELM="$HELM" THREADCAST_NATS_SERVER="$THREADCAST_NATS_SERVER" go test -count=1 -tags helm .
fi
echo "chart ok"
