package reducer

import "github.com/threadcast/threadcast/codec"

// Reasoning (events.md §D, messages.md §2.4, §2.6). Spans and reasoning
// messages are separate namespaces (envelope.md §4: "a span and a message
// inside it MAY share an id. The span id namespaces nothing"): separate open
// sets (S3) and separate owner maps. The reference shares one owner map, so
// it rejects a message whose id a span of another owner holds, and lets a
// continuation of a message pass on the span's owner.

// spanStart opens reasoning span id; it builds nothing.
func (t *Thread) spanStart(id string, tag owner) *ProtocolError {
	m := &t.m
	if _, open := m.openSpan.get(id); open {
		return t.violation("S3", "reasoning span "+quote(id)+" is already open; close it with REASONING_END first")
	}
	rec, known := m.ownSpan.get(id)
	if known && !sameOwner(tag, rec) {
		return t.violation("S7", "reasoning span "+quote(id)+" is owned by "+rec.String()+", not "+tag.String())
	}
	key := retain(id)
	m.openSpan.put(key, struct{}{})
	if !known {
		m.ownSpan.put(key, t.internOwner(tag))
	}
	return nil
}

// spanEnd closes reasoning span id.
func (t *Thread) spanEnd(id string, tag owner) *ProtocolError {
	if _, open := t.m.openSpan.get(id); !open {
		return t.violation("S3", "no open reasoning span "+quote(id)+"; open it with REASONING_START first")
	}
	if rec, ok := t.m.ownSpan.get(id); ok && !sameOwner(tag, rec) {
		return t.violation("A1", "REASONING_END tagged "+tag.String()+" but span "+quote(id)+" is owned by "+rec.String())
	}
	t.m.openSpan.del(id)
	return nil
}

// reasoningStart opens (or reopens) reasoning message id. It returns the
// retained copy of id it stored, for a chunk's lane to share.
func (t *Thread) reasoningStart(id string, tag owner, meta codec.Raw) (string, *ProtocolError) {
	m := &t.m
	if _, open := m.openReason.get(id); open {
		return "", t.violation("S2", "reasoning message "+quote(id)+" is already open; close it with REASONING_MESSAGE_END first")
	}
	rec, known := m.ownReason.get(id)
	if known && !sameOwner(tag, rec) {
		return "", t.violation("S7", "reasoning message "+quote(id)+" is owned by "+rec.String()+", not "+tag.String())
	}
	msg := t.byID.at(id)
	key := t.keyFor(msg, id)
	m.openReason.put(key, struct{}{})
	if !known {
		rec = t.openerOwner(msg, tag)
		m.ownReason.put(key, rec)
	}
	if msg != nil && msg.role == roleActivity {
		t.warn(WarnTargetActivity, "REASONING_MESSAGE_START names activity message "+quote(id)+"; ignored")
		return key, nil
	}
	if msg == nil {
		msg = &message{id: key, role: roleReasoning, hasContent: true, owner: t.internOwner(tag)}
		t.appendMessage(msg)
	}
	m.remember(laneReasoning, key, rec, msg) // its content events follow
	t.mergeInto(msg, meta)
	return key, nil
}

// reasoningEnd closes reasoning message id.
func (t *Thread) reasoningEnd(id string, tag owner, meta codec.Raw) *ProtocolError {
	if err := t.checkReasoningOpen(id, tag); err != nil {
		return err
	}
	t.m.dropHotID(id)
	t.m.openReason.del(id)
	t.mergeInto(t.textTarget(id), meta)
	return nil
}

func (t *Thread) checkReasoningOpen(id string, tag owner) *ProtocolError {
	if _, open := t.m.openReason.get(id); !open {
		if _, span := t.m.openSpan.get(id); span {
			return t.violation("S4", quote(id)+" is an open reasoning span, not an open reasoning message; spans open no message")
		}
		return t.violation("S1", "no open reasoning message "+quote(id)+"; start it with REASONING_MESSAGE_START first")
	}
	if rec, ok := t.m.ownReason.get(id); ok && !sameOwner(tag, rec) {
		return t.violation("A1", "continuation tagged "+tag.String()+" but reasoning message "+quote(id)+" is owned by "+rec.String())
	}
	return nil
}

// encryptedValue stores REASONING_ENCRYPTED_VALUE on the message or tool call
// it names (messages.md §2.6). Its tag is a continuation of that entity
// (A1). An unknown entity, or an activity message, is warned about and the
// value dropped (R1). The event's metadata merges nowhere.
func (t *Thread) encryptedValue(e *codec.Event) *ProtocolError {
	id, tag := e.EntityID, ownerOf(e)
	// The entity first: naming an unknown one (an activity message counts
	// as unknown, messages.md §2.6) warns and MUST NOT fail the run,
	// whatever the tag says; only a known entity has an owner to disagree
	// with.
	if e.Subtype == "tool-call" {
		c := t.calls.at(id)
		if c == nil {
			t.warn(WarnEncryptedUnknown, "REASONING_ENCRYPTED_VALUE names no known tool call "+quote(id)+"; value dropped")
			return nil
		}
		if rec, ok := t.m.ownTool.get(id); ok && !sameOwner(tag, rec) {
			return t.encryptedMismatch(e, tag, rec)
		}
		c.encrypted, c.hasEncrypted = retain(e.EncryptedValue), true
		c.encType, c.hasEncType = encTypeOf(e)
		t.j.replaced(c.msg)
		return nil
	}
	msg := t.byID.at(id)
	if msg == nil || msg.role == roleActivity {
		t.warn(WarnEncryptedUnknown, "REASONING_ENCRYPTED_VALUE names no known message "+quote(id)+"; value dropped")
		return nil
	}
	// The map of the message's role: a snapshot that re-typed it re-minted
	// its owner there (seedOwner), and another role's map may hold a span
	// or an earlier item of the same id.
	if rec, known := t.m.ownerBucket(msg.role).get(id); known && !sameOwner(tag, rec) {
		return t.encryptedMismatch(e, tag, rec)
	}
	msg.encrypted, msg.hasEncrypted = retain(e.EncryptedValue), true
	msg.encType, msg.hasEncType = encTypeOf(e)
	t.j.replaced(msg)
	return nil
}

func (t *Thread) encryptedMismatch(e *codec.Event, tag, rec owner) *ProtocolError {
	return t.violation("A1", "REASONING_ENCRYPTED_VALUE tagged "+tag.String()+" but "+e.Subtype+" "+quote(e.EntityID)+
		" is owned by "+rec.String())
}

// encTypeOf returns the event's AG-UI 1.1 encryptedValueType, which the
// codec keeps: it travels with the value it describes, and a later value
// without one replaces both.
func encTypeOf(e *codec.Event) (string, bool) {
	if e.Has(codec.FieldEncryptedValueType) {
		return retain(e.EncryptedValueType), true
	}
	return "", false
}
