#!/usr/bin/env bash
# Build the Threadcast image without a Docker daemon, and test it.
#
#   scripts/image.sh build [TAG]   build the image (default TAG localhost/threadcast:dev)
#   scripts/image.sh test  [TAG]   build it, then run it (go test -tags image ./internal/imagetest):
#                                  /readyz, the dashboard, SIGTERM, a volume across a restart
#
# The binaries are built on the host (CGO_ENABLED=0, static) and staged with
# the Dockerfile, the host's CA bundle and passwd/group entries for uid 65532
# into a temporary build context: the image is FROM scratch, so nothing is
# downloaded from a registry.
#
# IMAGE_TOOL (default podman; docker works too). With podman as root on
# machines whose cgroup layout the default runtime (crun) refuses, run
# containers with Debian's runc and no default rlimits: the script writes
# that CONTAINERS_CONF unless one is set, and IMAGE_RUNTIME (default
# /usr/sbin/runc when present) is passed to `podman run` by the test.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

cmd=${1:-build}
tag=${2:-localhost/threadcast:dev}
tool=${IMAGE_TOOL:-podman}

ctx=$(mktemp -d)
conf=""
cleanup() {
	rm -rf "$ctx"
	if [ -n "$conf" ]; then rm -f "$conf"; fi
}
trap cleanup EXIT

if [ "$tool" = podman ] && [ -z "${CONTAINERS_CONF:-}" ]; then
	conf=$(mktemp)
	printf '[containers]\ndefault_ulimits = []\n\n[engine]\ncgroup_manager = "cgroupfs"\n' >"$conf"
	export CONTAINERS_CONF="$conf"
fi
if [ "$tool" = podman ] && [ -z "${IMAGE_RUNTIME:-}" ] && [ -x /usr/sbin/runc ]; then
	export IMAGE_RUNTIME=/usr/sbin/runc
fi

build() {
	for c in threadcast ingest fanout; do
		CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o "$ctx/$c" "./cmd/$c"
	done
	ca=/etc/ssl/certs/ca-certificates.crt
	if [ ! -s "$ca" ]; then
		echo "image.sh: $ca is missing (apt-get install ca-certificates)" >&2
		exit 1
	fi
	cp "$ca" "$ctx/ca-certificates.crt"
	printf 'root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/data:/sbin/nologin\n' >"$ctx/passwd"
	printf 'root:x:0:\nnonroot:x:65532:\n' >"$ctx/group"
	mkdir "$ctx/data"
	cp Dockerfile "$ctx/Dockerfile"
	"$tool" build --quiet -t "$tag" -f "$ctx/Dockerfile" "$ctx" >/dev/null
	size=$("$tool" image inspect --format '{{.Size}}' "$tag")
	echo "image $tag: $size bytes ($((size / 1024 / 1024)) MiB)"
}

case "$cmd" in
build)
	build
	;;
test)
	build
	IMAGE_TOOL="$tool" THREADCAST_IMAGE="$tag" go test -count=1 -tags image -timeout 5m -v ./internal/imagetest
	;;
*)
	echo "usage: scripts/image.sh build|test [TAG]" >&2
	exit 2
	;;
esac
