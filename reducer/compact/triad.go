package compact

// The triad-to-chunk conversion of the Compactor (see compact.go): an
// explicit START, CONTENT*, END becomes one *_CHUNK when nothing in the
// stream can tell the two apart.

import "github.com/threadcast/threadcast/codec"

// triad is an explicitly streamed item (START, CONTENT*, END) on its
// way to becoming one *_CHUNK at the START's place. The chunk opens a chunk
// stream the original did not have, which stays open in the output until
// the next event there that closes its lane; the conversion is committed
// only once that happened inside the window and nothing in between could
// have seen the difference (see watch). Until then it can be aborted, and
// the item is emitted explicitly: START, the joined CONTENT right after it,
// the END where it was.
type triad struct {
	key                  itemKey
	lane                 string
	contentType, endType codec.Type
	chunkType            codec.Type // what the triad becomes
	start                *codec.Event
	content              *entry       // the joined CONTENT, nil if none
	end                  *codec.Event // the absorbed END
	ended, laneClosed    bool
	committed, aborted   bool
}

func (cv *triad) done() bool { return cv.committed || cv.aborted }

// addStart handles TEXT_MESSAGE_START, REASONING_MESSAGE_START and
// TOOL_CALL_START: the START is kept, and becomes the candidate for
// turning the whole triad into one chunk.
func (c *Compactor) addStart(ev *codec.Event, k itemKey, contentType, endType codec.Type) {
	c.drop(k)
	lane := laneOf(ev)
	delete(c.lanes, lane)
	c.laneClosedInOutput(startKey(ev))
	i := c.appendEntry(ev, 0)
	if c.lanesUnknown {
		return
	}
	start := c.entries[i].ev
	cv := &triad{
		key: itemKey{k.kind, itemID(start, k.kind)}, lane: lane,
		contentType: contentType, endType: endType, start: start, chunkType: chunkTypeOf(ev.Type),
	}
	c.entries[i].conv = cv
	c.active = append(c.active, cv)
	c.setHead(cv.key, i)
}

// addEnd handles the *_END of an explicit triad. When its triad is still a
// candidate and the END's lane has no chunk stream open (so the END closes
// nothing else), the triad absorbs it; the END stays in the window, to be
// emitted only if the conversion is aborted.
func (c *Compactor) addEnd(ev *codec.Event, k itemKey) {
	lane := laneOf(ev)
	if h := c.head(k); h != nil && h.conv != nil {
		cv := h.conv
		if !cv.done() && !cv.ended && cv.endType == ev.Type && !c.laneOpen(lane) {
			c.drop(k)
			// Not closeLane: the lane is not open in the input, and in the
			// output this END may disappear.
			i := c.appendEntry(ev, 0)
			c.entries[i].endOf = cv
			cv.end = c.entries[i].ev
			cv.ended = true
			if cv.laneClosed {
				cv.committed = true
				c.prune()
			}
			return
		}
		c.abort(cv)
	}
	c.drop(k)
	c.closeLane(lane)
	c.appendEntry(ev, 0)
}

// watch aborts the triads a clean event could tell apart from their chunk
// form: an event naming the item (other than its own CONTENT or END), and,
// while a triad's chunk stream is open in the output, an untagged id-less
// chunk (it continues "the sole open stream of its kind", and there would
// be one more).
func (c *Compactor) watch(ev *codec.Event) {
	if len(c.active) == 0 {
		return
	}
	switch ev.Type {
	case codec.TypeTextMessageStart, codec.TypeReasoningMessageStart, codec.TypeToolCallStart, codec.TypeToolCallResult:
		// These are always emitted and close their lane before they act
		// (patterns.md §3.3), so a triad waiting for that lane to close
		// is committed before the event can name it.
		c.laneClosedInOutput(startKey(ev))
	}
	if isChunk(ev.Type) && !ev.Has(codec.FieldSubagentRunID) && !namesItem(ev) {
		for _, cv := range c.active {
			if !cv.laneClosed {
				c.abort(cv)
			}
		}
	}
	itemsNamed(ev, func(k itemKey) {
		for _, cv := range c.active {
			if cv.key == k && ev.Type != cv.contentType && ev.Type != cv.endType {
				c.abort(cv)
			}
		}
	})
	c.prune()
}

func (c *Compactor) abort(cv *triad) {
	if cv.done() {
		return
	}
	cv.aborted = true
	if i, ok := c.heads[cv.key]; ok && c.entries[i].conv == cv {
		delete(c.heads, cv.key)
	}
}

func (c *Compactor) abortAll() {
	for _, cv := range c.active {
		c.abort(cv)
	}
	clear(c.active)
	c.active = c.active[:0]
}

// prune drops finished triads from the active list.
func (c *Compactor) prune() {
	n := 0
	for _, cv := range c.active {
		if !cv.done() {
			c.active[n] = cv
			n++
		}
	}
	clear(c.active[n:])
	c.active = c.active[:n]
}

// startKey is what an opener closes its lane with: the lane, and the item
// and chunk kind it may itself become (see laneClosedInOutput).
func startKey(ev *codec.Event) (string, itemKey, codec.Type) {
	switch ev.Type {
	case codec.TypeToolCallStart:
		return laneOf(ev), itemKey{'t', ev.ToolCallID}, codec.TypeToolCallChunk
	case codec.TypeTextMessageStart, codec.TypeReasoningMessageStart:
		return laneOf(ev), itemKey{'m', ev.MessageID}, chunkTypeOf(ev.Type)
	}
	return laneOf(ev), itemKey{}, 0
}

func chunkTypeOf(start codec.Type) codec.Type {
	switch start {
	case codec.TypeTextMessageStart:
		return codec.TypeTextMessageChunk
	case codec.TypeReasoningMessageStart:
		return codec.TypeReasoningMessageChunk
	case codec.TypeToolCallStart:
		return codec.TypeToolCallChunk
	}
	return 0
}

// namesItem reports whether a chunk names its item (an id that is
// present, even empty, names one; only absence means "continue").
func namesItem(ev *codec.Event) bool {
	if ev.Type == codec.TypeToolCallChunk {
		return ev.Has(codec.FieldToolCallID)
	}
	return ev.Has(codec.FieldMessageID)
}

// itemsNamed calls fn with every message and tool call an event names
// and could act on. REASONING_ENCRYPTED_VALUE is left out: it sets a field
// whether or not its item is open.
func itemsNamed(ev *codec.Event, fn func(itemKey)) {
	switch ev.Type {
	case codec.TypeTextMessageStart, codec.TypeTextMessageContent, codec.TypeTextMessageEnd, codec.TypeTextMessageChunk,
		codec.TypeReasoningMessageStart, codec.TypeReasoningMessageContent, codec.TypeReasoningMessageEnd,
		codec.TypeReasoningMessageChunk, codec.TypeActivitySnapshot, codec.TypeActivityDelta:
		if ev.Has(codec.FieldMessageID) {
			fn(itemKey{'m', ev.MessageID})
		}
	case codec.TypeToolCallStart, codec.TypeToolCallArgs, codec.TypeToolCallEnd, codec.TypeToolCallChunk:
		if ev.Has(codec.FieldToolCallID) {
			fn(itemKey{'t', ev.ToolCallID})
		}
		if ev.Type == codec.TypeToolCallStart || ev.Type == codec.TypeToolCallChunk {
			if ev.Has(codec.FieldParentMessageID) {
				fn(itemKey{'m', ev.ParentMessageID})
			} else if ev.Has(codec.FieldToolCallID) {
				fn(itemKey{'m', ev.ToolCallID}) // may create a message of that id
			}
		}
	case codec.TypeToolCallResult:
		fn(itemKey{'m', ev.MessageID})
		fn(itemKey{'t', ev.ToolCallID})
	}
}

// emit appends the entry's output events to dst: normally its one event; for
// a triad's START, the chunk it became or the START and its joined CONTENT;
// nothing for the END of a triad that became a chunk, or for a step that
// vanished.
func (e *entry) emit(dst []*codec.Event) []*codec.Event {
	switch {
	case e.vanished:
		return dst
	case e.endOf != nil:
		if e.endOf.committed {
			return dst
		}
		return append(dst, e.ev)
	case e.conv != nil && e.conv.committed:
		return append(dst, e.conv.chunk())
	case e.conv != nil:
		dst = append(dst, e.ev)
		if e.conv.content != nil {
			dst = append(dst, e.conv.content.finish())
		}
		return dst
	}
	return append(dst, e.finish())
}

// chunk builds the *_CHUNK equivalent to the whole triad: the opener's
// fields, the joined delta, and the metadata of START, CONTENTs and END
// merged in that order (a chunk's metadata applies to the START and the
// CONTENT it expands into; applying it twice changes nothing).
func (cv *triad) chunk() *codec.Event {
	st := cv.start
	ch := &codec.Event{SubagentRunID: st.SubagentRunID}
	set := func(f codec.Field) { ch.Fields = ch.Fields.With(f) }
	set(codec.FieldType)
	if st.Has(codec.FieldSubagentRunID) {
		set(codec.FieldSubagentRunID)
	}
	switch st.Type {
	case codec.TypeTextMessageStart:
		ch.Type = codec.TypeTextMessageChunk
		ch.MessageID = st.MessageID
		set(codec.FieldMessageID)
		if st.Has(codec.FieldRole) {
			ch.Role = st.Role
			set(codec.FieldRole)
		}
		if st.Has(codec.FieldName) {
			ch.Name = st.Name
			set(codec.FieldName)
		}
	case codec.TypeReasoningMessageStart:
		ch.Type = codec.TypeReasoningMessageChunk
		ch.MessageID = st.MessageID
		set(codec.FieldMessageID)
	case codec.TypeToolCallStart:
		ch.Type = codec.TypeToolCallChunk
		ch.ToolCallID, ch.ToolCallName = st.ToolCallID, st.ToolCallName
		set(codec.FieldToolCallID)
		set(codec.FieldToolCallName)
		if st.Has(codec.FieldParentMessageID) {
			ch.ParentMessageID = st.ParentMessageID
			set(codec.FieldParentMessageID)
		}
	}
	ch.TypeName = ch.Type.String()
	var content *codec.Event
	if cv.content != nil {
		content = cv.content.finish()
		ch.Delta = content.Delta
		set(codec.FieldDelta)
	}
	meta := entry{ev: &codec.Event{}}
	for _, ev := range []*codec.Event{st, content, cv.end} {
		if ev != nil {
			meta.mergeMeta(ev)
		}
	}
	if meta.ev.Has(codec.FieldMetadata) {
		ch.Metadata = meta.finishMeta()
		set(codec.FieldMetadata)
	}
	return ch
}
