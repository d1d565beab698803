// Package helmtest checks the Helm chart in ./threadcast: with the build tag
// helm, its test renders the chart with helm template (default and
// production-like values, nats.enabled=false) and decodes every manifest
// strictly into the official Kubernetes Go types (k8s.io/api), so an unknown
// or misspelt field in a template fails.
//
// It is a module of its own (deploy/helm/go.mod) so that k8s.io/api and
// k8s.io/apimachinery — tens of packages and their dependencies — never
// enter the main module's go.mod, go.sum or module graph: the Threadcast
// binaries and `go test ./...` at the repository root do not see them.
//
// Concurrency: the test runs helm as a subprocess and owns no goroutines.
package helmtest
