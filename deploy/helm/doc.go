// Package helmtest checks the Helm chart in ./threadcast: with the build tag
// helm, its test renders the chart with helm template and its real NATS
// dependency (charts/nats-2.14.2.tgz, or the staging copy CHART_DIR names)
// — the default values with the bundled NATS cluster, that cluster locked
// down (ci/bus-values.yaml), an external cluster (ci/prod-values.yaml) —
// and decodes every manifest of both charts strictly into the official
// Kubernetes Go types (k8s.io/api), so an unknown or misspelt field in a
// template fails. It then checks the wiring read from the rendered NATS
// manifests: the Threadcast pods connect to the client Service the NATS
// chart creates, with the bus credentials when it is locked down, and the
// servers get file storage, three replicas and anti-affinity.
//
// It is a module of its own (deploy/helm/go.mod) so that k8s.io/api and
// k8s.io/apimachinery — tens of packages and their dependencies — never
// enter the main module's go.mod, go.sum or module graph: the Threadcast
// binaries and `go test ./...` at the repository root do not see them.
//
// Concurrency: the test runs helm as a subprocess and owns no goroutines.
package helmtest
