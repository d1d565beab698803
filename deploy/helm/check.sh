#!/usr/bin/env bash
# Lint and render the Threadcast chart the way CI does: helm lint --strict and
# helm template, with the default values and with ci/prod-values.yaml, both
# with nats.enabled=false (chart repositories can't be reached, so the NATS
# dependency is not downloaded). Then, with HELM_TEST=1 (default), the Go test
# (tag helm) decodes every rendered manifest strictly into the Kubernetes
# types.
#
#   HELM=/path/to/helm deploy/helm/check.sh
#
# helm: `go install helm.sh/helm/v3/cmd/helm@v3.22.0` (pinned).
set -euo pipefail
cd "$(dirname "$0")"
HELM=${HELM:-helm}
chart=threadcast
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"$HELM" version --short
# helm lint and helm template refuse a chart whose dependency is not in
# charts/, even when its condition (nats.enabled) is false. The official NATS
# chart can't be downloaded here, so render a staging copy in which a stub
# chart (Chart.yaml only: name and pinned version, no templates) stands in for
# it; with nats.enabled=false nothing of it would be rendered anyway. The
# repository's chart keeps the real pinned dependency.
cp -r "$chart" "$out/$chart"
mkdir -p "$out/$chart/charts/nats"
printf 'apiVersion: v2\nname: nats\nversion: %s\ndescription: stand-in for the NATS chart in CI (never rendered)\n' \
	"$(awk '/- name: nats/{f=1} f&&/version:/{print $2; exit}' "$chart/Chart.yaml")" >"$out/$chart/charts/nats/Chart.yaml"
for values in "" "$chart/ci/prod-values.yaml"; do
	args=(--set nats.enabled=false)
	[ -n "$values" ] && values=$(pwd)/$values
	name=default
	if [ -n "$values" ]; then
		args+=(-f "$values")
		name=prod
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
	if "$HELM" template tc "$out/$chart" --kube-version 1.30.0 --set nats.enabled=false --set "$bad" >/dev/null 2>&1; then
		echo "values.schema.json accepted --set $bad" >&2
		exit 1
	fi
done
if "$HELM" template tc "$out/$chart" --kube-version 1.30.0 --set nats.enabled=false --set-json ingest.memoryLimitRatio=1.5 >/dev/null 2>&1; then
	echo "values.schema.json accepted --set-json ingest.memoryLimitRatio=1.5" >&2
	exit 1
fi
# ... and accept one in range both ways.
"$HELM" template tc "$out/$chart" --kube-version 1.30.0 --set nats.enabled=false --set ingest.memoryLimitRatio=0.8 --set-json fanout.memoryLimitRatio=0.75 >/dev/null
echo "== schema refuses bad values"
if [ "${HELM_TEST:-1}" = 1 ]; then
	echo "== strict decode into k8s.io/api types"
	HELM="$HELM" go test -count=1 -tags helm .
fi
echo "chart ok"
