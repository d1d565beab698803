package reducer

import (
	"strconv"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/jsondoc"
)

// runStarted opens a run (patterns.md §1.1, §1.3): run-scoped tracking starts
// empty, and the messages echoed in input that the view does not hold yet
// are appended (the reference's reading of RUN_STARTED.input, messages.md §3).
func (t *Thread) runStarted(e *codec.Event) *ProtocolError {
	if t.phase == phaseActive {
		return t.violation("L4", "RUN_STARTED while run "+quote(t.lastRun().runID)+" is still active")
	}
	t.m.reset()
	t.phase = phaseActive
	r := &run{
		threadID: t.threadID, // nearly always the thread's own id: no copy
		runID:    retain(e.RunID),
		status:   runRunning,
	}
	if e.ThreadID != t.threadID {
		r.threadID = retain(e.ThreadID)
	}
	if e.Has(codec.FieldParentRunID) {
		r.parentRunID, r.hasParent = retain(e.ParentRunID), true
	}
	if e.Has(codec.FieldProtocolVersion) {
		switch e.ProtocolVersion { // the usual values are constants: no copy
		case "1.0":
			r.protocolVersion = "1.0"
		case "1.1":
			r.protocolVersion = "1.1"
		default:
			r.protocolVersion = retain(e.ProtocolVersion)
		}
	}
	t.runs = append(t.runs, r)
	t.j.runsChanged()
	if e.Input != nil {
		t.appendEchoed(e.Input.Messages)
	}
	return nil
}

// runFinished closes the run. Open chunk streams are closed first (their END
// synthesized); anything else still open is a violation (L5, A11).
func (t *Thread) runFinished(e *codec.Event) *ProtocolError {
	if err := t.closeAllLanes(); err != nil {
		return err
	}
	if err := t.checkNothingOpen(); err != nil {
		return err
	}
	r := t.lastRun()
	r.status = runFinished
	if e.Outcome != nil {
		switch e.Outcome.Type {
		case "interrupt":
			r.status = runInterrupted
		case "cancelled":
			r.status = runCancelled
		}
		r.outcome = retainJSON(e.Outcome.Raw)
	}
	if e.Has(codec.FieldResult) {
		r.result = retainJSON(e.Result)
	}
	if e.Has(codec.FieldUsage) {
		r.usage = appendUsage(nil, e.Usage)
	}
	if r.status == runFinished || r.status == runInterrupted {
		r.pending = t.pendingCalls(r.outcome)
	}
	t.phase = phaseFinished
	t.j.runsChanged()
	return nil
}

// checkNothingOpen verifies the RUN_FINISHED preconditions (patterns.md §1.4)
// in the order the reference reports them.
func (t *Thread) checkNothingOpen() *ProtocolError {
	m := &t.m
	switch {
	case len(m.steps) > 0:
		return t.violation("L5", "RUN_FINISHED while step "+quote(m.steps[0].name)+" of "+m.steps[0].owner.String()+" is still active")
	case m.openText.len() > 0:
		return t.violation("L5", "RUN_FINISHED while text message "+quote(anyKey(&m.openText))+" is still open")
	case m.openReason.len() > 0:
		return t.violation("L5", "RUN_FINISHED while reasoning message "+quote(anyKey(&m.openReason))+" is still open")
	case m.openSpan.len() > 0:
		return t.violation("L5", "RUN_FINISHED while reasoning span "+quote(anyKey(&m.openSpan))+" is still open")
	case m.openTool.len() > 0:
		return t.violation("L5", "RUN_FINISHED while tool call "+quote(anyKey(&m.openTool))+" is still open")
	case len(m.active) > 0:
		for _, s := range t.subagents {
			if m.active[s.id] == s {
				return t.violation("A11", "RUN_FINISHED while subagent "+quote(s.id)+" is still active")
			}
		}
	}
	return nil
}

// anyKey returns the smallest key, so that error texts are deterministic.
func anyKey(m *idSet) string {
	min, first := "", true
	for k := range m.all() {
		if first || k < min {
			min, first = k, false
		}
	}
	return min
}

// runError ends the run as failed by the producer (patterns.md §1.2, §1.7):
// allowed first, during a run, and after RUN_FINISHED (a late failure of the
// run that just finished). Everything open is abandoned.
func (t *Thread) runError(e *codec.Event) *ProtocolError {
	var r *run
	switch t.phase {
	case phaseIdle:
		r = &run{threadID: t.threadID, synthetic: true}
		t.runs = append(t.runs, r)
	case phaseActive:
		if err := t.closeAllLanes(); err != nil {
			return err
		}
		t.abandonSubagents()
		t.m.abandon()
		r = t.lastRun()
	default: // phaseFinished: late failure
		r = t.lastRun()
	}
	r.status = runError
	r.errMessage, r.hasError = retain(e.Message), true
	if e.Has(codec.FieldCode) {
		r.errCode, r.hasCode = retain(e.Code), true
	}
	if e.Has(codec.FieldUsage) {
		r.usage = appendUsage(nil, e.Usage)
	}
	t.phase = phaseErrored
	t.j.runsChanged()
	return nil
}

// stepStarted opens a step for its owner (L11).
func (t *Thread) stepStarted(name string, tag owner) *ProtocolError {
	if t.m.stepIndex(tag, name) >= 0 {
		return t.violation("L11", "step "+quote(name)+" of "+tag.String()+" is already active")
	}
	t.m.steps = append(t.m.steps, step{owner: tag.retained(), name: retain(name)})
	t.j.runsChanged()
	return nil
}

// stepFinished closes the owner's step (L12; A3 when another owner holds it).
func (t *Thread) stepFinished(name string, tag owner) *ProtocolError {
	i := t.m.stepIndex(tag, name)
	if i < 0 {
		for _, s := range t.m.steps {
			if s.name == name {
				return t.violation("A3", "step "+quote(name)+" is open under "+s.owner.String()+
					", not "+tag.String()+"; a step must be finished by whoever started it")
			}
		}
		return t.violation("L12", "step "+quote(name)+" of "+tag.String()+" was not started")
	}
	t.m.steps = append(t.m.steps[:i], t.m.steps[i+1:]...)
	t.j.runsChanged()
	return nil
}

// appendUsage encodes a usage array as JSON; absent counts (-1) are omitted.
func appendUsage(dst []byte, us []codec.TokenUsage) []byte {
	dst = append(dst, '[')
	for i := range us {
		if i > 0 {
			dst = append(dst, ',')
		}
		u := &us[i]
		dst = append(dst, '{')
		first := true
		sep := func() {
			if !first {
				dst = append(dst, ',')
			}
			first = false
		}
		if u.Provider != "" {
			sep()
			dst = append(dst, `"provider":`...)
			dst = codec.AppendViewString(dst, u.Provider)
		}
		if u.Model != "" {
			sep()
			dst = append(dst, `"model":`...)
			dst = codec.AppendViewString(dst, u.Model)
		}
		for _, c := range [...]struct {
			k string
			v int64
		}{
			{"inputTokens", u.InputTokens}, {"outputTokens", u.OutputTokens},
			{"totalTokens", u.TotalTokens}, {"reasoningTokens", u.ReasoningTokens},
			{"cachedInputTokens", u.CachedInputTokens}, {"cacheWriteInputTokens", u.CacheWriteInputTokens},
		} {
			if c.v >= 0 {
				sep()
				dst = codec.AppendViewString(dst, c.k)
				dst = append(dst, ':')
				dst = strconv.AppendInt(dst, c.v, 10)
			}
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// pendingCalls returns the run's unanswered tool calls as a JSON array (nil
// when there are none): the success outcome's pendingToolCallIds when it
// names any, else derived from the stream — the calls the run started that
// got no TOOL_CALL_RESULT, in call order (run-input.md §2; absence never
// means "nothing pending").
func (t *Thread) pendingCalls(outcome []byte) []byte {
	if outcome != nil {
		if d, err := jsondoc.Parse(outcome); err == nil {
			if named, err := d.Get(nil, "/pendingToolCallIds"); err == nil && len(named) > 2 {
				return named
			}
		}
	}
	var out []byte
	for _, id := range t.m.calls {
		if _, ok := t.m.answered.get(id); ok {
			continue
		}
		if out == nil {
			out = append(out, '[')
		} else {
			out = append(out, ',')
		}
		out = codec.AppendViewString(out, id)
	}
	if out == nil {
		return nil
	}
	return append(out, ']')
}
