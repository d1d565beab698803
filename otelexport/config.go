package otelexport

import (
	"flag"
	"fmt"
	"strings"
	"time"
)

// Config configures the export. Build it with DefaultConfig (or BindFlags)
// and change fields.
type Config struct {
	// Enabled turns the export on; off, New is not to be called and
	// ingest runs no OpenTelemetry code.
	Enabled bool
	// Endpoint is the OTLP receiver: a URL ("http://host:4317",
	// "https://collector:4318"; http is without TLS) or "host:port" (TLS,
	// unless OTEL_EXPORTER_OTLP_INSECURE=true). Over HTTP the signal's path
	// (/v1/traces, /v1/metrics) is appended to a URL without a path. Empty:
	// the exporters read OTEL_EXPORTER_OTLP_ENDPOINT and the signal's own
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / _METRICS_ENDPOINT themselves
	// (then their defaults, localhost:4317 or :4318). A set Endpoint wins
	// over those variables; every other OTEL_EXPORTER_OTLP_* variable
	// (headers, timeout, compression, certificates) is the exporters' own.
	Endpoint string
	// Protocol is "grpc" or "http" (OTLP/HTTP protobuf; "http/protobuf" is
	// accepted too).
	Protocol string
	// Content exports free text the producer wrote: the runs', subagents'
	// and tool calls' error messages (a run summary holds no message or
	// tool argument text, so none is exported). Off, only error codes and
	// classes are.
	Content bool
	// ExcludeTenants are tenants whose runs are not exported.
	ExcludeTenants []string
	// AgentName is gen_ai.agent.name of the runs' spans (AG-UI events do
	// not name the agent); empty: none.
	AgentName string
	// ServiceName is the resource's service.name; OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES win over it.
	ServiceName string
	// RunQueue bounds the run summaries waiting to be turned into spans;
	// past it a run is dropped and counted, so ingest never waits.
	RunQueue int
	// SpanQueue and BatchTimeout are the SDK batch span processor's
	// queue and export interval (OTEL_BSP_* when 0).
	SpanQueue    int
	BatchTimeout time.Duration
	// MetricInterval is how often the metrics are exported (0:
	// OTEL_METRIC_EXPORT_INTERVAL, else 60 s).
	MetricInterval time.Duration
}

// DefaultConfig returns the defaults: off, OTLP/HTTP.
func DefaultConfig() Config {
	return Config{Protocol: "http", ServiceName: "threadcast", RunQueue: 4096}
}

// Environment variables BindFlags' finish reads: the standard protocol
// selection (which the exporters leave to the caller) and the endpoints
// whose presence turns the export on.
const (
	EnvProtocol        = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol  = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvEndpoint        = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint  = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvMetricsEndpoint = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
)

// BindFlags declares --otlp-endpoint, --otlp-protocol, --otlp-content,
// --otlp-exclude-tenants and --otlp-agent-name on fs over c. The returned
// finish, called after parsing with the command's getenv, turns the export
// on when --otlp-endpoint or one of the OTEL_EXPORTER_OTLP_*ENDPOINT
// variables is set, takes the protocol from OTEL_EXPORTER_OTLP_PROTOCOL
// (or _TRACES_PROTOCOL) when --otlp-protocol is not given, and validates.
// Precedence: the flag (or its THREADCAST_OTLP_* variable), then the
// OTEL_* variable, then the default.
func BindFlags(fs *flag.FlagSet, c *Config) (finish func(getenv func(string) string) error) {
	var exclude, protocol string
	fs.StringVar(&c.Endpoint, "otlp-endpoint", c.Endpoint, "export runs as OpenTelemetry GenAI spans and metrics to this OTLP receiver (URL or host:port); empty: off unless OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT) is set")
	fs.StringVar(&protocol, "otlp-protocol", "", "OTLP protocol: grpc or http (default: OTEL_EXPORTER_OTLP_PROTOCOL, else http)")
	fs.BoolVar(&c.Content, "otlp-content", c.Content, "OTLP: export producers' free text (error messages); off: codes only")
	fs.StringVar(&exclude, "otlp-exclude-tenants", "", "OTLP: comma-separated tenants whose runs are not exported")
	fs.StringVar(&c.AgentName, "otlp-agent-name", c.AgentName, "OTLP: gen_ai.agent.name of the runs' spans")
	return func(getenv func(string) string) error {
		if protocol == "" {
			protocol = getenv(EnvTracesProtocol)
		}
		if protocol == "" {
			protocol = getenv(EnvProtocol)
		}
		if protocol != "" {
			c.Protocol = protocol
		}
		for _, t := range strings.Split(exclude, ",") {
			if t = strings.TrimSpace(t); t != "" {
				c.ExcludeTenants = append(c.ExcludeTenants, t)
			}
		}
		c.Enabled = c.Enabled || c.Endpoint != "" || getenv(EnvEndpoint) != "" || getenv(EnvTracesEndpoint) != ""
		if err := c.Validate(); err != nil {
			return fmt.Errorf("--otlp-protocol: %w", err)
		}
		return nil
	}
}

// Validate checks the protocol.
func (c *Config) Validate() error {
	switch c.Protocol {
	case "grpc", "http", "http/protobuf":
		return nil
	}
	return fmt.Errorf("otelexport: protocol %q: want grpc or http", c.Protocol)
}
