package compact

// NOTE: structure of this file. A Compactor keeps a pending output window
// (entries) and, per item the window may still extend, the index of the
// entry later events can be folded into (heads). Add classifies one event:
// it either folds into a head, or is appended and becomes (or removes)
// heads. Explicit triads are candidates for becoming one chunk (active,
// triad), committed or aborted as later events arrive. Flush aborts
// what is undecided and finalises the window (emit). A light model of the
// input's chunk lanes (lanes) runs beside it, because whether an event may
// move depends on whether its lane has a chunk stream open. The rules, and
// why each is safe, are on Compactor. This file holds the window, the folds
// and the lane model; triad.go the triad-to-chunk conversion.

import (
	"errors"
	"strings"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/jsondoc"
	"github.com/threadcast/threadcast/reducer"
)

// Compactor shortens an AG-UI event stream without changing the view it
// produces: folding each Flush's output, in order, into a view gives the same
// messages, state, runs, steps, subagents, verdicts and warning count as
// folding the events given to Add, in order. Only the stream sequence and
// what a view never holds (timestamps, rawEvent of folded events, and the
// metadata of events that have no merge target) differ.
//
// What it does, within the window between two Flushes:
//
//   - Content deltas of one item (TEXT_MESSAGE_CONTENT, TOOL_CALL_ARGS,
//     REASONING_MESSAGE_CONTENT with the same id) are joined into the first
//     of them, even when other items' events sit in between; chunk continuations are joined into the chunk that opened
//     or last continued the same chunk stream, so a chunked item becomes one
//     event.
//   - A finished explicit triad (START, CONTENT*, END) becomes one *_CHUNK at
//     the START's place, carrying the opener's fields, the joined delta and
//     the merged metadata — when its lane is closed again inside the window
//     by an event the output keeps, and nothing before that could see the
//     chunk stream the output now has (see triad and watch);
//     otherwise it stays START, one CONTENT, END.
//   - State events are folded: a STATE_DELTA into the preceding STATE_SNAPSHOT
//     (applied with jsondoc) or STATE_DELTA (patches concatenated); a
//     STATE_SNAPSHOT replaces the preceding state event.
//   - Activity events are folded the same way per activity message: deltas
//     into a preceding replacing snapshot or delta, a replacing snapshot over
//     what precedes it.
//   - A step that starts and finishes inside the window (STEP_STARTED and
//     its STEP_FINISHED, same owner and name) vanishes: neither is emitted,
//     when the lane of each was quiet as it came (see below).
//
// Why it is safe. Add is told the verdict the reducer gave each event on the
// real view (clean: applied with no warning and no fatal error). Only clean
// events are folded, and only across clean events that commute with them:
//
//   - Merging two patches is atomic-unsafe in general (a failure would skip
//     both), but both patches are known to have applied, in this order, to
//     this state, so their concatenation applies to the same result.
//   - An event never moves across another event touching the same item
//     (same message, tool call, or the state), nor across RUN_STARTED,
//     RUN_FINISHED, RUN_ERROR, MESSAGES_SNAPSHOT or any event that was not
//     clean: those seal the window, and stay exactly where they were.
//   - Events closing a chunk lane (patterns.md §3.3) are folded away only
//     when that lane has no chunk stream open, so the closing was a no-op.
//     A folded event keeps the attribution of the event it folds into: on
//     a continuation or a state event the tag builds nothing (both were
//     clean, so each agreed with the owner), and the place where a lane
//     closes in the output stays where it was.
//   - A view holds only the steps still active (events.md, processing.md
//     §7.1), so a finished step leaves nothing in it. While it was active,
//     only a STEP_STARTED or STEP_FINISHED of the same owner and name
//     (L11, L12) or a RUN_FINISHED (L5) could have judged differently,
//     and none of them was clean in between: a clean STEP_FINISHED of it
//     is its own end, and RUN_FINISHED and unclean events seal the window,
//     which forgets the pending step. Its events close their lane, so the
//     pair vanishes only when neither closing did anything: no chunk
//     stream open there in the input, and no triad there waiting for a
//     closing to commit (laneQuiet).
//   - Metadata merges per key, last write wins, without recursion
//     (metadata.md §3), so merging the metadata of folded events in order
//     and then into the item gives the item the same metadata.
//
// A Compactor's output may only be followed by the output of the same
// Compactor: its model of the chunk lanes continues from one Flush to the
// next.
//
// A Compactor is not safe for concurrent use. Events given to Add are copied
// (the caller may reuse them once Add returns); the events Flush returns own
// their memory and are never touched by the Compactor again.
type Compactor struct {
	entries []entry
	heads   map[itemKey]int // item -> index into entries it may still fold into

	active []*triad // explicit triads that may still become one chunk

	steps map[stepKey]int // open step -> index of its STEP_STARTED entry, while the pair may still vanish

	lanes        map[string]*chunkStream // lane key (see laneOf) -> open chunk stream
	lanesUnknown bool                    // a non-clean event made the lane model unreliable
	serial       uint64                  // chunk stream counter
}

// itemKey names what an event builds: a message ('m'), a tool call ('t') or
// the state ('s').
type itemKey struct {
	kind byte
	id   string
}

var stateKey = itemKey{kind: 's'}

// stepKey names a step the way the reducer matches it: by owner (the
// event's lane) and name.
type stepKey struct {
	lane, name string
}

// chunkStream is the chunk stream a lane is assembling.
type chunkStream struct {
	kind   codec.Type // the *_CHUNK type
	id     string
	serial uint64
}

// entry is one pending output event and what has been folded into it.
type entry struct {
	ev     *codec.Event
	stream uint64 // chunk stream serial for chunk entries, 0 otherwise

	delta []byte          // joined deltas, once a second one arrived
	meta  *jsondoc.Doc    // merged metadata, once a second one arrived
	doc   *jsondoc.Doc    // folded state snapshot / activity content
	patch []codec.PatchOp // concatenated patch, once a second one arrived

	conv  *triad // on a *_START entry: the triad it may turn into a chunk
	endOf *triad // on an *_END entry: the triad that absorbed it

	vanished bool // a STEP_STARTED whose STEP_FINISHED came in the window: neither is emitted
}

// New returns an empty Compactor.
func New() *Compactor {
	return &Compactor{
		heads: make(map[itemKey]int),
		lanes: make(map[string]*chunkStream),
		steps: make(map[stepKey]int),
	}
}

// NewMidStream returns an empty Compactor for a stream that begins in the
// middle of a thread: the first event Added is not the thread's first, so
// chunk lanes may already be open. Until a clean run-level event resets
// them (as after an event that was not clean), every lane counts as
// possibly open, which disables every fold that would drop a lane closure.
// Use it for a segment of a thread's stream; New is for a stream from the
// thread's start, or one whose every earlier event a Compactor has seen.
func NewMidStream() *Compactor {
	c := New()
	c.lanesUnknown = true
	return c
}

// Events returns events compacted for a thread that starts empty (as
// reducer.NewThread makes it): folding the result into a new Thread gives the same
// view as folding events. To compact for another starting point, use
// EventsFrom. The returned events own their memory; events are only read.
func Events(events []*codec.Event) []*codec.Event {
	return EventsFrom(nil, events)
}

// EventsFrom is Events for a thread that starts from input (as Thread.SetInput
// sets it); nil means an empty thread. The compacted stream is equivalent to
// events for that starting point: whether a patch applies, or an event is
// rejected, depends on it.
func EventsFrom(input *codec.RunInput, events []*codec.Event) []*codec.Event {
	t := reducer.NewThread("compact")
	if input != nil {
		// SetInput fails only on state that is not JSON, which a decoded
		// RunInput never holds; the thread is then left as it was, which is
		// what the view would start from too.
		_ = t.SetInput(input)
	}
	c := New()
	for i, ev := range events {
		c.Add(ev, t.Apply(uint64(i)+1, ev))
	}
	return c.Flush(make([]*codec.Event, 0, len(events)/4+1))
}

// Add takes the next event of the stream and the Result the reducer gave it
// on the view the compacted output will be folded into (the pipeline passes
// what its reducer.Thread.Apply returned; Add reads res before returning, so the
// Thread's reuse of Result.Warnings on its next call does not matter). Only
// events applied cleanly — no warning, no fatal error — are folded. ev is
// copied; the caller may reuse it when Add returns. Events the caller does
// not hand to Apply (the codec dropped or rejected them) are not given to
// Add either, and do not appear in the output.
//
// An event the Thread refused as stale (reducer.ErrStaleSeq: a redelivery of an
// event already applied) is dropped: it changed nothing, and a consumer of
// the output, which has no sequence numbers, would apply it again.
func (c *Compactor) Add(ev *codec.Event, res reducer.Result) {
	if errors.Is(res.Fatal, reducer.ErrStaleSeq) {
		return
	}
	if res.Fatal != nil || len(res.Warnings) > 0 {
		c.barrier()
		c.appendEntry(ev, 0)
		if res.Fatal != nil || isChunk(ev.Type) {
			// What a refused event, or a chunk that warned, did to the
			// chunk lanes is not modelled; until a clean run-level event
			// resets them, every lane counts as possibly open, which
			// disables every fold that would drop a lane closure.
			c.lanesUnknown = true
			return
		}
		// A warned event was admitted, so it closed the lanes it closes
		// before its handler skipped it (patterns.md §3.3).
		c.closeLanesOf(ev)
		return
	}
	c.watch(ev)
	switch ev.Type {
	case codec.TypeRunStarted, codec.TypeRunFinished, codec.TypeRunError, codec.TypeMessagesSnapshot:
		c.closeAllLanes() // commits the triads that were only waiting for it
		c.barrier()
		c.appendEntry(ev, 0)

	case codec.TypeTextMessageContent, codec.TypeReasoningMessageContent:
		c.addContent(ev, itemKey{'m', ev.MessageID})
	case codec.TypeToolCallArgs:
		c.addContent(ev, itemKey{'t', ev.ToolCallID})

	case codec.TypeTextMessageStart:
		c.addStart(ev, itemKey{'m', ev.MessageID}, codec.TypeTextMessageContent, codec.TypeTextMessageEnd)
	case codec.TypeReasoningMessageStart:
		c.addStart(ev, itemKey{'m', ev.MessageID}, codec.TypeReasoningMessageContent, codec.TypeReasoningMessageEnd)
	case codec.TypeToolCallStart:
		// A TOOL_CALL_START may create or extend its parent message, but
		// only its toolCalls list, which no foldable event of that message
		// touches; so message heads survive it.
		c.addStart(ev, itemKey{'t', ev.ToolCallID}, codec.TypeToolCallArgs, codec.TypeToolCallEnd)
	case codec.TypeTextMessageEnd, codec.TypeReasoningMessageEnd:
		c.addEnd(ev, itemKey{'m', ev.MessageID})
	case codec.TypeToolCallEnd:
		c.addEnd(ev, itemKey{'t', ev.ToolCallID})
	case codec.TypeToolCallResult:
		c.drop(itemKey{'m', ev.MessageID})
		c.drop(itemKey{'t', ev.ToolCallID})
		c.closeLane(laneOf(ev))
		c.appendEntry(ev, 0)

	case codec.TypeStepStarted:
		c.addStepStarted(ev)
	case codec.TypeStepFinished:
		c.addStepFinished(ev)
	case codec.TypeReasoningStart, codec.TypeReasoningEnd, codec.TypeCustom:
		c.closeLane(laneOf(ev))
		c.appendEntry(ev, 0)
	case codec.TypeSubagentFinished, codec.TypeSubagentError:
		c.closeLane(laneKey(ev.SubagentRunID))
		c.appendEntry(ev, 0)
	case codec.TypeRaw, codec.TypeSubagentStarted, codec.TypeReasoningEncryptedValue:
		// Close nothing and build nothing a fold could reorder against:
		// an encrypted value sets a field no foldable event touches.
		c.appendEntry(ev, 0)

	case codec.TypeStateSnapshot, codec.TypeStateDelta:
		c.addState(ev)
	case codec.TypeActivitySnapshot, codec.TypeActivityDelta:
		c.addActivity(ev)

	case codec.TypeTextMessageChunk, codec.TypeReasoningMessageChunk:
		c.addChunk(ev, 'm', ev.MessageID)
	case codec.TypeToolCallChunk:
		c.addChunk(ev, 't', ev.ToolCallID)

	default:
		c.barrier()
		c.appendEntry(ev, 0)
	}
}

// Flush appends the compacted events of the window to dst and starts a new
// window. The events belong to the caller.
func (c *Compactor) Flush(dst []*codec.Event) []*codec.Event {
	// A triad whose chunk stream would outlive the window stays explicit:
	// the next window cannot know the stream is open.
	c.abortAll()
	for i := range c.entries {
		dst = c.entries[i].emit(dst)
		c.entries[i] = entry{}
	}
	c.entries = c.entries[:0]
	clear(c.heads)
	clear(c.steps)
	return dst
}

// Pending reports how many events the current window holds.
func (c *Compactor) Pending() int { return len(c.entries) }

// barrier seals the window: nothing after it folds into anything before it.
func (c *Compactor) barrier() {
	c.abortAll()
	clear(c.heads)
	clear(c.steps)
}

func (c *Compactor) drop(k itemKey) { delete(c.heads, k) }

func (c *Compactor) appendEntry(ev *codec.Event, stream uint64) int {
	c.entries = append(c.entries, entry{ev: ev.Clone(), stream: stream})
	return len(c.entries) - 1
}

// head returns the entry k may fold into, or nil.
func (c *Compactor) head(k itemKey) *entry {
	if i, ok := c.heads[k]; ok {
		return &c.entries[i]
	}
	return nil
}

func (c *Compactor) setHead(k itemKey, i int) {
	// Keys are stored with the entry's own (copied) id.
	c.heads[k] = i
}

// addContent handles an explicit content event of item k.
func (c *Compactor) addContent(ev *codec.Event, k itemKey) {
	lane := laneOf(ev)
	if h := c.head(k); h != nil && h.conv != nil {
		cv := h.conv
		if !cv.done() && !cv.ended && cv.contentType == ev.Type && !c.laneOpen(lane) {
			// Joined into the triad's content, which goes right after its
			// START (or into the chunk); the tag rule is the one below.
			if cv.content == nil {
				cv.content = &entry{ev: ev.Clone()}
			} else {
				cv.content.appendDelta(ev)
				cv.content.mergeMeta(ev)
			}
			return
		}
		c.abort(cv)
	}
	if h := c.head(k); h != nil && !c.laneOpen(lane) && h.ev.Type == ev.Type && h.stream == 0 {
		// The joined event keeps the head's attribution. Both were clean,
		// so each tag was absent or the item's owner, and a continuation's
		// tag builds nothing; ev's only other effect, closing its lane, was
		// a no-op (the lane is not open).
		h.appendDelta(ev)
		h.mergeMeta(ev)
		return
	}
	c.closeLane(lane)
	i := c.appendEntry(ev, 0)
	c.setHead(itemKey{k.kind, itemID(c.entries[i].ev, k.kind)}, i)
}

// addChunk handles a *_CHUNK event: it is resolved to its lane's stream the
// way chunk expansion does (patterns.md §3.4), and a continuation is folded
// into the entry that last extended the same stream.
func (c *Compactor) addChunk(ev *codec.Event, kind byte, id string) {
	if c.lanesUnknown {
		c.barrier()
		c.appendEntry(ev, 0)
		return
	}
	lane, s := c.resolveChunk(ev, id, namesItem(ev))
	if s != nil { // continuation
		if h := c.head(itemKey{kind, s.id}); h != nil && h.stream == s.serial {
			h.appendChunkDelta(ev)
			h.mergeMeta(ev)
			return
		}
		i := c.appendEntry(ev, s.serial)
		c.setHead(itemKey{kind, s.id}, i)
		return
	}
	// Opener: it closes whatever the lane had open and starts a stream.
	c.laneClosedInOutput(lane, itemKey{kind, id}, ev.Type)
	c.serial++
	i := c.appendEntry(ev, c.serial)
	owned := itemID(c.entries[i].ev, kind)
	c.lanes[lane] = &chunkStream{kind: ev.Type, id: owned, serial: c.serial}
	c.setHead(itemKey{kind, owned}, i)
}

// resolveChunk returns the lane a chunk belongs to and, when it continues
// that lane's open stream, the stream. It mirrors chunk expansion: a named
// id continues wherever it is open; a tag names its lane; an untagged
// id-less chunk continues the parent's stream of its kind, else the sole
// open stream of its kind.
func (c *Compactor) resolveChunk(ev *codec.Event, id string, hasID bool) (string, *chunkStream) {
	var lane string
	tagged := ev.Has(codec.FieldSubagentRunID)
	switch {
	case hasID: // a present id, "" included, names an item
		lane = laneOf(ev)
		for k, s := range c.lanes {
			if s.kind == ev.Type && s.id == id {
				lane = k
				break
			}
		}
	case tagged:
		lane = laneOf(ev)
	default:
		lane = parentLane
		if s := c.lanes[parentLane]; s == nil || s.kind != ev.Type {
			n := 0
			for k, s := range c.lanes {
				if s.kind == ev.Type {
					lane = k
					n++
				}
			}
			if n != 1 {
				lane = parentLane
			}
		}
	}
	if s := c.lanes[lane]; s != nil && s.kind == ev.Type && (!hasID || id == s.id) {
		return lane, s
	}
	return lane, nil
}

// addStepStarted keeps a STEP_STARTED. When its lane is quiet (closing it
// is a no-op in the input and in the output), the step may still vanish
// with its STEP_FINISHED (addStepFinished).
func (c *Compactor) addStepStarted(ev *codec.Event) {
	lane := laneOf(ev)
	if !c.laneQuiet(lane) {
		c.closeLane(lane)
		c.appendEntry(ev, 0)
		return
	}
	i := c.appendEntry(ev, 0)
	c.steps[stepKey{lane, c.entries[i].ev.StepName}] = i
}

// addStepFinished drops a finished step, STEP_STARTED and STEP_FINISHED
// both, when its STEP_STARTED is still pending in the window and neither
// closes anything; otherwise the STEP_FINISHED is kept, closing its lane.
func (c *Compactor) addStepFinished(ev *codec.Event) {
	lane := laneOf(ev)
	k := stepKey{lane, ev.StepName}
	i, pending := c.steps[k]
	delete(c.steps, k)
	if pending && c.laneQuiet(lane) {
		c.entries[i].vanished = true
		return
	}
	c.closeLane(lane)
	c.appendEntry(ev, 0)
}

// laneQuiet reports whether an event closing lane changes nothing: the
// input has no chunk stream open there, and no triad there waits for a
// closing to become a chunk (in the output, its stream would be open).
func (c *Compactor) laneQuiet(lane string) bool {
	if c.laneOpen(lane) {
		return false
	}
	for _, cv := range c.active {
		if cv.lane == lane && !cv.done() && !cv.laneClosed {
			return false
		}
	}
	return true
}

// addState folds STATE_SNAPSHOT and STATE_DELTA.
func (c *Compactor) addState(ev *codec.Event) {
	lane := laneOf(ev)
	if h := c.head(stateKey); h != nil && !c.laneOpen(lane) {
		// On state events the tag is provenance only (subagents.md §5):
		// its one effect is closing its lane, a no-op here. The head keeps
		// its own tag, so the lane closing at the head's place stays.
		if ev.Type == codec.TypeStateSnapshot {
			// The later snapshot makes whatever h built unobservable.
			hadTag, tag := h.ev.Has(codec.FieldSubagentRunID), h.ev.SubagentRunID
			h.replaceWith(ev)
			h.ev.Fields &^= codec.FieldSet(0).With(codec.FieldSubagentRunID)
			h.ev.SubagentRunID = ""
			if hadTag {
				h.ev.Fields = h.ev.Fields.With(codec.FieldSubagentRunID)
				h.ev.SubagentRunID = tag
			}
			return
		}
		switch h.ev.Type {
		case codec.TypeStateSnapshot:
			if h.applyToDoc(h.ev.Snapshot, ev.Patch, false) {
				h.mergeMeta(ev)
				return
			}
		case codec.TypeStateDelta:
			h.appendPatch(ev)
			h.mergeMeta(ev)
			return
		}
	}
	c.closeLane(lane)
	c.setHead(stateKey, c.appendEntry(ev, 0))
}

// addActivity folds ACTIVITY_SNAPSHOT and ACTIVITY_DELTA of one activity
// message. Neither closes a chunk lane.
func (c *Compactor) addActivity(ev *codec.Event) {
	k := itemKey{'m', ev.MessageID}
	replacing := ev.Type == codec.TypeActivityDelta || ev.Replace || !ev.Has(codec.FieldReplace)
	if !replacing {
		// replace:false leaves an existing activity alone but creates a
		// missing one; which of the two happened is not known here.
		c.drop(k)
		c.appendEntry(ev, 0)
		return
	}
	if h := c.head(k); h != nil {
		switch {
		case ev.Type == codec.TypeActivitySnapshot:
			// A replacing snapshot replaces content and type and re-mints
			// the owner; the metadata accumulated so far survives it.
			h.replaceWith(ev)
			return
		case h.ev.Type == codec.TypeActivitySnapshot:
			if h.applyToDoc(h.ev.Content, ev.Patch, true) {
				// ev's strings are the caller's to reuse (Add's contract):
				// what the entry keeps of them is copied.
				h.ev.ActivityType = strings.Clone(ev.ActivityType)
				h.mergeMeta(ev)
				return
			}
		case h.ev.Type == codec.TypeActivityDelta:
			h.appendPatch(ev)
			h.ev.ActivityType = strings.Clone(ev.ActivityType)
			if !h.ev.Has(codec.FieldSubagentRunID) && ev.Has(codec.FieldSubagentRunID) {
				// Both agreed with the owner (they were clean), so either
				// tag is the owner's.
				h.ev.SubagentRunID = strings.Clone(ev.SubagentRunID)
				h.ev.Fields = h.ev.Fields.With(codec.FieldSubagentRunID)
			}
			h.mergeMeta(ev)
			return
		}
	}
	i := c.appendEntry(ev, 0)
	c.setHead(itemKey{'m', c.entries[i].ev.MessageID}, i)
}

// Lanes.

const parentLane = ""

// laneOf is the lane an event's attribution names: the parent agent when it
// carries no subagentRunId.
func laneOf(ev *codec.Event) string {
	if !ev.Has(codec.FieldSubagentRunID) {
		return parentLane
	}
	return laneKey(ev.SubagentRunID)
}

// laneKey keeps a present-but-empty subagentRunId apart from the parent lane.
func laneKey(tag string) string { return "#" + tag }

func (c *Compactor) laneOpen(lane string) bool {
	return c.lanesUnknown || c.lanes[lane] != nil
}

// closeLane records that an event present in the output closes lane: in the
// model of the input's lanes, and for the triads whose chunk streams would
// be open there in the output. Only events certain to be emitted may call it.
func (c *Compactor) closeLane(lane string) {
	delete(c.lanes, lane)
	c.laneClosedInOutput(lane, itemKey{}, 0)
}

// laneClosedInOutput marks the triads of lane as closed in the output,
// except one whose item (key) and chunk kind match an opener's: a chunk
// naming the item its lane is assembling continues it instead of closing
// it, and the opener may itself become such a chunk.
func (c *Compactor) laneClosedInOutput(lane string, key itemKey, chunkType codec.Type) {
	for _, cv := range c.active {
		if cv.key == key && cv.chunkType == chunkType {
			continue
		}
		if cv.lane == lane && !cv.done() {
			cv.laneClosed = true
			if cv.ended {
				cv.committed = true
			}
		}
	}
	c.prune()
}

// closeLanesOf applies the lane closing of a non-chunk event (patterns.md
// §3.3) without folding anything.
func (c *Compactor) closeLanesOf(ev *codec.Event) {
	switch ev.Type {
	case codec.TypeRunStarted, codec.TypeRunFinished, codec.TypeRunError, codec.TypeMessagesSnapshot:
		c.closeAllLanes()
	case codec.TypeSubagentFinished, codec.TypeSubagentError:
		c.closeLane(laneKey(ev.SubagentRunID))
	case codec.TypeRaw, codec.TypeActivitySnapshot, codec.TypeActivityDelta,
		codec.TypeReasoningEncryptedValue, codec.TypeSubagentStarted, codec.TypeUnknown:
	default:
		c.closeLane(laneOf(ev))
	}
}

func isChunk(t codec.Type) bool {
	return t == codec.TypeTextMessageChunk || t == codec.TypeToolCallChunk || t == codec.TypeReasoningMessageChunk
}

func (c *Compactor) closeAllLanes() {
	clear(c.lanes)
	c.lanesUnknown = false
	for _, cv := range c.active {
		if !cv.done() {
			cv.laneClosed = true
			cv.committed = cv.ended
		}
	}
	c.prune()
}

func itemID(ev *codec.Event, kind byte) string {
	if kind == 't' {
		return ev.ToolCallID
	}
	return ev.MessageID
}

// Entries.

func (e *entry) appendDelta(ev *codec.Event) {
	if e.delta == nil {
		e.delta = append(make([]byte, 0, 2*(len(e.ev.Delta)+len(ev.Delta))), e.ev.Delta...)
	}
	e.delta = append(e.delta, ev.Delta...)
}

// appendChunkDelta joins a continuation chunk's delta. A chunk without delta
// adds no content (a metadata-only continuation yields an empty delta).
func (e *entry) appendChunkDelta(ev *codec.Event) {
	if !ev.Has(codec.FieldDelta) {
		return
	}
	if !e.ev.Has(codec.FieldDelta) {
		e.ev.Fields = e.ev.Fields.With(codec.FieldDelta)
	}
	e.appendDelta(ev)
}

// mergeMeta merges ev's metadata over the entry's, per key, last write wins.
func (e *entry) mergeMeta(ev *codec.Event) {
	if !ev.Has(codec.FieldMetadata) {
		return
	}
	if e.meta == nil {
		if !e.ev.Has(codec.FieldMetadata) {
			e.ev.Metadata = append(codec.Raw(nil), ev.Metadata...)
			e.ev.Fields = e.ev.Fields.With(codec.FieldMetadata)
			return
		}
		d, err := jsondoc.Parse(e.ev.Metadata)
		if err != nil {
			panic("reducer: compact: metadata the codec accepted does not parse: " + err.Error())
		}
		e.meta = d
	}
	if err := e.meta.MergeShallow(ev.Metadata); err != nil {
		panic("reducer: compact: metadata the codec accepted does not merge: " + err.Error())
	}
}

// applyToDoc applies a patch to the entry's folded document (started from
// base), reporting whether it applied. On failure nothing changed. object
// holds an activity's content to being an object, as the reducer does.
func (e *entry) applyToDoc(base codec.Raw, ops []codec.PatchOp, object bool) bool {
	if e.doc == nil {
		d, err := jsondoc.Parse(base)
		if err != nil {
			return false
		}
		e.doc = d
	}
	if object {
		return e.doc.ApplyObject(ops) == nil
	}
	return e.doc.Apply(ops) == nil
}

func (e *entry) appendPatch(ev *codec.Event) {
	if e.patch == nil {
		e.patch = append(make([]codec.PatchOp, 0, len(e.ev.Patch)+len(ev.Patch)), e.ev.Patch...)
	}
	for i := range ev.Patch {
		e.patch = append(e.patch, clonePatchOp(&ev.Patch[i]))
	}
}

// replaceWith makes the entry ev, keeping the metadata merged so far and
// merging ev's over it.
func (e *entry) replaceWith(ev *codec.Event) {
	old := e.finishMeta()
	oldHas := e.ev.Has(codec.FieldMetadata)
	*e = entry{ev: ev.Clone()}
	if !oldHas {
		return
	}
	newEv := e.ev
	newMeta, newHas := newEv.Metadata, newEv.Has(codec.FieldMetadata)
	newEv.Metadata = old
	newEv.Fields = newEv.Fields.With(codec.FieldMetadata)
	if newHas {
		e.mergeMeta(&codec.Event{Metadata: newMeta, Fields: codec.FieldSet(0).With(codec.FieldMetadata)})
	}
}

func (e *entry) finishMeta() codec.Raw {
	if e.meta != nil {
		return e.meta.AppendJSON(nil)
	}
	return e.ev.Metadata
}

// finish writes what was folded into the entry into its event.
func (e *entry) finish() *codec.Event {
	ev := e.ev
	if e.delta != nil {
		ev.Delta = string(e.delta)
	}
	if e.meta != nil {
		ev.Metadata = e.meta.AppendJSON(nil)
	}
	if e.doc != nil {
		switch ev.Type {
		case codec.TypeStateSnapshot:
			ev.Snapshot = e.doc.AppendJSON(nil)
		case codec.TypeActivitySnapshot:
			ev.Content = e.doc.AppendJSON(nil)
		}
	}
	if e.patch != nil {
		ev.Patch = e.patch
		raw := make(codec.Raw, 0, 64*len(e.patch))
		raw = append(raw, '[')
		for i := range e.patch {
			if i > 0 {
				raw = append(raw, ',')
			}
			raw = append(raw, e.patch[i].Raw...)
		}
		ev.PatchRaw = append(raw, ']')
	}
	return ev
}

// clonePatchOp copies one operation of an event's patch so that it outlives
// the event.
func clonePatchOp(op *codec.PatchOp) codec.PatchOp {
	c := *op
	c.Path = strings.Clone(op.Path)
	c.From = strings.Clone(op.From)
	c.Value = append(codec.Raw(nil), op.Value...)
	c.Raw = append(codec.Raw(nil), op.Raw...)
	return c
}
