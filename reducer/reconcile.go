package reducer

import "github.com/threadcast/threadcast/codec"

// messagesSnapshot reconciles the view with MESSAGES_SNAPSHOT (messages.md
// §4): a known id is replaced wholesale in place; an unseen one is appended
// in snapshot order; a held message the snapshot omits is dropped, except
// activity (reasoning) messages while the snapshot carries no activity
// (reasoning) message. The event's metadata merges nowhere — including the
// reference's private "@ag-ui/client" convention, which is not protocol.
// Each snapshot message's subagentRunId becomes its owner, authoritatively.
//
// Cost: O(messages in the view + messages in the snapshot), as any
// restatement must be.
func (t *Thread) messagesSnapshot(e *codec.Event) *ProtocolError {
	snap := make([]*message, len(e.Messages))
	byID := make(map[string]*message, len(e.Messages))
	hasAct, hasReas := false, false
	for i := range e.Messages {
		m := newMessage(&e.Messages[i])
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
	for _, m := range t.msgs {
		if s, ok := byID[m.id]; ok {
			kept = append(kept, s)
		} else if m.role == roleActivity && !hasAct || m.role == roleReasoning && !hasReas {
			kept = append(kept, m)
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
	for _, s := range snap {
		t.seedOwner(s, true)
	}
	t.j.structural()
	return nil
}
