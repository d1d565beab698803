// Package imagetest runs the container image built from the repository's
// Dockerfile (scripts/image.sh test): with the build tag image, its test
// starts the image with podman (or IMAGE_TOOL), checks that /readyz answers
// and the dashboard loads, that SIGTERM stops it cleanly (exit 0 and the
// "stopped cleanly" log line), and that a thread published through the HTTP
// bridge is still there after the container is replaced by a new one on the
// same volume.
//
// THREADCAST_IMAGE names the image; without it the test skips, unless
// THREADCAST_REQUIRE_IMAGE=1 (CI), which makes it fail. IMAGE_RUNTIME is
// passed to podman run as --runtime (scripts/image.sh sets /usr/sbin/runc).
//
// Concurrency: the test runs the container tool as a subprocess and owns no
// goroutines.
package imagetest
