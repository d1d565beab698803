package reducer

import "github.com/threadcast/threadcast/codec"

// Tool calls (events.md §C, messages.md §2.2-2.3).

// toolStart opens (or reopens) tool call id. The call inherits the owner of
// the message named by parent; a tag disagreeing with it is rejected (A6, as
// the reference does). Where the spec leaves the holder of the call open
// (parent absent, unknown, or not an assistant message) the reference's
// choice is replicated so that views diff cleanly against it. It returns
// the call, whose id and name are the retained copies a chunk's lane shares.
func (t *Thread) toolStart(id, name, parent string, hasParent bool, tag owner, meta codec.Raw) (*toolCall, *ProtocolError) {
	m := &t.m
	m.dropHotCall()
	if _, open := m.openTool.get(id); open {
		return nil, t.violation("S2", "tool call "+quote(id)+" is already open; close it with TOOL_CALL_END first")
	}
	var inherited owner
	hasInherited := false
	if hasParent {
		if rec, ok := m.ownText.get(parent); ok {
			if tag.tagged && tag != rec {
				return nil, t.violation("A6", "tool call "+quote(id)+" tagged "+tag.String()+" but its parent message "+
					quote(parent)+" is owned by "+rec.String())
			}
			inherited, hasInherited = rec, true
		} else if holder := t.byID.at(parent); holder != nil && holder.role == roleAssistant {
			// A holder this run has no record of (an earlier run's, or the
			// input's): "the established owner of the stored message
			// stands" (subagents.md §3), and the call inherits it. Ownership
			// tracking has reset, so a disagreeing tag is not checked.
			inherited, hasInherited = holder.owner, true
		}
	}
	rec, known := m.ownTool.get(id)
	if known {
		if !sameOwner(tag, rec) {
			return nil, t.violation("S7", "tool call "+quote(id)+" is owned by "+rec.String()+", not "+tag.String())
		}
		if !tag.tagged && hasInherited && inherited != rec {
			return nil, t.violation("A6", "tool call "+quote(id)+" is owned by "+rec.String()+" but its parent message "+
				quote(parent)+" is owned by "+inherited.String())
		}
	}
	c := t.calls.at(id)
	key := t.retainOr(c, id)
	m.openTool.put(key, struct{}{})
	if _, ok := m.started.get(key); !ok {
		m.started.put(key, struct{}{})
		if m.calls == nil {
			m.calls = make([]string, 0, 4)
		}
		m.calls = append(m.calls, key)
	}
	if !known {
		switch {
		case tag.tagged:
			m.ownTool.put(key, t.internOwner(tag))
		case hasInherited:
			m.ownTool.put(key, inherited)
		default:
			m.ownTool.put(key, owner{})
		}
	}
	if c != nil {
		if c.name != name {
			t.warn(WarnToolRenamed, "tool call "+quote(id)+" reopened as "+quote(name)+" (was "+quote(c.name)+")")
			c.name = retain(name)
		}
		mergeMeta(&c.meta, meta)
		t.j.replaced(c.msg)
		return c, nil
	}
	holder, created := t.callHolder(parent, hasParent, key)
	if created {
		// The call opens the message that holds it, under its own owner
		// (messages.md §2.2): text continuing that message, and calls
		// joining it, must agree with that owner like any other.
		if tag.tagged && !holder.owner.tagged {
			holder.owner = t.internOwner(tag)
		}
		if !m.ownText.has(holder.id) {
			m.ownText.put(holder.id, holder.owner)
		}
	}
	c = &toolCall{id: key, name: retain(name), msg: holder}
	mergeMeta(&c.meta, meta)
	holder.hasToolCalls = true
	holder.toolCalls = append(holder.toolCalls, c)
	t.indexCall(c)
	if !created {
		t.j.replaced(holder)
	}
	return c, nil
}

func (t *Thread) retainOr(c *toolCall, id string) string {
	if c != nil {
		return c.id
	}
	return retain(id)
}

// callHolder returns the assistant message that holds a new tool call,
// creating it when needed (the reference's resolveOrCreateAssistantMessage).
// An empty parentMessageId names the message "" ("the empty string is a
// legal (if unwise) identifier", envelope.md §4), where the reference's
// JavaScript truthiness reads it as absent.
func (t *Thread) callHolder(parent string, hasParent bool, callID string) (*message, bool) {
	id := callID
	if hasParent {
		ex := t.byID.at(parent)
		if ex != nil && ex.role == roleAssistant {
			return ex, false
		}
		if ex != nil {
			t.warn(WarnToolParentRole, "parentMessageId "+quote(parent)+" names a "+ex.role.String()+
				" message; the call goes to a new assistant message "+quote(callID))
		} else {
			id = retain(parent)
		}
	}
	m := &message{id: id, role: roleAssistant, hasToolCalls: true}
	t.appendMessage(m)
	return m, true
}

// toolArgs appends an argument fragment to open tool call id.
func (t *Thread) toolArgs(id, delta string, tag owner, meta codec.Raw) *ProtocolError {
	c, err := t.argsTarget(id, tag)
	if c == nil {
		return err
	}
	t.j.argsAppended(c)
	c.args = appendDelta(c.args, delta)
	mergeMeta(&c.meta, meta)
	if meta != nil {
		t.j.replaced(c.msg)
	}
	return nil
}

// toolEnd closes tool call id.
func (t *Thread) toolEnd(id string, tag owner, meta codec.Raw) *ProtocolError {
	if err := t.checkToolOpen(id, tag); err != nil {
		return err
	}
	t.m.dropHotCall()
	t.m.openTool.del(id)
	if c := t.callTarget(id); c != nil && meta != nil {
		mergeMeta(&c.meta, meta)
		t.j.replaced(c.msg)
	}
	return nil
}

// argsTarget verifies an arguments event for tool call id and returns the
// call it appends to (nil with a warning, or with an error). Like
// contentTarget's, a cache (machine.hotCall) answers a run of deltas to
// one call without map lookups.
func (t *Thread) argsTarget(id string, tag owner) (*toolCall, *ProtocolError) {
	h := &t.m.hotCall
	if h.call != nil && h.id == id {
		if !sameOwner(tag, h.owner) {
			return nil, t.checkToolOpen(id, tag)
		}
		return h.call, nil
	}
	if err := t.checkToolOpen(id, tag); err != nil {
		return nil, err
	}
	c := t.callTarget(id)
	if c == nil {
		return nil, nil
	}
	if rec, ok := t.m.ownTool.get(id); ok {
		h.id, h.owner, h.call = c.id, rec, c
	}
	return c, nil
}

func (t *Thread) checkToolOpen(id string, tag owner) *ProtocolError {
	if _, open := t.m.openTool.get(id); !open {
		return t.violation("S1", "no open tool call "+quote(id)+"; start it with TOOL_CALL_START first")
	}
	if rec, ok := t.m.ownTool.get(id); ok && !sameOwner(tag, rec) {
		return t.violation("A1", "continuation tagged "+tag.String()+" but tool call "+quote(id)+" is owned by "+rec.String())
	}
	return nil
}

// callTarget returns tool call id, or nil with a warning when a
// MESSAGES_SNAPSHOT dropped the message holding it.
func (t *Thread) callTarget(id string) *toolCall {
	c := t.calls.at(id)
	if c == nil {
		t.warn(WarnTargetMissing, "no tool call "+quote(id)+" to continue (a snapshot dropped it); event skipped")
	}
	return c
}

// toolResult mints the tool message of TOOL_CALL_RESULT (messages.md §2.3),
// owned by the result's own tag, placed right after the assistant message
// holding the call (after the results already there), or at the end when no
// holder is known — the reference's placement.
func (t *Thread) toolResult(e *codec.Event) *ProtocolError {
	tag := ownerOf(e)
	id := e.MessageID
	key := t.keyFor(t.byID.at(id), id)
	t.m.dropHotID(key) // the minted owner may replace a cached one
	t.m.ownText.put(key, t.internOwner(tag))
	c := t.calls.at(e.ToolCallID)
	callID := t.retainOr(c, e.ToolCallID) // one copy for the set and the message
	if _, ok := t.m.answered.get(callID); !ok {
		t.m.answered.put(callID, struct{}{})
	}
	msg := &message{id: key, role: roleTool, toolCallID: callID, owner: t.internOwner(tag)}
	setContent(msg, e.Content)
	mergeMeta(&msg.meta, e.Metadata)
	if c == nil || c.msg.role != roleAssistant {
		t.appendMessage(msg)
		return nil
	}
	i := c.msg.idx + 1
	for i < len(t.msgs) && t.msgs[i].role == roleTool {
		i++
	}
	t.insertMessage(i, msg)
	return nil
}
