package demo

import (
	"strconv"
	"strings"
)

// NOTE: the builders below append events to s.buf in stream order. Each one
// opens and closes what it streams (messages, tool calls, reasoning, steps,
// subagent invocations), so any sequence of them is a valid run body; the
// ones that run concurrently in a real agent are generated apart with
// collect and interleaved with merge, which keeps each part's own order.

// collect runs f with an empty buffer and returns what it generated.
func (s *Script) collect(f func()) []Event {
	saved := s.buf
	s.buf = nil
	f()
	out := s.buf
	s.buf = saved
	return out
}

// merge appends a and b interleaved at random, each in its own order.
func (s *Script) merge(a, b []Event) {
	for len(a) > 0 || len(b) > 0 {
		if len(b) == 0 || (len(a) > 0 && s.r.IntN(len(a)+len(b)) < len(a)) {
			s.buf = append(s.buf, a[0])
			a = a[1:]
		} else {
			s.buf = append(s.buf, b[0])
			b = b[1:]
		}
	}
}

// tag adds the attribution field when sub names a subagent invocation.
func tag(o *obj, sub string) *obj { return o.strIf("subagentRunId", sub) }

// msgOpts describes one streamed text message.
type msgOpts struct {
	role, name, sub string
	ttft            int // time to first token, upper bound in ms
	keep            float64
	startMeta       map[string]any
	endMeta         map[string]any
}

// textMessage streams text as one message and returns its id and how many
// deltas it took. keep < 1 stops the stream early (the user cancelled): the
// message is still closed, as a cancelled run requires. A subagent's message
// tags its opener; continuations are tagged or not at random, both legal
// (subagents.md §3).
func (s *Script) textMessage(text string, m msgOpts) (string, int) {
	id := s.id("msg")
	start := tag(event(TextMessageStart).str("messageId", id).str("role", m.role).strIf("name", m.name), m.sub)
	if m.startMeta != nil {
		start.val("metadata", m.startMeta)
	}
	s.add(TextMessageStart, start, s.ms(m.ttft/4, m.ttft))
	toks := s.tokens(text)
	if m.keep > 0 && m.keep < 1 {
		toks = toks[:1+int(float64(len(toks)-1)*m.keep)]
	}
	if m.role == "user" {
		// A user's message arrives whole, not token by token.
		toks = []string{text}
	}
	for _, t := range toks {
		c := event(TextMessageContent).str("messageId", id).str("delta", t)
		if m.sub != "" && s.r.IntN(2) == 0 {
			tag(c, m.sub)
		}
		s.add(TextMessageContent, c, s.ms(12, 45))
	}
	end := event(TextMessageEnd).str("messageId", id)
	if m.sub != "" && s.r.IntN(2) == 0 {
		tag(end, m.sub)
	}
	if m.endMeta != nil {
		end.val("metadata", m.endMeta)
	}
	s.add(TextMessageEnd, end, s.ms(5, 30))
	return id, len(toks)
}

func (s *Script) userMessage(text string) {
	s.textMessage(text, msgOpts{role: "user", ttft: 40})
}

// reasoning streams one reasoning span holding one reasoning message of n
// sentences, sometimes followed by the provider's encrypted reasoning
// artefact. It returns the number of reasoning tokens.
func (s *Script) reasoning(sub string, n int) int {
	span, id := s.id("rs"), s.id("reason")
	s.add(ReasoningStart, tag(event(ReasoningStart).str("messageId", span), sub), s.ms(100, 500))
	s.add(ReasoningMessageStart, tag(event(ReasoningMessageStart).str("messageId", id).str("role", "reasoning"), sub), s.ms(5, 40))
	toks := s.tokens(s.sentences(s.p.thoughts, n))
	for _, t := range toks {
		s.add(ReasoningMessageContent, tag(event(ReasoningMessageContent).str("messageId", id).str("delta", t), sub), s.ms(8, 25))
	}
	s.add(ReasoningMessageEnd, tag(event(ReasoningMessageEnd).str("messageId", id), sub), s.ms(5, 20))
	if s.r.Float64() < 0.3 {
		s.add(ReasoningEncryptedValue, tag(event(ReasoningEncryptedValue).str("subtype", "message").str("entityId", id).str("encryptedValue", s.opaque()), sub), s.ms(5, 20))
	}
	s.add(ReasoningEnd, tag(event(ReasoningEnd).str("messageId", span), sub), s.ms(5, 20))
	return len(toks)
}

var prefaces = []string{
	"Let me check that.", "I'll look that up first.", "One moment — checking the numbers.",
	"Let me verify before answering.", "Gathering what I need.",
}

func (s *Script) preface(sub, name string) (string, int) {
	return s.textMessage(pick(s.r, prefaces), msgOpts{role: "assistant", name: name, sub: sub, ttft: 800})
}

// searchPhase runs a web_search activity: the widget appears with the query,
// results arrive one patch at a time, then the status flips to done.
func (s *Script) searchPhase(u *usage) {
	s.add(StepStarted, event(StepStarted).str("stepName", "search"), s.ms(0, 10))
	if s.r.IntN(2) == 0 {
		_, n := s.preface("", s.p.agent)
		u.output += n
	}
	id := s.id("act")
	content := struct {
		Query   string `json:"query"`
		Status  string `json:"status"`
		Results []hit  `json:"results"`
	}{pick(s.r, s.p.queries), "searching", []hit{}}
	s.add(ActivitySnapshot, event(ActivitySnapshot).str("messageId", id).str("activityType", ActivityWebSearch).val("content", content), s.ms(50, 300))
	n := 2 + s.r.IntN(4)
	start := s.r.IntN(len(s.p.hits))
	took := 0
	for k := 0; k < n; k++ {
		h := s.p.hits[(start+k)%len(s.p.hits)]
		d := s.ms(150, 700)
		took += int(d / 1e6)
		s.add(ActivityDelta, event(ActivityDelta).str("messageId", id).str("activityType", ActivityWebSearch).
			val("patch", []map[string]any{{"op": "add", "path": "/results/-", "value": h}}), d)
	}
	s.add(ActivityDelta, event(ActivityDelta).str("messageId", id).str("activityType", ActivityWebSearch).
		val("patch", []map[string]any{{"op": "replace", "path": "/status", "value": "done"}, {"op": "add", "path": "/tookMs", "value": took}}).
		val("metadata", map[string]any{MetaPrefix + "engine": "demo-search"}), s.ms(20, 100))
	s.add(StepFinished, event(StepFinished).str("stepName", "search"), s.ms(0, 10))
}

// toolPhase has the agent call one or two tools (in parallel, on the same
// assistant message), stream their arguments, and receive their results.
func (s *Script) toolPhase(u *usage) {
	s.add(StepStarted, event(StepStarted).str("stepName", "tools"), s.ms(0, 10))
	parent, n := s.preface("", s.p.agent)
	u.output += n
	type call struct {
		id string
		t  tool
	}
	calls := make([]call, 1+s.r.IntN(2))
	for i := range calls {
		calls[i] = call{s.id("call"), pick(s.r, s.p.tools)}
		c := calls[i]
		s.add(ToolCallStart, event(ToolCallStart).str("toolCallId", c.id).str("toolCallName", c.t.name).str("parentMessageId", parent), s.ms(100, 400))
		args := s.chunks(string(mustJSON(c.t.args(s.r))))
		for _, a := range args {
			s.add(ToolCallArgs, event(ToolCallArgs).str("toolCallId", c.id).str("delta", a), s.ms(5, 20))
		}
		u.output += len(args)
		s.add(ToolCallEnd, event(ToolCallEnd).str("toolCallId", c.id).val("metadata", map[string]any{MetaPrefix + "argsChunks": len(args)}), s.ms(5, 20))
		if s.r.Float64() < 0.1 {
			s.add(ReasoningEncryptedValue, event(ReasoningEncryptedValue).str("subtype", "tool-call").str("entityId", c.id).str("encryptedValue", s.opaque()), s.ms(5, 20))
		}
	}
	for _, c := range calls {
		d := s.ms(300, 2000)
		s.add(ToolCallResult, event(ToolCallResult).str("messageId", s.id("tool")).str("toolCallId", c.id).
			str("content", string(mustJSON(c.t.result(s.r)))).str("role", "tool").
			val("metadata", map[string]any{MetaPrefix + "durationMs": int(d / 1e6)}), d)
	}
	s.add(StepFinished, event(StepFinished).str("stepName", "tools"), s.ms(0, 10))
}

// subagentPhase delegates to subagents: one, two in parallel (their events
// interleaved), or one nested in the other; half the time through a
// "delegate" tool call whose result is the subagent's summary.
func (s *Script) subagentPhase(u *usage) {
	s.add(StepStarted, event(StepStarted).str("stepName", "delegate"), s.ms(0, 10))
	var toolCall, toolMsg string
	if s.r.IntN(2) == 0 {
		var n int
		toolMsg, n = s.preface("", s.p.agent)
		u.output += n
		toolCall = s.id("call")
		s.add(ToolCallStart, event(ToolCallStart).str("toolCallId", toolCall).str("toolCallName", "delegate").str("parentMessageId", toolMsg), s.ms(100, 300))
		for _, a := range s.chunks(string(mustJSON(map[string]any{"task": pick(s.r, s.p.planSteps), "agents": len(s.p.subagents)}))) {
			s.add(ToolCallArgs, event(ToolCallArgs).str("toolCallId", toolCall).str("delta", a), s.ms(5, 20))
		}
		s.add(ToolCallEnd, event(ToolCallEnd).str("toolCallId", toolCall), s.ms(5, 20))
	}
	a, b := s.p.subagents[0], s.p.subagents[1%len(s.p.subagents)]
	if s.r.IntN(2) == 0 {
		a, b = b, a
	}
	aID, bID := s.id("sub"), s.id("sub")
	one := subCall{sa: a, id: aID, toolCall: toolCall, toolMsg: toolMsg, note: true}
	var summary string
	switch s.r.IntN(3) {
	case 0: // one invocation
		summary = s.subRun(u, one)
	case 1: // two in parallel; only one writes a note, so that the state
		// patches stay in the order the model applied them
		x := s.collect(func() { summary = s.subRun(u, one) })
		y := s.collect(func() { s.subRun(u, subCall{sa: b, id: bID, toolCall: toolCall, toolMsg: toolMsg}) })
		s.merge(x, y)
	default: // b nested inside a
		one.inner = func() { s.subRun(u, subCall{sa: b, id: bID, parent: aID, note: true}) }
		summary = s.subRun(u, one)
	}
	if toolCall != "" {
		s.add(ToolCallResult, event(ToolCallResult).str("messageId", s.id("tool")).str("toolCallId", toolCall).
			str("content", summary).str("role", "tool"), s.ms(20, 100))
	}
	s.add(StepFinished, event(StepFinished).str("stepName", "delegate"), s.ms(0, 10))
}

// subCall describes one subagent invocation.
type subCall struct {
	sa                subagent
	id, parent        string // subagentRunId, parentSubagentRunId
	toolCall, toolMsg string // the spawning tool call and its message, if any
	note              bool   // leave a note in the state
	inner             func() // a nested invocation, run in the middle
}

// subRun is one subagent invocation, from SUBAGENT_STARTED to its terminal
// event. It returns the summary the invocation reported.
func (s *Script) subRun(u *usage, c subCall) string {
	sa, id := c.sa, c.id
	st := event(SubagentStarted).str("subagentRunId", id).str("name", sa.name).str("description", sa.description).
		strIf("parentSubagentRunId", c.parent).strIf("parentToolCallId", c.toolCall).strIf("parentMessageId", c.toolMsg)
	s.add(SubagentStarted, st, s.ms(50, 300))
	s.add(StepStarted, tag(event(StepStarted).str("stepName", "work"), id), s.ms(0, 10))
	if s.r.Float64() < 0.4 {
		u.subOutput += s.reasoning(id, 1)
	}
	text := strings.Join(sa.lines, " ")
	_, n := s.textMessage(text, msgOpts{role: "assistant", name: sa.name, sub: id, ttft: 600})
	u.subOutput += n
	if c.inner != nil {
		c.inner()
	}
	if c.note {
		s.addNote(id, sa.name, sa.lines[len(sa.lines)-1])
	}
	s.add(StepFinished, tag(event(StepFinished).str("stepName", "work"), id), s.ms(0, 10))
	if s.r.Float64() < 0.1 {
		s.add(SubagentError, event(SubagentError).str("subagentRunId", id).str("message", sa.name+" exceeded its step budget").str("code", "budget_exceeded"), s.ms(100, 600))
		return sa.name + " failed: step budget exceeded"
	}
	summary := sa.lines[len(sa.lines)-1]
	fin := event(SubagentFinished).str("subagentRunId", id).val("result", map[string]string{"summary": summary})
	if s.r.IntN(2) == 0 {
		fin.val("outcome", map[string]string{"type": "success"})
	}
	s.add(SubagentFinished, fin, s.ms(20, 200))
	return summary
}

// widgetPhase shows the persona's own activity type, which dashboards do not
// know and render generically, and updates it once.
func (s *Script) widgetPhase(u *usage) {
	id := s.id("act")
	s.add(ActivitySnapshot, event(ActivitySnapshot).str("messageId", id).str("activityType", s.p.widget).val("content", s.p.widgetContent(s.r)), s.ms(200, 900))
	s.add(ActivityDelta, event(ActivityDelta).str("messageId", id).str("activityType", s.p.widget).
		val("patch", []map[string]any{{"op": "add", "path": "/status", "value": "ready"}}), s.ms(200, 900))
}

// answerPhase streams the final answer, with a checklist widget ticked off
// while it streams half of the time. cancelled cuts the answer short. It
// returns the answer's message id.
func (s *Script) answerPhase(u *usage, cancelled bool) string {
	s.add(StepStarted, event(StepStarted).str("stepName", "answer"), s.ms(0, 10))
	keep := 1.0
	if cancelled {
		keep = 0.2 + 0.5*s.r.Float64()
	}
	var ticks []Event
	if s.r.IntN(2) == 0 {
		ticks = s.checklist(keep)
	}
	var id string
	var n int
	ttft := 300 + s.r.IntN(900)
	endMeta := map[string]any{MetaPrefix + "finishReason": "stop", MetaPrefix + "latencyMs": ttft}
	if cancelled {
		endMeta[MetaPrefix+"finishReason"] = "cancelled"
	}
	if s.r.IntN(10) == 0 {
		// A null under a metadata key is data a consumer keeps (metadata.md §1).
		endMeta[MetaPrefix+"cacheKey"] = nil
	}
	msg := s.collect(func() {
		id, n = s.textMessage(s.answerText(), msgOpts{
			role: "assistant", name: s.p.agent, ttft: ttft, keep: keep,
			startMeta: map[string]any{MetaPrefix + "model": s.p.model},
			endMeta:   endMeta,
		})
	})
	// The usage is known only at the end: patch it into the END event's
	// metadata now that the token count is.
	u.output += n
	last := &msg[len(msg)-1]
	endMeta[MetaPrefix+"usage"] = map[string]int{"outputTokens": n, "inputTokens": u.input}
	last.JSON = event(TextMessageEnd).str("messageId", id).val("metadata", endMeta).done()
	s.merge(msg, ticks)
	s.add(StepFinished, event(StepFinished).str("stepName", "answer"), s.ms(0, 10))
	return id
}

// checklist creates the checklist widget now and returns the patches that
// tick its items, to be interleaved with the answer. keep < 1 ticks fewer.
func (s *Script) checklist(keep float64) []Event {
	id := s.id("act")
	type item struct {
		Label string `json:"label"`
		Done  bool   `json:"done"`
	}
	n := 3 + s.r.IntN(3)
	start := s.r.IntN(len(s.p.checklist))
	items := make([]item, n)
	for k := range items {
		items[k] = item{Label: s.p.checklist[(start+k)%len(s.p.checklist)]}
	}
	content := map[string]any{"title": s.p.listTitle, "items": items}
	s.add(ActivitySnapshot, event(ActivitySnapshot).str("messageId", id).str("activityType", ActivityChecklist).val("content", content), s.ms(100, 400))
	return s.collect(func() {
		for k := 0; k < int(float64(n)*keep); k++ {
			ops := []map[string]any{{"op": "replace", "path": "/items/" + strconv.Itoa(k) + "/done", "value": true}}
			if k == n-1 && s.r.IntN(3) == 0 {
				ops = append(ops, map[string]any{"op": "add", "path": "/items/-", "value": item{Label: "Share with the team"}})
			}
			s.add(ActivityDelta, event(ActivityDelta).str("messageId", id).str("activityType", ActivityChecklist).val("patch", ops), s.ms(200, 1200))
		}
	})
}
