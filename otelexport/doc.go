// Package otelexport exports ingest's runs to an OpenTelemetry receiver over
// OTLP (gRPC or HTTP), in the words of the OpenTelemetry semantic
// conventions for generative AI. It is a pipeline.RunSink (set as
// pipeline.Config.Runs): each ended run's RunSummary becomes
//
//   - an invoke_agent span (gen_ai.operation.name, gen_ai.agent.name when
//     configured, gen_ai.conversation.id = the thread, gen_ai.provider.name
//     and gen_ai.request.model of the first usage entry, the summed
//     gen_ai.usage.* counts, threadcast.tenant and the run's outcome; a
//     failed or rejected run has status Error and error.type), timed by the
//     run's own start and end;
//   - a child invoke_agent span per subagent invocation (under the
//     invocation or tool call that spawned it, when the events say so);
//   - an execute_tool span per tool call (gen_ai.tool.name,
//     gen_ai.tool.call.id), under the invocation it is attributed to, from
//     its start to its result (or its end when no result came in the run);
//   - a link to the parent run's span (RUN_STARTED.parentRunId, taken to be
//     in the same thread);
//   - the metrics gen_ai.client.token.usage (a histogram by
//     gen_ai.token.type, per usage entry) and gen_ai.client.operation.duration
//     (the run's duration). Their provider, model and error.type values
//     are what producers wrote, so each tenant's are bounded: the first
//     MaxAttrValues of each attribute, cut at pipeline.MaxSpanString
//     bytes, and OtherValue for the rest; spans carry every value.
//
// Trace and span ids are derived from tenant, thread and run id (TraceID), so
// a run summarised twice (a tail replayed after a crash) yields the same
// spans. The attribute names are in one file, semconv.go, since the GenAI
// conventions are still marked development.
//
// Content: the producer's free text (error messages) is exported only with
// Config.Content; a run summary carries no message or tool argument text at
// all. A tenant in Config.ExcludeTenants is not exported.
//
// Cost and back-pressure: Run, called on the shard goroutine, only puts the
// summary on a bounded queue (full: dropped and counted); the Exporter's one
// goroutine builds the spans into the SDK's batch span processor, whose
// goroutine exports them. Prometheus counts runs (threadcast_otlp_runs_total
// by result), spans (threadcast_otlp_spans_total) and failed exports
// (threadcast_otlp_export_failures_total by signal). With the export off, the
// pipeline's Runs is nil and no OpenTelemetry code runs.
//
// Configuration: Config's fields, or BindFlags for a command (--otlp-*);
// the exporters read the standard OTEL_EXPORTER_OTLP_* variables themselves
// for whatever Config leaves unset (a set Endpoint wins over
// OTEL_EXPORTER_OTLP_ENDPOINT), the SDK OTEL_BSP_*, OTEL_METRIC_EXPORT_INTERVAL,
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
package otelexport
