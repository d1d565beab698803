package otelexport

import "go.opentelemetry.io/otel/attribute"

// The attribute, span, metric and value names this package exports, from the
// OpenTelemetry semantic conventions for generative AI (gen_ai.*, marked
// "development" there, so they may be renamed: this file is the one place
// that spells them), and Threadcast's own (threadcast.*) for what those
// conventions have no name for.
const (
	// Operation names (gen_ai.operation.name), also the span names' first
	// word: "invoke_agent <agent name>", "execute_tool <tool name>".
	OpInvokeAgent = "invoke_agent"
	OpExecuteTool = "execute_tool"

	AttrOperationName = attribute.Key("gen_ai.operation.name")
	AttrProviderName  = attribute.Key("gen_ai.provider.name")
	AttrRequestModel  = attribute.Key("gen_ai.request.model")
	AttrAgentName     = attribute.Key("gen_ai.agent.name")
	AttrAgentID       = attribute.Key("gen_ai.agent.id")
	AttrAgentDesc     = attribute.Key("gen_ai.agent.description")
	// AttrConversationID is the thread.
	AttrConversationID = attribute.Key("gen_ai.conversation.id")

	AttrUsageInputTokens         = attribute.Key("gen_ai.usage.input_tokens")
	AttrUsageOutputTokens        = attribute.Key("gen_ai.usage.output_tokens")
	AttrUsageCacheReadTokens     = attribute.Key("gen_ai.usage.cache_read.input_tokens")
	AttrUsageCacheCreationTokens = attribute.Key("gen_ai.usage.cache_creation.input_tokens")

	AttrToolName   = attribute.Key("gen_ai.tool.name")
	AttrToolCallID = attribute.Key("gen_ai.tool.call.id")

	// AttrErrorType is the general convention's error.type: a low
	// cardinality class of the failure.
	AttrErrorType = attribute.Key("error.type")

	// Metrics and gen_ai.token.type's values.
	MetricTokenUsage        = "gen_ai.client.token.usage"
	MetricOperationDuration = "gen_ai.client.operation.duration"
	AttrTokenType           = attribute.Key("gen_ai.token.type")
	TokenTypeInput          = "input"
	TokenTypeOutput         = "output"

	// Threadcast's own.
	AttrTenant            = attribute.Key("threadcast.tenant")
	AttrRunID             = attribute.Key("threadcast.run.id")
	AttrParentRunID       = attribute.Key("threadcast.run.parent_id")
	AttrRunOutcome        = attribute.Key("threadcast.run.outcome")
	AttrRunEvents         = attribute.Key("threadcast.run.events")
	AttrRunStartSeq       = attribute.Key("threadcast.run.start_seq")
	AttrRunEndSeq         = attribute.Key("threadcast.run.end_seq")
	AttrReasoningTokens   = attribute.Key("threadcast.usage.reasoning_tokens")
	AttrSpansDropped      = attribute.Key("threadcast.spans.dropped")
	AttrErrorCode         = attribute.Key("threadcast.error.code")
	AttrErrorMessage      = attribute.Key("threadcast.error.message") // content: only with Config.Content
	AttrSubagentOutcome   = attribute.Key("threadcast.subagent.outcome")
	AttrToolParentMessage = attribute.Key("threadcast.tool.parent_message_id")
	AttrToolAnswered      = attribute.Key("threadcast.tool.answered")

	// Values of error.type.
	ErrorTypeRun      = "run_error"      // RUN_ERROR without a code
	ErrorTypeRejected = "rejected"       // the stream was rejected by Threadcast
	ErrorTypeSubagent = "subagent_error" // SUBAGENT_ERROR without a code
	ErrorTypeTool     = "tool_error"     // a tool message with an error
	ErrorTypeAbandon  = "abandoned"      // the run ended with the invocation active
)
