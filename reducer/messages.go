package reducer

import (
	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/internal/jsonscan"
	"github.com/threadcast/threadcast/jsondoc"
)

// appendMessage adds m at the end of the conversation (the point of arrival,
// messages.md §2) and indexes it and its tool calls.
func (t *Thread) appendMessage(m *message) {
	m.idx = len(t.msgs)
	if t.msgs == nil {
		// A conversation grows message by message: skip the first doublings.
		t.msgs = make([]*message, 0, 16)
	}
	t.msgs = append(t.msgs, m)
	t.index(m)
	t.j.added(m)
}

// insertMessage puts m at position i, shifting the tail. The tail is short
// in practice (a tool result lands right after the call's message, near the
// end), so the cost does not grow with the thread.
func (t *Thread) insertMessage(i int, m *message) {
	if i >= len(t.msgs) {
		t.appendMessage(m)
		return
	}
	t.m.dropHot() // byID's first-wins choice may change
	t.msgs = append(t.msgs, nil)
	copy(t.msgs[i+1:], t.msgs[i:])
	t.msgs[i] = m
	for k := i; k < len(t.msgs); k++ {
		t.msgs[k].idx = k
	}
	t.index(m)
	t.j.structural()
}

// index records m (and its tool calls) in byID and calls unless an earlier
// message already holds the id: the first in order wins, like Array.find.
func (t *Thread) index(m *message) {
	if old, ok := t.byID.get(m.id); !ok || old.idx > m.idx {
		t.byID.put(m.id, m)
	}
	for _, c := range m.toolCalls {
		t.indexCall(c)
	}
}

func (t *Thread) indexCall(c *toolCall) {
	t.m.dropHotCall()
	if old, ok := t.calls.get(c.id); !ok || old.msg.idx > c.msg.idx {
		t.calls.put(c.id, c)
	}
}

// reindex rebuilds byID, calls and idx from msgs (after a MESSAGES_SNAPSHOT or
// a checkpoint load): O(messages).
func (t *Thread) reindex() {
	t.m.dropHot()
	t.byID.clear()
	t.calls.clear()
	for i, m := range t.msgs {
		m.idx = i
		if _, ok := t.byID.get(m.id); !ok {
			t.byID.put(m.id, m)
		}
		for _, c := range m.toolCalls {
			c.msg = m
			if _, ok := t.calls.get(c.id); !ok {
				t.calls.put(c.id, c)
			}
		}
	}
}

// internOwner returns a storable copy of o, sharing the string of the active
// invocation it names when there is one (so per-message owners cost nothing).
func (t *Thread) internOwner(o owner) owner {
	if !o.tagged {
		return owner{}
	}
	if inv, ok := t.m.active[o.id]; ok {
		return owner{inv.id, true}
	}
	return o.retained()
}

// mergeMeta merges an event's metadata into an item's (metadata.md §3): per
// key, last write wins, no recursion, nulls kept. raw is copied.
func mergeMeta(dst **jsondoc.Doc, raw codec.Raw) {
	if raw == nil {
		return
	}
	if *dst == nil {
		// The first metadata of an item is most often its only one. Merged
		// into nothing, an object whose names are distinct is itself, so
		// ParseDecoded (one copy, nothing split) yields the same JSON as
		// MergeShallow, which splits every member out: a third of the
		// allocations. Duplicate names must go through MergeShallow, which
		// keeps only the last value (as JSON.parse does).
		if distinctNames(raw) {
			if d, err := jsondoc.ParseDecoded(raw); err == nil {
				*dst = d
				return
			}
		}
		*dst = new(jsondoc.Doc)
	}
	// The codec guarantees an object; a failure would leave the item as it
	// was, which is the atomic outcome anyway.
	_ = (*dst).MergeShallowDecoded(raw)
}

// maxDistinctNames bounds distinctNames' quadratic comparison.
const maxDistinctNames = 8

// distinctNames reports whether raw is a JSON object of at most
// maxDistinctNames members whose names are pairwise distinct and hold no
// escapes (so that comparing their raw text decides equality). It answers
// false whenever it is unsure, including for text that is not valid JSON;
// false only costs the slower, always-correct path.
func distinctNames(raw []byte) bool {
	var names [maxDistinctNames][]byte
	n := 0
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return false
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return true
	}
	for i < len(raw) {
		if raw[i] != '"' || n == maxDistinctNames {
			return false
		}
		start := i + 1
		end := start
		for end < len(raw) && raw[end] != '"' {
			if raw[end] == '\\' {
				return false
			}
			end++
		}
		if end >= len(raw) {
			return false
		}
		name := raw[start:end]
		for _, prev := range names[:n] {
			if string(prev) == string(name) {
				return false
			}
		}
		names[n] = name
		n++
		i = skipSpace(raw, end+1)
		if i >= len(raw) || raw[i] != ':' {
			return false
		}
		if i = jsonscan.End(raw, skipSpace(raw, i+1)); i < 0 {
			return false
		}
		i = skipSpace(raw, i)
		if i >= len(raw) {
			return false
		}
		switch raw[i] {
		case '}':
			return true
		case ',':
			i = skipSpace(raw, i+1)
		default:
			return false
		}
	}
	return false
}

// skipSpace returns the index of the first non-whitespace byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// setContent stores a content value (a JSON string or a part array) from
// the wire into m.
func setContent(m *message, raw codec.Raw) {
	m.hasContent = true
	m.text, m.raw = nil, nil
	if len(raw) > 0 && raw[0] == '"' {
		m.text = codec.AppendUnquotedRaw(make([]byte, 0, len(raw)-2), raw)
		return
	}
	m.raw = retainJSON(raw)
}

// appendText appends a delta to a message's string content. Content that is
// absent or not a string becomes the delta alone, as in the reference
// ("existing content if it is a string, else empty").
func (t *Thread) appendText(m *message, delta string) {
	if !m.hasContent || m.raw != nil || m.doc != nil {
		m.hasContent, m.raw, m.doc, m.text = true, nil, nil, m.text[:0]
		t.j.replaced(m)
	}
	t.j.appended(m)
	m.text = appendDelta(m.text, delta)
}

// appendDelta appends a streamed delta to buf (message text, tool-call
// arguments). Both grow by many small deltas, so an empty buffer starts at
// a size that skips the first few doublings.
func appendDelta(buf []byte, delta string) []byte {
	if cap(buf) == 0 {
		buf = make([]byte, 0, max(64, len(delta)))
	}
	return append(buf, delta...)
}

// newMessage builds a message from a codec message (MESSAGES_SNAPSHOT, run
// input, RUN_STARTED.input), copying everything it keeps.
func newMessage(cm *codec.Message) *message {
	m := &message{id: retain(cm.ID), role: parseRole(cm.Role)}
	if cm.Has(codec.MsgContent) {
		if m.role == roleActivity {
			m.hasContent = true
			m.doc = parseOrNull(cm.Content)
		} else {
			setContent(m, cm.Content)
		}
	}
	if cm.Has(codec.MsgName) {
		m.name, m.hasName = retain(cm.Name), true
	}
	m.toolCallID = retain(cm.ToolCallID)
	if cm.Has(codec.MsgError) {
		m.errText, m.hasError = retain(cm.Error), true
	}
	m.activityType = retain(cm.ActivityType)
	if cm.Has(codec.MsgToolCalls) {
		m.hasToolCalls = true
		m.toolCalls = make([]*toolCall, len(cm.ToolCalls))
		for i := range cm.ToolCalls {
			tc := &cm.ToolCalls[i]
			c := &toolCall{id: retain(tc.ID), name: retain(tc.Name), args: []byte(tc.Arguments), msg: m}
			if tc.Has(codec.TCEncryptedValue) {
				c.encrypted, c.hasEncrypted = retain(tc.EncryptedValue), true
			}
			if tc.Has(codec.TCEncryptedValueType) {
				c.encType, c.hasEncType = retain(tc.EncryptedValueType), true
			}
			if tc.Has(codec.TCMetadata) {
				c.meta, _ = jsondoc.ParseDecoded(tc.Metadata)
			}
			m.toolCalls[i] = c
		}
	}
	if cm.Has(codec.MsgEncryptedValue) {
		m.encrypted, m.hasEncrypted = retain(cm.EncryptedValue), true
	}
	if cm.Has(codec.MsgEncryptedValueType) {
		m.encType, m.hasEncType = retain(cm.EncryptedValueType), true
	}
	if cm.Has(codec.MsgSubagentRunID) {
		m.owner = owner{retain(cm.SubagentRunID), true}
	}
	if cm.Has(codec.MsgMetadata) {
		m.meta, _ = jsondoc.ParseDecoded(cm.Metadata)
	}
	return m
}

// seedOwner records the owner a message brings (from a snapshot or an
// echoed input) in the run's owner maps: always when authoritative
// (MESSAGES_SNAPSHOT), only for unknown ids otherwise (RUN_STARTED.input).
//
// Only the message (and tool call) that events address under an id — the
// first in the view, where a producer sent duplicate ids — records its
// owner: another duplicate's owner would stand for a message no event can
// reach.
func (t *Thread) seedOwner(m *message, authoritative bool) {
	t.m.dropHot() // an owner may change under a cached item
	if bucket := t.m.ownerBucket(m.role); t.byID.at(m.id) == m {
		if authoritative {
			t.m.remint(bucket, m.id, m.owner)
		} else if !bucket.has(m.id) {
			bucket.put(m.id, m.owner)
		}
	}
	for _, c := range m.toolCalls {
		if t.calls.at(c.id) != c {
			continue
		}
		if _, ok := t.m.ownTool.get(c.id); authoritative || !ok {
			t.m.ownTool.put(c.id, m.owner)
		}
	}
}

// appendEchoed appends the messages of RUN_STARTED.input whose ids the view
// does not hold, in echo order (messages.md §3).
func (t *Thread) appendEchoed(ms []codec.Message) {
	for i := range ms {
		if _, ok := t.byID.get(ms[i].ID); ok {
			t.seedEchoedOwner(&ms[i])
			continue
		}
		m := newMessage(&ms[i])
		t.appendMessage(m)
		t.seedOwner(m, false)
	}
}

// seedEchoedOwner is seedOwner (not authoritative) for an echoed message the
// view already holds: only ids without a recorded owner are filled.
func (t *Thread) seedEchoedOwner(cm *codec.Message) {
	t.m.dropHot() // an owner may change under a cached item
	o := owner{}
	if cm.Has(codec.MsgSubagentRunID) {
		o = owner{cm.SubagentRunID, true}
	}
	bucket := t.m.ownerBucket(parseRole(cm.Role))
	if _, ok := bucket.get(cm.ID); !ok {
		bucket.put(retain(cm.ID), t.internOwner(o))
	}
	for i := range cm.ToolCalls {
		if _, ok := t.m.ownTool.get(cm.ToolCalls[i].ID); !ok {
			t.m.ownTool.put(retain(cm.ToolCalls[i].ID), t.internOwner(o))
		}
	}
}

// parseOrNull parses raw (validated by the codec) into a Doc; should it fail
// anyway, the value reads as null rather than leaving a nil Doc behind.
func parseOrNull(raw codec.Raw) *jsondoc.Doc {
	d, err := jsondoc.ParseDecoded(raw)
	if err != nil {
		return new(jsondoc.Doc)
	}
	return d
}
