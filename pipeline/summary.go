package pipeline

import (
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/threadcast/threadcast/codec"
)

// RunSummary is published on tap.<tenant>.RUN_SUMMARY.<thread> when a run
// ends: by RUN_FINISHED, by the producer's RUN_ERROR, or by a rejection of
// the stream (a fatal protocol error, Outcome "rejected"). It is kept in the
// thread's checkpoint, so a run that spans an eviction or a restart is
// summarised whole. After a crash the summary of a run that ended in the
// replayed tail is published again; it carries a Nats-Msg-Id derived from
// the tenant, the thread, StartSeq and RunID (runSummaryMsgID), so the tap
// stream (Config.TapStream) stores it once when the second publication
// comes within Config.TapDuplicates of the first: that window bounds the
// replay after a crash that keeps a run summary exactly once. Live
// subscribers of the tap subjects may see both.
type RunSummary struct {
	Tenant string `json:"tenant"`
	Thread string `json:"thread"`
	RunID  string `json:"runId"`
	// StartSeq and EndSeq are the stream sequences of the run's first and
	// last events.
	StartSeq uint64 `json:"startSeq"`
	EndSeq   uint64 `json:"endSeq"`
	// StartedAt/EndedAt are the events' own timestamps (ms since the epoch)
	// when they carry one, else the time ingest applied them.
	StartedAt  int64 `json:"startedAt"`
	EndedAt    int64 `json:"endedAt"`
	DurationMs int64 `json:"durationMs"`
	Events     int   `json:"events"`
	Messages   int   `json:"messages"`   // text messages started
	ToolCalls  int   `json:"toolCalls"`  // tool calls started
	Activities int   `json:"activities"` // activity snapshots
	Reasoning  int   `json:"reasoning"`  // reasoning messages started
	Subagents  int   `json:"subagents"`  // subagent invocations started
	// Outcome: "success", "interrupt", "cancelled" (RUN_FINISHED's outcome;
	// "success" when absent), "error" (RUN_ERROR) or "rejected" (the consumer
	// rejected the stream).
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
	Code    string `json:"code,omitempty"`
	// Usage is the terminal event's `usage` (patterns.md §1.6): one entry per
	// provider and model; absent counts are omitted, never read as zero.
	// Totals sum the entries' reported counts.
	Usage        []Usage `json:"usage,omitempty"`
	InputTokens  int64   `json:"inputTokens,omitempty"`
	OutputTokens int64   `json:"outputTokens,omitempty"`
	TotalTokens  int64   `json:"totalTokens,omitempty"`
	// ParentRunID is RUN_STARTED.parentRunId: the run that spawned this
	// one (separate-run delegation).
	ParentRunID string `json:"parentRunId,omitempty"`
	// ToolCallSpans and SubagentSpans time the run's tool calls and
	// subagent invocations, in the order they started, for tracing
	// (Config.Runs). Together they hold at most MaxRunSpans entries; the
	// ones past it are counted in DroppedSpans, not kept, so that a run
	// kept in a checkpoint stays bounded. Ids and names are cut at
	// MaxSpanString bytes.
	ToolCallSpans     []ToolCallSpan `json:"toolCallSpans,omitempty"`
	SubagentSpans     []SubagentSpan `json:"subagentSpans,omitempty"`
	DroppedSpans      int            `json:"droppedSpans,omitempty"`
	lastMsgID, lastTC string
}

// Bounds of a RunSummary's spans: MaxRunSpans tool calls and subagent
// invocations per run (about 400 bytes each in a checkpoint), each id and
// name at most MaxSpanString bytes.
const (
	MaxRunSpans   = 128
	MaxSpanString = 128
)

// MaxRunError bounds a RunSummary's Error (RUN_ERROR's message), in bytes;
// its Code, Outcome and each Usage's Provider and Model are cut at
// MaxSpanString. They are what a producer wrote, and a summary travels in
// checkpoints, on the tap and into OpenTelemetry attributes.
const MaxRunError = 1024

// ToolCallSpan is one tool call of a run. Times are ms since the epoch,
// from the events' timestamps when they carry one, else the time ingest
// applied them.
type ToolCallSpan struct {
	ID              string `json:"id"`
	Name            string `json:"name,omitempty"`
	ParentMessageID string `json:"parentMessageId,omitempty"`
	// SubagentRunID is the invocation the call is attributed to ("" = the
	// run's own agent).
	SubagentRunID string `json:"subagentRunId,omitempty"`
	// StartedAt is TOOL_CALL_START's time (or the first TOOL_CALL_CHUNK's);
	// EndedAt that of its TOOL_CALL_RESULT when one came in the run, else
	// of TOOL_CALL_END (or the last chunk), else the run's end.
	StartedAt int64 `json:"startedAt"`
	EndedAt   int64 `json:"endedAt"`
	// Result: a TOOL_CALL_RESULT answered the call in this run (a frontend
	// tool's answer comes in the next run's input).
	Result bool `json:"result,omitempty"`
	// Error is the tool message's error (messages.md: a tool message's
	// `error`, seen in a MESSAGES_SNAPSHOT of the run), cut like Error.
	Error string `json:"error,omitempty"`
}

// SubagentSpan is one subagent invocation (SUBAGENT_STARTED) of a run.
type SubagentSpan struct {
	RunID               string `json:"subagentRunId"`
	Name                string `json:"name,omitempty"`
	ParentSubagentRunID string `json:"parentSubagentRunId,omitempty"`
	ParentToolCallID    string `json:"parentToolCallId,omitempty"`
	StartedAt           int64  `json:"startedAt"`
	EndedAt             int64  `json:"endedAt"`
	// Outcome: "success" or "suspended" (SUBAGENT_FINISHED), "error"
	// (SUBAGENT_ERROR, with Error and Code), or "abandoned" (the run ended
	// with the invocation still active).
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
	Code    string `json:"code,omitempty"`
}

// RunSink receives each run summary as the run ends (Config.Runs). Run is
// called on a shard goroutine and must not block: it copies or enqueues
// what it needs. s is the sink's to keep: neither it nor the slices it
// holds are modified after the call, and the sink must not modify them.
type RunSink interface {
	Run(s *RunSummary)
}

// Usage is one TokenUsage entry; nil pointers are counts not reported.
type Usage struct {
	Provider              string `json:"provider,omitempty"`
	Model                 string `json:"model,omitempty"`
	InputTokens           *int64 `json:"inputTokens,omitempty"`
	OutputTokens          *int64 `json:"outputTokens,omitempty"`
	TotalTokens           *int64 `json:"totalTokens,omitempty"`
	ReasoningTokens       *int64 `json:"reasoningTokens,omitempty"`
	CachedInputTokens     *int64 `json:"cachedInputTokens,omitempty"`
	CacheWriteInputTokens *int64 `json:"cacheWriteInputTokens,omitempty"`
}

// runAcc accumulates the summary of a thread's current run. The zero value
// means "no run open".
type runAcc struct {
	open bool
	s    RunSummary
}

// runSummaryState is the persisted form of runAcc (inside checkpoints).
// LastMsg and LastTC are the ids of the run's latest text message and
// tool call chunk streams: a chunk without an id continues them, also
// after the thread was reloaded.
type runSummaryState struct {
	Open    bool       `json:"open"`
	S       RunSummary `json:"s"`
	LastMsg string     `json:"lastMsg,omitempty"`
	LastTC  string     `json:"lastTC,omitempty"`
}

func (a *runAcc) marshal() []byte {
	if !a.open {
		return nil
	}
	b, _ := json.Marshal(runSummaryState{Open: true, S: a.s, LastMsg: a.s.lastMsgID, LastTC: a.s.lastTC})
	return b
}

func (a *runAcc) unmarshal(b []byte) {
	*a = runAcc{}
	if len(b) == 0 {
		return
	}
	var st runSummaryState
	if json.Unmarshal(b, &st) == nil && st.Open {
		a.open, a.s = true, st.S
		a.s.lastMsgID, a.s.lastTC = st.LastMsg, st.LastTC
	}
}

func eventTime(e *codec.Event, now time.Time) int64 {
	if e.Has(codec.FieldTimestamp) && e.Timestamp > 0 {
		return e.Timestamp
	}
	return now.UnixMilli()
}

// observe folds one accepted event into the run. e's strings are views into
// the decoder's buffer: what is kept is copied (strings.Clone). It returns true when the
// event ended the run (the summary is then in a.s and a is closed).
func (a *runAcc) observe(seq uint64, e *codec.Event, now time.Time) bool {
	if e.Type == codec.TypeRunStarted {
		a.open = true
		a.s = RunSummary{RunID: strings.Clone(validUTF8(e.RunID)), StartSeq: seq, StartedAt: eventTime(e, now),
			ParentRunID: spanString(e.ParentRunID)}
	}
	if !a.open {
		return false
	}
	a.s.Events++
	a.s.EndSeq = seq
	switch e.Type {
	case codec.TypeTextMessageStart:
		a.s.Messages++
	case codec.TypeTextMessageChunk:
		if id := validUTF8(e.MessageID); id != "" && id != a.s.lastMsgID {
			a.s.lastMsgID = strings.Clone(id)
			a.s.Messages++
		}
	case codec.TypeToolCallStart:
		a.s.ToolCalls++
		a.startTool(e, now, false)
	case codec.TypeToolCallChunk:
		if id := validUTF8(e.ToolCallID); id != "" && id != a.s.lastTC {
			a.s.lastTC = strings.Clone(id)
			a.s.ToolCalls++
			a.startTool(e, now, true)
		} else if tc := a.tool(a.s.lastTC); tc != nil && !tc.Result {
			tc.EndedAt = eventTime(e, now)
		}
	case codec.TypeToolCallEnd:
		if tc := a.tool(e.ToolCallID); tc != nil && !tc.Result {
			tc.EndedAt = eventTime(e, now)
		}
	case codec.TypeToolCallResult:
		if tc := a.tool(e.ToolCallID); tc != nil {
			tc.EndedAt, tc.Result = eventTime(e, now), true
		}
	case codec.TypeMessagesSnapshot:
		for i := range e.Messages {
			if m := &e.Messages[i]; m.Error != "" && m.ToolCallID != "" {
				if tc := a.tool(m.ToolCallID); tc != nil {
					tc.Error = spanText(m.Error)
				}
			}
		}
	case codec.TypeActivitySnapshot:
		a.s.Activities++
	case codec.TypeReasoningMessageStart:
		a.s.Reasoning++
	case codec.TypeSubagentStarted:
		a.s.Subagents++
		if a.room() {
			a.s.SubagentSpans = append(a.s.SubagentSpans, SubagentSpan{
				RunID: spanString(e.SubagentRunID), Name: spanString(e.Name),
				ParentSubagentRunID: spanString(e.ParentSubagentRunID), ParentToolCallID: spanString(e.ParentToolCallID),
				StartedAt: eventTime(e, now)})
		}
	case codec.TypeSubagentFinished:
		if sa := a.subagent(e.SubagentRunID); sa != nil {
			sa.EndedAt, sa.Outcome = eventTime(e, now), "success"
			if e.Outcome != nil && e.Outcome.Type != "" {
				sa.Outcome = spanString(e.Outcome.Type)
			}
		}
	case codec.TypeSubagentError:
		if sa := a.subagent(e.SubagentRunID); sa != nil {
			sa.EndedAt, sa.Outcome = eventTime(e, now), "error"
			sa.Error, sa.Code = spanText(e.Message), spanText(e.Code)
		}
	case codec.TypeRunFinished:
		a.s.Outcome = "success"
		if e.Outcome != nil && e.Outcome.Type != "" {
			a.s.Outcome = spanString(e.Outcome.Type)
		}
		a.end(e, now)
		return true
	case codec.TypeRunError:
		a.s.Outcome, a.s.Error, a.s.Code = "error", strings.Clone(validUTF8(cutUTF8(e.Message, MaxRunError))), spanString(e.Code)
		a.end(e, now)
		return true
	}
	return false
}

// reject ends the run as rejected by the consumer (fatal protocol error).
func (a *runAcc) reject(seq uint64, reason string, now time.Time) bool {
	if !a.open {
		return false
	}
	a.s.EndSeq, a.s.Outcome, a.s.Error = seq, "rejected", spanText(reason)
	a.s.EndedAt = now.UnixMilli()
	a.s.DurationMs = max(0, a.s.EndedAt-a.s.StartedAt)
	a.closeSpans()
	a.open = false
	return true
}

// room reports whether the run may keep another span, counting the one
// dropped when not.
func (a *runAcc) room() bool {
	if len(a.s.ToolCallSpans)+len(a.s.SubagentSpans) < MaxRunSpans {
		return true
	}
	a.s.DroppedSpans++
	return false
}

// startTool keeps a tool call opened by e; a chunk stream has no closing
// event, so its end is its last chunk (chunk): the first until another
// comes.
func (a *runAcc) startTool(e *codec.Event, now time.Time, chunk bool) {
	if !a.room() {
		return
	}
	tc := ToolCallSpan{
		ID: spanString(e.ToolCallID), Name: spanString(e.ToolCallName),
		ParentMessageID: spanString(e.ParentMessageID), SubagentRunID: spanString(e.SubagentRunID),
		StartedAt: eventTime(e, now)}
	if chunk {
		tc.EndedAt = tc.StartedAt
	}
	a.s.ToolCallSpans = append(a.s.ToolCallSpans, tc)
}

// tool returns the latest kept tool call with id, or nil. A run keeps at
// most MaxRunSpans, and only the lifecycle events of calls look them up.
func (a *runAcc) tool(id string) *ToolCallSpan {
	if id == "" {
		return nil
	}
	id = spanKey(id)
	for i := len(a.s.ToolCallSpans) - 1; i >= 0; i-- {
		if a.s.ToolCallSpans[i].ID == id {
			return &a.s.ToolCallSpans[i]
		}
	}
	return nil
}

// subagent returns the kept invocation id while it is active, or nil.
func (a *runAcc) subagent(id string) *SubagentSpan {
	id = spanKey(id)
	for i := len(a.s.SubagentSpans) - 1; i >= 0; i-- {
		if sa := &a.s.SubagentSpans[i]; sa.RunID == id && sa.Outcome == "" {
			return sa
		}
	}
	return nil
}

// closeSpans ends, at the run's end, the invocations still active
// (abandoned) and the tool calls that never closed.
func (a *runAcc) closeSpans() {
	for i := range a.s.SubagentSpans {
		if sa := &a.s.SubagentSpans[i]; sa.Outcome == "" {
			sa.EndedAt, sa.Outcome = a.s.EndedAt, "abandoned"
		}
	}
	for i := range a.s.ToolCallSpans {
		if tc := &a.s.ToolCallSpans[i]; tc.EndedAt == 0 {
			tc.EndedAt = max(tc.StartedAt, a.s.EndedAt)
		}
	}
}

// spanString is a copy of s cut at MaxSpanString bytes.
func spanString(s string) string { return strings.Clone(spanKey(s)) }

// spanKey is s as a summary keeps and compares it: cut at MaxSpanString
// bytes on a character boundary, and valid UTF-8 (validUTF8).
func spanKey(s string) string { return validUTF8(cutUTF8(s, MaxSpanString)) }

// spanText is a copy of a message kept in a summary, cut at 64 bytes (with
// "…") on a character boundary, and valid UTF-8.
func spanText(s string) string {
	if c := cutUTF8(s, 64); len(c) < len(s) {
		return validUTF8(c) + "…"
	}
	return strings.Clone(validUTF8(s))
}

// cutUTF8 is s cut at n bytes at most, on a character boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// validUTF8 is s, or s with its invalid bytes replaced by U+FFFD when it
// is not valid UTF-8. The codec decodes an escaped lone surrogate to such
// bytes (WTF-8), and JSON replaces them when a summary is written into a
// checkpoint: what a summary keeps and compares must read back as it was
// written, so it is made valid on the way in.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func (a *runAcc) end(e *codec.Event, now time.Time) {
	a.s.EndedAt = eventTime(e, now)
	a.s.DurationMs = max(0, a.s.EndedAt-a.s.StartedAt)
	for _, u := range e.Usage {
		a.s.Usage = append(a.s.Usage, Usage{
			Provider: spanString(u.Provider), Model: spanString(u.Model),
			InputTokens: count(u.InputTokens), OutputTokens: count(u.OutputTokens),
			TotalTokens: count(u.TotalTokens), ReasoningTokens: count(u.ReasoningTokens),
			CachedInputTokens: count(u.CachedInputTokens), CacheWriteInputTokens: count(u.CacheWriteInputTokens),
		})
		a.s.InputTokens += max(0, u.InputTokens)
		a.s.OutputTokens += max(0, u.OutputTokens)
		a.s.TotalTokens += max(0, u.TotalTokens)
	}
	a.closeSpans()
	a.open = false
}

// count maps the codec's "absent = -1" to a nil pointer.
func count(n int64) *int64 {
	if n < 0 {
		return nil
	}
	return &n
}

// appendRunSummary appends s as JSON.
func appendRunSummary(dst []byte, s *RunSummary) []byte {
	b, _ := json.Marshal(s) // a plain struct of strings and numbers: cannot fail
	return append(dst, b...)
}

// RunSummarizer accumulates the summaries of one thread's runs exactly as
// ingest does, for readers of the event log outside a shard (threadcast
// export). Feed it, in stream order, every event the reducer accepted
// (Observe) and every rejection of the stream (Reject); each returns the
// summary of the run that the call ended, with Tenant and Thread left to the
// caller. now is the time to stamp an event without a timestamp of its own
// with (ingest: when it applied the event). The zero value has no run open;
// a RunSummarizer is used by one goroutine.
type RunSummarizer struct{ acc runAcc }

// Observe folds one accepted event (its strings may be views into a decoder
// buffer: what is kept is copied). ok is true when the event ended a run.
func (r *RunSummarizer) Observe(seq uint64, e *codec.Event, now time.Time) (s RunSummary, ok bool) {
	if r.acc.observe(seq, e, now) {
		return r.acc.s, true
	}
	return RunSummary{}, false
}

// Reject ends the open run, if any, as rejected by the consumer for reason
// at seq. ok is true when a run was open.
func (r *RunSummarizer) Reject(seq uint64, reason string, now time.Time) (s RunSummary, ok bool) {
	if r.acc.reject(seq, reason, now) {
		return r.acc.s, true
	}
	return RunSummary{}, false
}

// Open reports whether a run is open (started and not yet ended).
func (r *RunSummarizer) Open() bool { return r.acc.open }
