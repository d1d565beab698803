package otelexport

import (
	"context"
	"crypto/sha256"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/threadcast/threadcast/pipeline"
)

// TraceID is the trace of run runID of tenant's thread: the first 16 bytes
// of a SHA-256 of the three, so that a run summarised again (a tail
// replayed after a crash) is the same trace and spans, which a receiver
// de-duplicates or shows once.
func TraceID(tenant, thread, runID string) trace.TraceID {
	var id trace.TraceID
	copy(id[:], digest("trace", tenant, thread, runID))
	return id
}

// spanID derives a span id inside trace t from its kind and key.
func spanID(t trace.TraceID, kind, key string) trace.SpanID {
	var id trace.SpanID
	copy(id[:], digest(string(t[:]), kind, key))
	if !id.IsValid() {
		id[7] = 1
	}
	return id
}

func digest(parts ...string) []byte {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum(nil)
}

func ms(t int64) time.Time { return time.UnixMilli(t) }

// record emits s's spans and metrics.
func (e *Exporter) record(s *pipeline.RunSummary) {
	tid := TraceID(s.Tenant, s.Thread, s.RunID)
	runSpan := spanID(tid, "run", "")
	provider, model := "", ""
	if len(s.Usage) > 0 {
		provider, model = s.Usage[0].Provider, s.Usage[0].Model
	}

	attrs := []attribute.KeyValue{
		AttrOperationName.String(OpInvokeAgent),
		AttrConversationID.String(s.Thread),
		AttrTenant.String(s.Tenant),
		AttrRunID.String(s.RunID),
		AttrRunOutcome.String(s.Outcome),
		AttrRunEvents.Int(s.Events),
		AttrRunStartSeq.Int64(int64(s.StartSeq)),
		AttrRunEndSeq.Int64(int64(s.EndSeq)),
	}
	if e.cfg.AgentName != "" {
		attrs = append(attrs, AttrAgentName.String(e.cfg.AgentName))
	}
	if provider != "" {
		attrs = append(attrs, AttrProviderName.String(provider))
	}
	if model != "" {
		attrs = append(attrs, AttrRequestModel.String(model))
	}
	attrs = append(attrs, usageAttrs(s)...)
	if s.ParentRunID != "" {
		attrs = append(attrs, AttrParentRunID.String(s.ParentRunID))
	}
	if s.DroppedSpans > 0 {
		attrs = append(attrs, AttrSpansDropped.Int(s.DroppedSpans))
	}
	errType := errorType(s.Outcome, s.Code, ErrorTypeRun, "rejected", ErrorTypeRejected)
	if s.Code != "" {
		attrs = append(attrs, AttrErrorCode.String(s.Code))
	}
	opts := []trace.SpanStartOption{
		trace.WithTimestamp(ms(s.StartedAt)), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...),
	}
	if s.ParentRunID != "" {
		// The parent run is taken to be in the same thread: its span is
		// derived as this one is.
		ptid := TraceID(s.Tenant, s.Thread, s.ParentRunID)
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: ptid, SpanID: spanID(ptid, "run", ""), TraceFlags: trace.FlagsSampled, Remote: true})}))
	}
	ctx := context.WithValue(context.Background(), idsKey{}, spanIDs{tid, runSpan})
	_, span := e.tracer.Start(ctx, spanName(OpInvokeAgent, e.cfg.AgentName), opts...)
	e.fail(span, errType, s.Error)

	// Subagents first, so that a tool call attributed to one is its child;
	// a subagent spawned by a tool call (agents as tools) is that call's
	// child, one spawned by another invocation that invocation's.
	subs := make(map[string]trace.SpanContext, len(s.SubagentSpans))
	tools := make(map[string]trace.SpanContext, len(s.ToolCallSpans))
	for i := range s.ToolCallSpans {
		tc := &s.ToolCallSpans[i]
		tools[tc.ID] = spanContext(tid, spanID(tid, "tool", tc.ID))
	}
	for i := range s.SubagentSpans {
		sa := &s.SubagentSpans[i]
		subs[sa.RunID] = spanContext(tid, spanID(tid, "subagent", sa.RunID))
	}
	for i := range s.SubagentSpans {
		sa := &s.SubagentSpans[i]
		parent := span.SpanContext()
		if p, ok := subs[sa.ParentSubagentRunID]; ok && sa.ParentSubagentRunID != sa.RunID {
			parent = p
		} else if p, ok := tools[sa.ParentToolCallID]; ok && !toolOf(s, sa.ParentToolCallID, sa.RunID) {
			parent = p
		}
		a := []attribute.KeyValue{
			AttrOperationName.String(OpInvokeAgent), AttrAgentName.String(sa.Name), AttrAgentID.String(sa.RunID),
			AttrConversationID.String(s.Thread), AttrTenant.String(s.Tenant), AttrSubagentOutcome.String(sa.Outcome),
		}
		if sa.Code != "" {
			a = append(a, AttrErrorCode.String(sa.Code))
		}
		et := errorType(sa.Outcome, sa.Code, ErrorTypeSubagent, "abandoned", ErrorTypeAbandon)
		e.child(parent, subs[sa.RunID].SpanID(), spanName(OpInvokeAgent, sa.Name), sa.StartedAt, sa.EndedAt, a, et, sa.Error)
	}
	for i := range s.ToolCallSpans {
		tc := &s.ToolCallSpans[i]
		parent := span.SpanContext()
		if p, ok := subs[tc.SubagentRunID]; ok {
			parent = p
		}
		a := []attribute.KeyValue{
			AttrOperationName.String(OpExecuteTool), AttrToolName.String(tc.Name), AttrToolCallID.String(tc.ID),
			AttrConversationID.String(s.Thread), AttrTenant.String(s.Tenant), AttrToolAnswered.Bool(tc.Result),
		}
		if tc.ParentMessageID != "" {
			a = append(a, AttrToolParentMessage.String(tc.ParentMessageID))
		}
		et := ""
		if tc.Error != "" {
			et = ErrorTypeTool
		}
		e.child(parent, tools[tc.ID].SpanID(), spanName(OpExecuteTool, tc.Name), tc.StartedAt, tc.EndedAt, a, et, tc.Error)
	}
	span.End(trace.WithTimestamp(ms(max(s.EndedAt, s.StartedAt))))

	e.metrics(s, provider, model, errType)
}

// errorType is the error.type of a run's or an invocation's outcome: for
// "error", the producer's code when it gave one, else class; for ended (the
// outcome the consumer gives one it ended itself), endedClass; else "" (it
// did not fail).
func errorType(outcome, code, class, ended, endedClass string) string {
	switch outcome {
	case "error":
		if code != "" {
			return code
		}
		return class
	case ended:
		return endedClass
	}
	return ""
}

// toolOf reports whether tool call id is attributed to invocation sub (a
// subagent cannot be the child of its own tool call).
func toolOf(s *pipeline.RunSummary, id, sub string) bool {
	for i := range s.ToolCallSpans {
		if s.ToolCallSpans[i].ID == id {
			return s.ToolCallSpans[i].SubagentRunID == sub
		}
	}
	return false
}

func spanContext(t trace.TraceID, s trace.SpanID) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: t, SpanID: s, TraceFlags: trace.FlagsSampled})
}

func spanName(op, name string) string {
	if name == "" {
		return op
	}
	return op + " " + name
}

// child emits one span under parent with id sid.
func (e *Exporter) child(parent trace.SpanContext, sid trace.SpanID, name string, start, end int64, attrs []attribute.KeyValue, errType, msg string) {
	ctx := trace.ContextWithSpanContext(context.Background(), parent)
	ctx = context.WithValue(ctx, idsKey{}, spanIDs{parent.TraceID(), sid})
	_, span := e.tracer.Start(ctx, name, trace.WithTimestamp(ms(start)), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	e.fail(span, errType, msg)
	span.End(trace.WithTimestamp(ms(max(end, start))))
}

// fail marks span failed with class errType ("" = not failed); msg is the
// producer's text, exported only with Config.Content.
func (e *Exporter) fail(span trace.Span, errType, msg string) {
	if errType == "" {
		return
	}
	span.SetAttributes(AttrErrorType.String(errType))
	desc := errType
	if e.cfg.Content && msg != "" {
		desc = msg
		span.SetAttributes(AttrErrorMessage.String(msg))
	}
	span.SetStatus(codes.Error, desc)
}

// usageAttrs sums the reported counts of s's usage entries: input and
// output from the summary's totals, the cache and reasoning counts where
// any entry reports them.
func usageAttrs(s *pipeline.RunSummary) []attribute.KeyValue {
	var in, out, cacheRead, cacheWrite, reasoning int64
	var hasIn, hasOut, hasRead, hasWrite, hasReasoning bool
	for _, u := range s.Usage {
		add := func(sum *int64, has *bool, n *int64) {
			if n != nil {
				*sum += *n
				*has = true
			}
		}
		add(&in, &hasIn, u.InputTokens)
		add(&out, &hasOut, u.OutputTokens)
		add(&cacheRead, &hasRead, u.CachedInputTokens)
		add(&cacheWrite, &hasWrite, u.CacheWriteInputTokens)
		add(&reasoning, &hasReasoning, u.ReasoningTokens)
	}
	var a []attribute.KeyValue
	if hasIn {
		a = append(a, AttrUsageInputTokens.Int64(in))
	}
	if hasOut {
		a = append(a, AttrUsageOutputTokens.Int64(out))
	}
	if hasRead {
		a = append(a, AttrUsageCacheReadTokens.Int64(cacheRead))
	}
	if hasWrite {
		a = append(a, AttrUsageCacheCreationTokens.Int64(cacheWrite))
	}
	if hasReasoning {
		a = append(a, AttrReasoningTokens.Int64(reasoning))
	}
	return a
}

// metrics records s's token usage, one measurement per usage entry and
// token type, and its duration.
//
// The provider, model and error.type values are bounded per tenant
// (MaxAttrValues).
func (e *Exporter) metrics(s *pipeline.RunSummary, provider, model, errType string) {
	ctx := context.Background()
	for _, u := range s.Usage {
		base := []attribute.KeyValue{AttrOperationName.String(OpInvokeAgent), AttrTenant.String(s.Tenant)}
		if v := e.values.value(s.Tenant, valProvider, u.Provider); v != "" {
			base = append(base, AttrProviderName.String(v))
		}
		if v := e.values.value(s.Tenant, valModel, u.Model); v != "" {
			base = append(base, AttrRequestModel.String(v))
		}
		if u.InputTokens != nil {
			e.tokens.Record(ctx, *u.InputTokens, metric.WithAttributes(append(base, AttrTokenType.String(TokenTypeInput))...))
		}
		if u.OutputTokens != nil {
			e.tokens.Record(ctx, *u.OutputTokens, metric.WithAttributes(append(base[:len(base):len(base)], AttrTokenType.String(TokenTypeOutput))...))
		}
	}
	a := []attribute.KeyValue{AttrOperationName.String(OpInvokeAgent), AttrTenant.String(s.Tenant)}
	if v := e.values.value(s.Tenant, valProvider, provider); v != "" {
		a = append(a, AttrProviderName.String(v))
	}
	if v := e.values.value(s.Tenant, valModel, model); v != "" {
		a = append(a, AttrRequestModel.String(v))
	}
	if v := e.values.value(s.Tenant, valErrType, errType); v != "" {
		a = append(a, AttrErrorType.String(v))
	}
	e.dur.Record(ctx, float64(s.DurationMs)/1000, metric.WithAttributes(a...))
}
