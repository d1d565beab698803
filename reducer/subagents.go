package reducer

import "github.com/threadcast/threadcast/codec"

// Subagent lifecycle (subagents.md §2). The spec phrases these rules as
// producer duties; the verdicts below are the reference's and the upstream
// conformance fixtures' (A8-A10 fatal), as processing.md §7.3 records.
// Events attributed to an invocation never announced are accepted (A5) and
// create no record.

// subagentStarted announces an invocation. It opens a lane and closes none.
func (t *Thread) subagentStarted(e *codec.Event) *ProtocolError {
	id := e.SubagentRunID
	if _, ok := t.m.active[id]; ok {
		return t.violation("A9", "subagent "+quote(id)+" is already active")
	}
	if _, ok := t.m.closed.get(id); ok {
		return t.violation("A9", "subagent "+quote(id)+" already finished in this run; invocation ids are not reused")
	}
	if e.Has(codec.FieldParentSubagentRunID) {
		p := e.ParentSubagentRunID
		_, active := t.m.active[p]
		_, closed := t.m.closed.get(p)
		if !active && !closed {
			return t.violation("A10", "parentSubagentRunId "+quote(p)+" was not announced in this run")
		}
	}
	inv := &invocation{id: retain(id), name: retain(e.Name), run: len(t.runs) - 1, status: subActive}
	if e.Has(codec.FieldDescription) {
		inv.description, inv.hasDescription = retain(e.Description), true
	}
	if e.Has(codec.FieldParentSubagentRunID) {
		inv.parentSub, inv.hasParentSub = retain(e.ParentSubagentRunID), true
	}
	if e.Has(codec.FieldParentToolCallID) {
		inv.parentToolCall, inv.hasParentToolCall = retain(e.ParentToolCallID), true
	}
	if e.Has(codec.FieldParentMessageID) {
		inv.parentMessage, inv.hasParentMessage = retain(e.ParentMessageID), true
	}
	t.subagents = append(t.subagents, inv)
	put(&t.m.active, inv.id, inv)
	t.j.runsChanged()
	return nil
}

// subagentEnded handles SUBAGENT_FINISHED and SUBAGENT_ERROR (its lane was
// closed by dispatch). Only an active invocation can end (A8).
func (t *Thread) subagentEnded(e *codec.Event) *ProtocolError {
	inv, ok := t.m.active[e.SubagentRunID]
	if !ok {
		return t.violation("A8", "no active subagent "+quote(e.SubagentRunID)+"; SUBAGENT_STARTED must come first")
	}
	delete(t.m.active, inv.id)
	t.m.closed.put(inv.id, struct{}{})
	if e.Type == codec.TypeSubagentError {
		inv.status = subError
		inv.errMessage = retain(e.Message)
		if e.Has(codec.FieldCode) {
			inv.errCode, inv.hasCode = retain(e.Code), true
		}
	} else {
		inv.status = subFinished
		if e.Outcome != nil {
			if e.Outcome.Type == "suspended" {
				inv.status = subSuspended
			}
			inv.outcome = retainJSON(e.Outcome.Raw)
		}
		if e.Has(codec.FieldResult) {
			inv.result = retainJSON(e.Result)
		}
	}
	t.j.runsChanged()
	return nil
}

// abandonSubagents marks every active invocation abandoned (RUN_ERROR or a
// rejection ends everything, subagents.md §6).
func (t *Thread) abandonSubagents() {
	for _, inv := range t.m.active {
		inv.status = subAbandoned
	}
	if len(t.m.active) > 0 {
		t.j.runsChanged()
	}
}
