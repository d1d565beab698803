package reducer

import "github.com/threadcast/threadcast/codec"

// Chunk expansion and lanes (patterns.md §3). A chunk is expanded into the
// START / CONTENT / END calls of its family, which verify and apply exactly
// as the explicit events do. The expansion follows @ag-ui/client 1.0.0's
// transformChunks where the spec describes behaviour in prose: an opening
// chunk without delta yields only the START; a continuation carrying only
// metadata yields an empty content append carrying it; a synthesized END
// carries the opener's attribution and no metadata.

// closeLane synthesizes the END of o's open chunk stream, if any.
func (t *Thread) closeLane(o owner) *ProtocolError {
	i := t.m.laneIndex(o)
	if i < 0 {
		return nil
	}
	return t.closeLaneAt(i)
}

func (t *Thread) closeLaneAt(i int) *ProtocolError {
	l := t.m.lanes[i]
	last := len(t.m.lanes) - 1
	t.m.lanes[i] = t.m.lanes[last]
	t.m.lanes = t.m.lanes[:last]
	switch l.kind {
	case laneText:
		return t.textEnd(l.id, l.tag, nil)
	case laneTool:
		return t.toolEnd(l.id, l.tag, nil)
	default:
		return t.reasoningEnd(l.id, l.tag, nil)
	}
}

// closeAllLanes closes every lane (a run-level event arrived).
func (t *Thread) closeAllLanes() *ProtocolError {
	for len(t.m.lanes) > 0 {
		if err := t.closeLaneAt(len(t.m.lanes) - 1); err != nil {
			return err
		}
	}
	return nil
}

// closeLaneHolding ends a chunk stream assembling the item an explicit
// streaming event names, whatever its lane: the two spellings do not mix
// within one item (patterns.md §3.2).
func (t *Thread) closeLaneHolding(e *codec.Event) *ProtocolError {
	var k laneKind
	id := e.MessageID
	switch e.Type {
	case codec.TypeTextMessageStart, codec.TypeTextMessageContent, codec.TypeTextMessageEnd:
		k = laneText
	case codec.TypeToolCallStart, codec.TypeToolCallArgs, codec.TypeToolCallEnd:
		k, id = laneTool, e.ToolCallID
	case codec.TypeReasoningMessageStart, codec.TypeReasoningMessageContent, codec.TypeReasoningMessageEnd:
		k = laneReasoning
	default:
		return nil
	}
	if i := t.m.laneHolding(k, id); i >= 0 {
		return t.closeLaneAt(i)
	}
	return nil
}

// resolveLane picks the lane a chunk belongs to (patterns.md §3.4): the lane
// already assembling its id; else its tag's lane; an id-less untagged chunk
// continues the parent's stream of its kind, else the only stream of its
// kind; several candidate lanes are ambiguous (S13).
func (t *Thread) resolveLane(k laneKind, id string, hasID bool, tag owner) (owner, *ProtocolError) {
	if hasID {
		if i := t.m.laneHolding(k, id); i >= 0 {
			lo := t.m.lanes[i].owner
			if tag.tagged && tag != lo {
				return owner{}, t.violation("S14", "chunk tagged "+tag.String()+" continues "+quote(id)+
					" whose stream belongs to "+lo.String())
			}
			return lo, nil
		}
		return tag, nil
	}
	if tag.tagged {
		return tag, nil
	}
	if i := t.m.laneIndex(owner{}); i >= 0 && t.m.lanes[i].kind == k {
		return owner{}, nil
	}
	found, n := owner{}, 0
	for _, l := range t.m.lanes {
		if l.kind == k {
			found, n = l.owner, n+1
		}
	}
	if n > 1 {
		return owner{}, t.violation("S13", "chunk carries neither an id nor a subagentRunId, but "+itoa(n)+
			" lanes have an open stream of its kind")
	}
	return found, nil
}

// continuing returns the index of lane o if it is assembling an item of kind
// k that a chunk with (id, hasID) continues, else -1.
func (t *Thread) continuing(o owner, k laneKind, id string, hasID bool) int {
	i := t.m.laneIndex(o)
	if i >= 0 && t.m.lanes[i].kind == k && (!hasID || id == t.m.lanes[i].id) {
		return i
	}
	return -1
}

// textChunk expands TEXT_MESSAGE_CHUNK.
func (t *Thread) textChunk(e *codec.Event) *ProtocolError {
	tag, hasID := ownerOf(e), e.Has(codec.FieldMessageID)
	o, err := t.resolveLane(laneText, e.MessageID, hasID, tag)
	if err != nil {
		return err
	}
	var id string
	var opener owner
	opened := false
	if i := t.continuing(o, laneText, e.MessageID, hasID); i >= 0 {
		l := &t.m.lanes[i]
		if e.Has(codec.FieldRole) && e.Role != l.role {
			return t.violation("S11", "chunk role "+quote(e.Role)+" does not match the open stream's role "+quote(l.role))
		}
		if e.Has(codec.FieldName) && (!l.hasName || e.Name != l.name) {
			return t.violation("S11", "chunk name "+quote(e.Name)+" does not match the open stream's name")
		}
		id, opener = l.id, l.tag
	} else {
		if err := t.closeLane(o); err != nil {
			return err
		}
		if !hasID {
			return t.violation("S10", "the first TEXT_MESSAGE_CHUNK of a message must carry messageId")
		}
		r := roleAssistant
		if e.Has(codec.FieldRole) {
			r = parseRole(e.Role)
		}
		// The lane is added once the start succeeded (a failed one ends
		// the run, which abandons every lane), and shares its stored id.
		key, err := t.textStart(e.MessageID, r.String(), e.Name, e.Has(codec.FieldName), tag, e.Metadata)
		if err != nil {
			return err
		}
		l := lane{owner: t.internOwner(o), kind: laneText, id: key, tag: t.internOwner(tag),
			role: r.String(), hasName: e.Has(codec.FieldName)}
		if l.hasName {
			l.name = retain(e.Name)
		}
		t.m.lanes = append(t.m.lanes, l)
		id, opener, opened = l.id, l.tag, true
	}
	if ct := contentTag(tag, opener); e.Has(codec.FieldDelta) {
		return t.streamContent(laneText, id, e.Delta, ct, e.Metadata)
	} else if !opened && e.Metadata != nil {
		return t.streamContent(laneText, id, "", ct, e.Metadata)
	}
	return nil
}

// contentTag is the attribution of a content event synthesized from a chunk:
// the chunk's own tag, else the opener's.
func contentTag(tag, opener owner) owner {
	if tag.tagged {
		return tag
	}
	return opener
}

// toolChunk expands TOOL_CALL_CHUNK.
func (t *Thread) toolChunk(e *codec.Event) *ProtocolError {
	tag, hasID := ownerOf(e), e.Has(codec.FieldToolCallID)
	o, err := t.resolveLane(laneTool, e.ToolCallID, hasID, tag)
	if err != nil {
		return err
	}
	var id string
	var opener owner
	opened := false
	if i := t.continuing(o, laneTool, e.ToolCallID, hasID); i >= 0 {
		l := &t.m.lanes[i]
		if e.Has(codec.FieldToolCallName) && e.ToolCallName != l.name {
			return t.violation("S11", "chunk toolCallName "+quote(e.ToolCallName)+" does not match the open stream's toolCallName "+quote(l.name))
		}
		if e.Has(codec.FieldParentMessageID) && (!l.hasParent || e.ParentMessageID != l.parent) {
			return t.violation("S11", "chunk parentMessageId "+quote(e.ParentMessageID)+" does not match the open stream's parentMessageId")
		}
		id, opener = l.id, l.tag
	} else {
		if err := t.closeLane(o); err != nil {
			return err
		}
		if !hasID {
			return t.violation("S10", "the first TOOL_CALL_CHUNK of a call must carry toolCallId")
		}
		if !e.Has(codec.FieldToolCallName) {
			return t.violation("S10", "the first TOOL_CALL_CHUNK of a call must carry toolCallName")
		}
		hasParent := e.Has(codec.FieldParentMessageID)
		c, err := t.toolStart(e.ToolCallID, e.ToolCallName, e.ParentMessageID, hasParent, tag, e.Metadata)
		if err != nil {
			return err
		}
		l := lane{owner: t.internOwner(o), kind: laneTool, id: c.id, tag: t.internOwner(tag),
			name: c.name, hasName: true, hasParent: hasParent}
		if hasParent {
			l.parent = retain(e.ParentMessageID)
		}
		t.m.lanes = append(t.m.lanes, l)
		id, opener, opened = l.id, l.tag, true
	}
	if ct := contentTag(tag, opener); e.Has(codec.FieldDelta) {
		return t.toolArgs(id, e.Delta, ct, e.Metadata)
	} else if !opened && e.Metadata != nil {
		return t.toolArgs(id, "", ct, e.Metadata)
	}
	return nil
}

// reasoningChunk expands REASONING_MESSAGE_CHUNK (no opener fields to check).
func (t *Thread) reasoningChunk(e *codec.Event) *ProtocolError {
	tag, hasID := ownerOf(e), e.Has(codec.FieldMessageID)
	o, err := t.resolveLane(laneReasoning, e.MessageID, hasID, tag)
	if err != nil {
		return err
	}
	var id string
	var opener owner
	opened := false
	if i := t.continuing(o, laneReasoning, e.MessageID, hasID); i >= 0 {
		id, opener = t.m.lanes[i].id, t.m.lanes[i].tag
	} else {
		if err := t.closeLane(o); err != nil {
			return err
		}
		if !hasID {
			return t.violation("S10", "the first REASONING_MESSAGE_CHUNK of a message must carry messageId")
		}
		key, err := t.reasoningStart(e.MessageID, tag, e.Metadata)
		if err != nil {
			return err
		}
		l := lane{owner: t.internOwner(o), kind: laneReasoning, id: key, tag: t.internOwner(tag)}
		t.m.lanes = append(t.m.lanes, l)
		id, opener, opened = l.id, l.tag, true
	}
	if ct := contentTag(tag, opener); e.Has(codec.FieldDelta) {
		return t.streamContent(laneReasoning, id, e.Delta, ct, e.Metadata)
	} else if !opened && e.Metadata != nil {
		return t.streamContent(laneReasoning, id, "", ct, e.Metadata)
	}
	return nil
}
