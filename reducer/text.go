package reducer

import "github.com/threadcast/threadcast/codec"

// Text messages (events.md §B, messages.md §2.1). Each function first
// verifies the sequence rules (open/close, attribution), then changes the
// view. They serve the explicit events and the chunks expanded in chunks.go.

// textStart opens (or reopens) text message id. roleName "" means absent
// (read as "assistant"). A message the view already holds continues: its
// role, name and owner stand (S5, S6). It returns the retained copy of id
// it stored, for a chunk's lane to share.
func (t *Thread) textStart(id, roleName, name string, hasName bool, tag owner, meta codec.Raw) (string, *ProtocolError) {
	m := &t.m
	if _, open := m.openText.get(id); open {
		return "", t.violation("S2", "text message "+quote(id)+" is already open; close it with TEXT_MESSAGE_END first")
	}
	rec, known := m.ownText.get(id)
	if known && !sameOwner(tag, rec) {
		return "", t.violation("S7", "text message "+quote(id)+" is owned by "+rec.String()+", not "+tag.String())
	}
	msg := t.byID.at(id)
	key := t.keyFor(msg, id)
	m.openText.put(key, struct{}{})
	if !known {
		rec = t.openerOwner(msg, tag)
		m.ownText.put(key, rec)
	}
	if msg != nil && msg.role == roleActivity {
		t.warn(WarnTargetActivity, "TEXT_MESSAGE_START names activity message "+quote(id)+"; ignored")
		return key, nil
	}
	if msg == nil {
		r := roleAssistant
		if roleName != "" {
			r = parseRole(roleName)
		}
		msg = &message{id: key, role: r, hasContent: true, owner: t.internOwner(tag)}
		if hasName {
			msg.name, msg.hasName = retain(name), true
		}
		t.appendMessage(msg)
	}
	m.remember(laneText, key, rec, msg) // its content events follow
	t.mergeInto(msg, meta)
	return key, nil
}

// keyFor returns a storable copy of id, sharing msg's id when msg holds it.
func (t *Thread) keyFor(msg *message, id string) string {
	if msg != nil {
		return msg.id
	}
	return retain(id)
}

// streamContent appends delta to the open text or reasoning message id
// (lane laneText or laneReasoning): *_CONTENT and chunk continuations.
func (t *Thread) streamContent(lane laneKind, id, delta string, tag owner, meta codec.Raw) *ProtocolError {
	msg, err := t.contentTarget(lane, id, tag)
	if msg == nil {
		return err
	}
	t.appendText(msg, delta)
	t.mergeInto(msg, meta)
	return nil
}

// mergeInto merges an event's metadata into msg (metadata.md: per key, last
// write wins) and journals the change. msg or meta may be nil.
func (t *Thread) mergeInto(msg *message, meta codec.Raw) {
	if msg != nil && meta != nil {
		mergeMeta(&msg.meta, meta)
		t.j.replaced(msg)
	}
}

// textEnd closes text message id.
func (t *Thread) textEnd(id string, tag owner, meta codec.Raw) *ProtocolError {
	if err := t.checkTextOpen(id, tag); err != nil {
		return err
	}
	t.m.dropHotID(id)
	t.m.openText.del(id)
	t.mergeInto(t.textTarget(id), meta)
	return nil
}

// checkTextOpen verifies a continuation of text message id (S1, A1).
func (t *Thread) checkTextOpen(id string, tag owner) *ProtocolError {
	if _, open := t.m.openText.get(id); !open {
		return t.violation("S1", "no open text message "+quote(id)+"; start it with TEXT_MESSAGE_START first")
	}
	if rec, ok := t.m.ownText.get(id); ok && !sameOwner(tag, rec) {
		return t.violation("A1", "continuation tagged "+tag.String()+" but text message "+quote(id)+" is owned by "+rec.String())
	}
	return nil
}

// textTarget returns the message a text continuation writes to, or nil with
// a warning when a MESSAGES_SNAPSHOT dropped it (messages.md §4 edge cases)
// or it is an activity message.
func (t *Thread) textTarget(id string) *message {
	msg := t.byID.at(id)
	switch {
	case msg == nil:
		t.warn(WarnTargetMissing, "no message "+quote(id)+" to continue (a snapshot dropped it); event skipped")
		return nil
	case msg.role == roleActivity:
		t.warn(WarnTargetActivity, "message "+quote(id)+" is an activity message; event skipped")
		return nil
	}
	return msg
}

// contentTarget verifies a content event of kind k for item id and returns
// the message it appends to (nil with a warning, or with an error). The
// cache (machine.hot) answers deltas to the last two items without map
// lookups.
func (t *Thread) contentTarget(k laneKind, id string, tag owner) (*message, *ProtocolError) {
	hot := &t.m.hot
	for i := range hot {
		h := &hot[i]
		if h.kind != k || h.id != id {
			continue
		}
		if !sameOwner(tag, h.owner) {
			if k == laneText {
				return nil, t.checkTextOpen(id, tag)
			}
			return nil, t.checkReasoningOpen(id, tag)
		}
		msg := h.msg
		if i == 1 {
			hot[0], hot[1] = hot[1], hot[0]
		}
		return msg, nil
	}
	var err *ProtocolError
	if k == laneText {
		err = t.checkTextOpen(id, tag)
	} else {
		err = t.checkReasoningOpen(id, tag)
	}
	if err != nil {
		return nil, err
	}
	msg := t.textTarget(id)
	if msg == nil {
		return nil, nil
	}
	own := &t.m.ownText
	if k == laneReasoning {
		own = &t.m.ownReason
	}
	if rec, ok := own.get(id); ok {
		t.m.remember(k, msg.id, rec, msg)
	}
	return msg, nil
}

// openerOwner is the owner a start records for a message this run has no
// record of: an untagged start of a stored message (an earlier run's, or the
// input's) continues it, and "the established owner of the stored message
// stands" (subagents.md §3); otherwise the start's own tag.
func (t *Thread) openerOwner(msg *message, tag owner) owner {
	if msg != nil && !tag.tagged {
		return msg.owner
	}
	return t.internOwner(tag)
}
