package reducer

import (
	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/jsondoc"
)

// messagesSnapshot reconciles the view with MESSAGES_SNAPSHOT (messages.md
// §4): a known id is replaced wholesale in place; an unseen one is appended
// in snapshot order; a held message the snapshot omits is dropped, except
// activity (reasoning) messages while the snapshot carries no activity
// (reasoning) message. The event's metadata merges nowhere — including the
// reference's private "@ag-ui/client" convention, which is not protocol.
// Each snapshot message's subagentRunId becomes its owner, authoritatively,
// whatever role the id had before; a dropped message's owner is forgotten.
//
// Cost: O(messages in the view + messages in the snapshot), as any
// restatement must be.
func (t *Thread) messagesSnapshot(e *codec.Event) *ProtocolError {
	snap := make([]*message, len(e.Messages))
	byID := make(map[string]*message, len(e.Messages))
	hasAct, hasReas := false, false
	for i := range e.Messages {
		cm := &e.Messages[i]
		m := t.byID.at(cm.ID)
		if m == nil || !t.sameAsHeld(m, cm) {
			m = newMessage(cm)
		}
		snap[i] = m
		byID[m.id] = m // the last duplicate wins, as in the reference's Map
		switch m.role {
		case roleActivity:
			hasAct = true
		case roleReasoning:
			hasReas = true
		}
	}
	kept := make([]*message, 0, len(t.msgs)+len(snap))
	var placed map[*message]struct{} // only needed when the view holds duplicate ids
	var dropped []*message
	for _, m := range t.msgs {
		if s, ok := byID[m.id]; ok {
			if _, twice := placed[s]; twice {
				// The view held this id twice (a producer error); the
				// reference puts the same object in both places. Each
				// place gets its own copy here, so positions stay distinct.
				s = cloneMessage(s)
			}
			if placed == nil {
				placed = make(map[*message]struct{})
			}
			placed[s] = struct{}{}
			kept = append(kept, s)
		} else if m.role == roleActivity && !hasAct || m.role == roleReasoning && !hasReas {
			kept = append(kept, m)
		} else {
			dropped = append(dropped, m)
		}
	}
	seen := make(map[string]struct{}, len(kept))
	for _, m := range kept {
		seen[m.id] = struct{}{}
	}
	for _, s := range snap {
		if _, ok := seen[s.id]; !ok {
			kept = append(kept, s)
		}
	}
	clear(t.msgs) // drop references for the collector
	t.msgs = kept
	t.reindex()
	for _, m := range dropped {
		if t.byID.at(m.id) == nil {
			t.m.forget(m) // its calls' records go too: seedOwner below re-records any call a snapshot message holds
		}
	}
	for _, s := range snap {
		t.seedOwner(s, true)
	}
	t.j.structural()
	return nil
}

// sameAsHeld reports whether snapshot message cm restates held message m
// exactly (every field, in canonical form), so that the held message can be
// kept instead of rebuilt: a restatement of a long history then costs a
// comparison, not a copy. Any doubt (a different key order in metadata, say)
// answers false, which is always safe.
func (t *Thread) sameAsHeld(m *message, cm *codec.Message) bool {
	if m.role != parseRole(cm.Role) || m.id != cm.ID ||
		m.owner != (owner{cm.SubagentRunID, cm.Has(codec.MsgSubagentRunID)}) ||
		m.hasName != cm.Has(codec.MsgName) || m.name != cm.Name ||
		m.toolCallID != cm.ToolCallID || m.hasError != cm.Has(codec.MsgError) || m.errText != cm.Error ||
		m.activityType != cm.ActivityType ||
		m.hasEncrypted != cm.Has(codec.MsgEncryptedValue) || m.encrypted != cm.EncryptedValue ||
		m.hasEncType != cm.Has(codec.MsgEncryptedValueType) || m.encType != cm.EncryptedValueType ||
		m.hasContent != cm.Has(codec.MsgContent) || m.hasToolCalls != cm.Has(codec.MsgToolCalls) ||
		len(m.toolCalls) != len(cm.ToolCalls) {
		return false
	}
	if m.hasContent && !t.sameContent(m, cm.Content) {
		return false
	}
	if !t.sameJSON(m.meta, cm.Metadata, cm.Has(codec.MsgMetadata)) {
		return false
	}
	for i, c := range m.toolCalls {
		tc := &cm.ToolCalls[i]
		if c.id != tc.ID || c.name != tc.Name || string(c.args) != tc.Arguments ||
			c.hasEncrypted != tc.Has(codec.TCEncryptedValue) || c.encrypted != tc.EncryptedValue ||
			c.hasEncType != tc.Has(codec.TCEncryptedValueType) || c.encType != tc.EncryptedValueType ||
			!t.sameJSON(c.meta, tc.Metadata, tc.Has(codec.TCMetadata)) {
			return false
		}
	}
	return true
}

// sameContent compares a held content with a wire content value.
func (t *Thread) sameContent(m *message, raw codec.Raw) bool {
	switch {
	case m.doc != nil:
		return t.sameJSON(m.doc, raw, true)
	case m.raw != nil:
		return len(raw) > 0 && raw[0] != '"' && string(compactInto(t.scratch[:0], raw)) == string(m.raw)
	}
	if len(raw) == 0 || raw[0] != '"' {
		return false
	}
	t.scratch = codec.AppendUnquotedRaw(t.scratch[:0], raw)
	return string(t.scratch) == string(m.text)
}

// sameJSON compares a held document with a wire value (absent when !has).
func (t *Thread) sameJSON(d *jsondoc.Doc, raw codec.Raw, has bool) bool {
	if d == nil || !has {
		return d == nil && !has
	}
	t.scratch = d.AppendJSON(t.scratch[:0])
	n := len(t.scratch)
	t.scratch = compactInto(t.scratch, raw)
	return string(t.scratch[:n]) == string(t.scratch[n:])
}

// cloneMessage returns an independent copy of m (through its JSON form; used
// only for duplicate ids).
func cloneMessage(m *message) *message {
	b := append(appendMessage([]byte{'['}, m), ']')
	var dec codec.Decoder
	msgs, err := dec.DecodeMessages(b)
	if err != nil || len(msgs) != 1 {
		c := *m // cannot happen for a view message; share the values
		return &c
	}
	return newMessage(&msgs[0])
}
