package fanout

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/reducer"
	"github.com/threadcast/threadcast/reducer/compact"
)

// NOTE: semantic backpressure. A subscriber whose queued bytes pass
// HubConfig.CoalesceBytes (the high-water mark) has the frames it has not
// yet taken consolidated by meaning, for it alone, instead of waiting for
// them to overflow QueueBytes and be dropped:
//
//   - agui: the frames' events are compacted again, as one stream, with the
//     reducer's compaction rules (package reducer/compact): a message's or
//     tool call's deltas joined, finished triads turned into one chunk,
//     consecutive state and activity events folded. The compactor needs to
//     know which events applied cleanly to the view the client holds; the
//     feed learns that by folding the frames itself (verdicts, below).
//   - view: consecutive change documents are merged (mergeChanges), and a
//     document restating the whole view makes every one before it
//     redundant. For a windowed subscriber (window.go) the frames' own
//     documents are merged, and what the merge restates is windowed as
//     its frames' restatements are: a client that sets what is restated
//     and skips ops on messages it does not hold ends where it would have
//     from the frames one by one. Its window's merged documents are
//     unwindowed, so a restatement in them (the message list after a
//     structural change, the runs) is as large as in the frames: what
//     the queue counts (the windowed encoding) does not bound them, the
//     window's seal (below) does.
//
// The consolidated messages replace the frames' items in the subscriber's
// queue. Its SSE ids keep the resume cursor exact: the last message carries
// the seq of the last frame it covers ("id: <seq>"), the ones before it
// "id: <seq>.c", which is not a resumable cursor (ParseCursor), so a client
// cut off inside a consolidated batch gets a fresh snapshot, never a
// duplicate or a gap.
//
// An agui window keeps the frames it covers referenced (they are shared
// with the ring and every other subscriber) while it grows, so that the
// next consolidation compacts the whole backlog as one stream again; a view
// window keeps its merged documents, onto which the next frames merge
// (they hold parts of its frames, and so keep them). A window is
// consolidated again once the queue has grown by as much as it holds (the
// frames it covers, or its messages; at least CoalesceBytes), which keeps
// the work linear in the bytes queued, and whenever the queue would pass
// QueueBytes. An agui window whose frames hold more than maxPinned ×
// CoalesceBytes is sealed, and so is a windowed subscriber's view window
// whose documents do (unwindowed): it keeps its consolidated messages only,
// and the next window starts after it. (The documents of any other view
// window are what its messages encode, which QueueBytes bounds.) Only when
// the consolidated queue still exceeds QueueBytes is the subscriber
// resynchronised (ReasonOverflow), as without consolidation. A subscriber
// that passed the mark stays "slow" until a Take finds little queued: what
// it takes is consolidated first.
//
// Subscribers that keep up never reach the mark (unless one large frame
// puts them past it) and write the shared encodings (frame.enc):
// consolidation costs them a byte count. The feed's verdict fold (one
// decode and reducer step per event, per thread on this node, not per
// subscriber, and a reducer.Thread of the thread held) runs while
// coalescing is enabled and the feed has agui subscribers: a feed read
// only in view mode (a dashboard) pays nothing for it.

// maxPinned bounds what a window keeps for its next consolidation (an agui
// window's frames, a windowed subscriber's documents, which hold parts of
// its frames), in CoalesceBytes: a slow subscriber holds at most
// QueueBytes of wire messages and maxPinned × CoalesceBytes of frames
// (shared with the ring and the other subscribers while they have them).
// It also bounds one consolidation's work, done under the feed's lock
// (256 KiB of frames by default: a few milliseconds), so that the
// subscribers that keep up are not held up by it.
const maxPinned = 8

// coalesced is the consolidated part of a subscriber's queue: each of its
// items carries it. An agui window keeps the frames it covers, in order,
// to compact them again with the frames that follow, until sealed; a view
// window keeps its merged documents, which the next frames' merge onto
// (their encoding is what the queue counts), until sealed.
type coalesced struct {
	frames []*frame // agui: the frames it compacts
	raw    int      // agui: the sizes of its frames, summed
	docs   []viewDoc
	sealed bool
}

// viewDoc is one change document of a consolidated view-mode window: what
// a client folds into the view it holds at prev to reach seq.
type viewDoc struct {
	seq, prev uint64
	ch        *changeDoc
}

// Verdicts of one event on the view, as the feed's fold found them.
const (
	verdictClean uint8 = iota
	verdictWarned
	verdictFatal
)

// verdictFold follows a feed's frames with a reducer.Thread to learn each
// event's verdict (frame.verdicts) for agui consolidation. It starts from a
// whole snapshot's events (which restate the thread for a fresh consumer)
// and the ring frames after it, and stops at a gap or an event that does
// not decode, until the next whole snapshot.
type verdictFold struct {
	th  *reducer.Thread
	seq uint64 // the frame (or snapshot) it has folded up to
	n   uint64 // events applied (the reducer's seq)
	dec codec.Decoder
	ev  codec.Event
}

// errUndecodable stops a fold at an event the codec refuses.
var errUndecodable = errors.New("fanout: frame event does not decode")

// startVerdictsLocked starts the feed's verdict fold from sn (a whole
// snapshot) when none runs, coalescing is on, the feed has an agui
// subscriber (view-mode consolidation needs no verdicts) and the ring
// continues from sn. Called with f.mu held.
func (f *feed) startVerdictsLocked(sn *snapshot) {
	if f.vf != nil || sn == nil || sn.window != 0 || f.hub.cfg.CoalesceBytes <= 0 || f.aguiSubs == 0 || f.fitLocked(sn.seq) != fitOK {
		return
	}
	vf := &verdictFold{th: reducer.NewThread(f.key.token)}
	for _, raw := range sn.events {
		if _, err := vf.apply(raw); err != nil {
			return
		}
	}
	vf.seq = sn.seq
	f.vf = vf
	f.ring.each(func(fr *frame) {
		if fr.seq > sn.seq {
			f.followLocked(fr)
		}
	})
}

// followLocked folds fr into the verdict fold, recording fr.verdicts, or
// stops the fold when fr does not continue it. Called with f.mu held,
// before fr is delivered.
func (f *feed) followLocked(fr *frame) {
	vf := f.vf
	if vf == nil {
		return
	}
	if fr.seq <= vf.seq {
		return
	}
	if f.aguiSubs == 0 || !vf.follow(fr) {
		f.vf = nil
	}
}

// follow folds fr, which must continue what vf has folded, and records its
// verdicts; false when it does not continue it or an event does not
// decode (vf is then of no further use).
func (vf *verdictFold) follow(fr *frame) bool {
	if fr.prev != vf.seq {
		return false
	}
	lanes := vf.th.ChunkLanesOpen() > 0
	v := make([]uint8, len(fr.events))
	for i, raw := range fr.events {
		res, err := vf.apply(raw)
		if err != nil {
			return false
		}
		switch {
		case res.Fatal != nil:
			v[i] = verdictFatal
		case len(res.Warnings) > 0:
			v[i] = verdictWarned
		}
	}
	vf.seq = fr.seq
	fr.verdicts, fr.lanesOpen = v, lanes
	return true
}

func (vf *verdictFold) apply(raw []byte) (reducer.Result, error) {
	if err := vf.dec.Decode(raw, &vf.ev); err != nil {
		return reducer.Result{}, errUndecodable
	}
	vf.n++
	return vf.th.Apply(vf.n, &vf.ev), nil
}

// resultOf rebuilds what compact.Compactor.Add reads of a reducer.Result
// from a verdict.
func resultOf(v uint8) reducer.Result {
	switch v {
	case verdictFatal:
		return reducer.Result{Fatal: errVerdictFatal}
	case verdictWarned:
		return reducer.Result{Warnings: warnedOnce}
	}
	return reducer.Result{}
}

var (
	errVerdictFatal = errors.New("fanout: event refused by the reducer")
	warnedOnce      = []reducer.Warning{{Code: "warned"}}
)

// coalesceLocked consolidates the window of s's queue: the trailing items
// made of whole frames (and the previous consolidation, while unsealed).
// Called with feed.mu and s.mu held. It reports whether it consolidated.
func (s *subscriber) coalesceLocked() bool {
	if s.feed.hub.cfg.CoalesceBytes <= 0 {
		return false
	}
	q := s.queue
	k := len(q)
	agui := !s.variant.ViewMode()
	for k > 0 {
		it := q[k-1]
		if co := it.co; co != nil {
			if !co.sealed { // the previous window: consolidated again with what follows
				for k > 0 && q[k-1].co == co {
					k--
				}
			}
			break
		}
		if it.fr == nil || (agui && it.fr.verdicts == nil) {
			break
		}
		k--
	}
	if len(q)-k < 2 {
		return false
	}
	var (
		prior  *coalesced
		frames []*frame
		raw    int
	)
	for i := k; i < len(q); i++ {
		if co := q[i].co; co != nil {
			prior = co
			continue
		}
		if fr := q[i].fr; len(frames) == 0 || frames[len(frames)-1] != fr {
			frames = append(frames, fr)
			raw += fr.size
		}
	}
	co := &coalesced{}
	var msgs [][]byte
	var err error
	if agui {
		if prior != nil {
			frames = append(prior.frames[:len(prior.frames):len(prior.frames)], frames...)
			raw += prior.raw
		}
		co.frames, co.raw = frames, raw
		msgs, err = coalesceEvents(frames, s.variant)
		co.sealed = raw > maxPinned*s.feed.hub.cfg.CoalesceBytes
	} else {
		if prior != nil {
			co.docs = append(co.docs, prior.docs...)
		}
		co.docs, err = mergeFrames(co.docs, frames)
		var kept int
		msgs, kept = encodeDocs(co.docs, s.variant, s.window)
		// A windowed subscriber's documents are unwindowed: the queue,
		// which counts its messages, does not bound them.
		co.sealed = s.window > 0 && kept > maxPinned*s.feed.hub.cfg.CoalesceBytes
	}
	if err != nil {
		return false
	}
	before := 0
	for i := k; i < len(q); i++ {
		before += len(q[i].b)
	}
	after := 0
	for _, b := range msgs {
		after += len(b)
	}
	if co.sealed {
		co.frames, co.raw, co.docs = nil, 0, nil
	}
	ts := q[k].ts
	clear(q[k:])
	q = q[:k]
	for _, b := range msgs {
		q = append(q, item{b: b, ts: ts, co: co})
	}
	if len(msgs) == 0 {
		// Nothing to say (the frames changed nothing a client sees); the
		// cursor still moves. An SSE id-only block carries it; over
		// WebSocket there is no cursor.
		if b := idOnly(frames[len(frames)-1].seq, s.variant); b != nil {
			q = append(q, item{b: b, ts: ts, co: co})
			after += len(b)
		}
	}
	s.queue = q
	s.queued += after - before
	// Consolidated again once the queue has grown by as much as the
	// window holds (its frames, or its messages): linear work in the
	// bytes queued. Past QueueBytes it is consolidated in any case.
	s.nextCoalesce = s.queued + max(s.feed.hub.cfg.CoalesceBytes, co.raw, s.queued)
	m := s.feed.hub.m
	m.coalesced[s.variant].Inc()
	if before > after {
		m.coalescedSaved[s.variant].Add(float64(before - after))
	}
	return true
}

func idOnly(seq uint64, v Variant) []byte {
	if v != AguiSSE && v != ViewSSE {
		return nil
	}
	b := appendID(nil, seq, 0, 1)
	return append(b, '\n')
}

// coalesceEvents compacts the events of frames (consecutive, each with its
// verdicts) as one stream and encodes them for v.
func coalesceEvents(frames []*frame, v Variant) ([][]byte, error) {
	// A Compactor models the chunk lanes from the stream's start; this
	// stream starts where frames[0] does, with the lanes the fold found.
	c := compact.New()
	if frames[0].lanesOpen {
		c = compact.NewMidStream()
	}
	var dec codec.Decoder
	var ev codec.Event
	for _, fr := range frames {
		for i, raw := range fr.events {
			if err := dec.Decode(raw, &ev); err != nil {
				return nil, errUndecodable
			}
			c.Add(&ev, resultOf(fr.verdicts[i]))
		}
	}
	out := c.Flush(nil)
	seq := frames[len(frames)-1].seq
	if v == AguiWS {
		msgs := make([][]byte, len(out))
		for i, e := range out {
			msgs[i] = codec.AppendEvent(nil, e)
		}
		return msgs, nil
	}
	if len(out) == 0 {
		return nil, nil
	}
	var b, scratch []byte
	for i, e := range out {
		b = append(b, "id: "...)
		b = strconv.AppendUint(b, seq, 10)
		if i < len(out)-1 {
			b = append(b, ".c"...)
		}
		b = append(b, '\n')
		scratch = codec.AppendEvent(scratch[:0], e)
		b = appendData(b, scratch)
	}
	return [][]byte{b}, nil
}

// coalesceChanges merges the change documents of frames (consecutive) into
// as few as mergeChanges allows and encodes them for v.
func coalesceChanges(frames []*frame, v Variant) ([][]byte, error) {
	docs, err := mergeFrames(nil, frames)
	if err != nil {
		return nil, err
	}
	msgs, _ := encodeDocs(docs, v, 0)
	return msgs, nil
}

// mergeFrames merges the change documents of frames, which follow docs,
// into docs.
func mergeFrames(docs []viewDoc, frames []*frame) ([]viewDoc, error) {
	for _, fr := range frames {
		ch, err := parseChanges(fr.changes)
		if err != nil {
			return nil, err
		}
		if n := len(docs); n > 0 && ch != nil && ch.view != nil {
			// The whole view restated: every document before it is
			// redundant.
			docs = append(docs[:0], viewDoc{seq: fr.seq, prev: docs[0].prev, ch: ch})
			continue
		}
		if n := len(docs); n > 0 {
			if m, ok := mergeChanges(docs[n-1].ch, ch); ok {
				docs[n-1].ch, docs[n-1].seq = m, fr.seq
				continue
			}
		}
		docs = append(docs, viewDoc{seq: fr.seq, prev: fr.prev, ch: ch})
	}
	return docs, nil
}

// encodeDocs encodes docs for v, windowed to window (0: none) as a
// windowed subscriber's frames are (windowChanges). kept is the size of
// the documents unwindowed: what they hold.
func encodeDocs(docs []viewDoc, v Variant, window int) (msgs [][]byte, kept int) {
	msgs = make([][]byte, 0, len(docs))
	for _, d := range docs {
		ch := d.ch.encode()
		kept += len(ch)
		if window > 0 && isWide(ch) {
			ch = windowChanges(ch, window)
		}
		p := changesPayload(&frame{seq: d.seq, prev: d.prev, changes: ch})
		if v == ViewSSE {
			b := append([]byte("id: "), strconv.FormatUint(d.seq, 10)...)
			p = appendData(append(b, '\n'), p)
		}
		msgs = append(msgs, p)
	}
	return msgs, kept
}

// changeDoc is a frame's change document (pipeline appendChanges; the
// format is in fanout/README.md and web/static/viewdoc.js), its members
// kept as raw JSON. A nil *changeDoc is "changes":null (nothing changed).
type changeDoc struct {
	messages    []messageOp     // "messages", in order
	allMessages json.RawMessage // "allMessages": the whole list restated
	state       json.RawMessage // "state": the state replaced ("null" is a state)
	stateOps    []json.RawMessage
	view        json.RawMessage // "view": the whole view restated
	warnings    json.RawMessage
	// run is the view's run-level members restated by name ("status",
	// "runs", "steps", "subagents", "error", and a window's "runsFrom",
	// "runCount", "subagentsFrom", "subagentCount"): each replaces the
	// document's member of that name.
	run         map[string]json.RawMessage
	hasMessages bool
	hasStateOps bool
}

// messageOp is one entry of "messages". text is set (decoded) for an
// append; raw is the entry as sent otherwise. op is "append", "add" or
// "replace" (anything else: ""), id and message the message of an add or
// a replace.
type messageOp struct {
	index   int
	op      string
	text    *string
	id      string
	message json.RawMessage
	raw     json.RawMessage
}

var errUnknownChange = errors.New("fanout: change document member not understood")

// parseChanges parses a change document. A member it does not know makes
// it refuse (errUnknownChange): the frames are then left as they are.
func parseChanges(raw json.RawMessage) (*changeDoc, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	d := &changeDoc{}
	for k, v := range m {
		switch k {
		case "messages":
			var ops []json.RawMessage
			if err := json.Unmarshal(v, &ops); err != nil {
				return nil, err
			}
			d.hasMessages = true
			for _, o := range ops {
				var op struct {
					Index   int             `json:"index"`
					Op      string          `json:"op"`
					Text    *string         `json:"text"`
					Message json.RawMessage `json:"message"`
				}
				if err := json.Unmarshal(o, &op); err != nil {
					return nil, err
				}
				mo := messageOp{index: op.Index, raw: o}
				switch {
				case op.Op == "append" && op.Text != nil:
					mo.op, mo.text = op.Op, op.Text
				case (op.Op == "add" || op.Op == "replace") && len(op.Message) > 0:
					var id struct {
						ID *string `json:"id"`
					}
					if json.Unmarshal(op.Message, &id) == nil && id.ID != nil {
						mo.op, mo.id, mo.message = op.Op, *id.ID, op.Message
					}
				}
				d.messages = append(d.messages, mo)
			}
		case "allMessages":
			d.allMessages = v
		case "state":
			d.state = v
		case "stateOps":
			if err := json.Unmarshal(v, &d.stateOps); err != nil {
				return nil, err
			}
			d.hasStateOps = true
		case "view":
			d.view = v
		case "warnings":
			d.warnings = v
		default:
			if !slices.Contains(runMembers, k) {
				return nil, errUnknownChange
			}
			if d.run == nil {
				d.run = make(map[string]json.RawMessage, 5)
			}
			d.run[k] = v
		}
	}
	return d, nil
}

// mergeChanges returns one document that a client applying it gets the
// same view from as applying a and then b (the applier of viewdoc.js and
// loadtest/viewdoc.go: a "view" replaces the document and ignores the
// rest; otherwise "allMessages" replaces the list, then "messages" ops
// apply in order, then "state" replaces the state or "stateOps" patch it
// in order, then "warnings" and the run-level members are set), or false
// when it cannot:
//
//   - b restates the view: b alone (a is redundant);
//   - a restates the view, b does not: no (that needs the view applied);
//   - the list: b's "allMessages" replaces a's list and ops; otherwise a's
//     ops, then b's, folded where they name the same message
//     (addMessageOp); no when a restated the list and b has ops (the
//     applier ignores ops beside "allMessages");
//   - the state: b's "state" replaces a's state and ops; b's ops follow
//     a's ops; no when a replaced the state and b has ops;
//   - warnings: b's when it has them, else a's;
//   - run-level members: each of b's, else a's (they are set, not
//     applied, and nothing else reads them).
//
// a and b may be nil ("changes":null).
func mergeChanges(a, b *changeDoc) (*changeDoc, bool) {
	switch {
	case b == nil:
		return a, true
	case a == nil || b.view != nil:
		return b, true
	case a.view != nil:
		return nil, false
	case a.allMessages != nil && b.hasMessages:
		return nil, false
	case a.state != nil && b.hasStateOps:
		return nil, false
	}
	m := *a
	if b.allMessages != nil {
		m.allMessages, m.messages, m.hasMessages = b.allMessages, nil, false
	} else if b.hasMessages {
		m.hasMessages = true
		m.messages = append([]messageOp(nil), a.messages...)
		for _, op := range b.messages {
			m.messages = addMessageOp(m.messages, op)
		}
	}
	if b.state != nil {
		m.state, m.stateOps, m.hasStateOps = b.state, nil, false
	} else if b.hasStateOps {
		m.hasStateOps = true
		m.stateOps = append(append([]json.RawMessage(nil), a.stateOps...), b.stateOps...)
	}
	if b.warnings != nil {
		m.warnings = b.warnings
	}
	if b.run != nil {
		m.run = maps.Clone(a.run)
		if m.run == nil {
			m.run = make(map[string]json.RawMessage, len(b.run))
		}
		maps.Copy(m.run, b.run)
	}
	return &m, true
}

// addMessageOp appends op to ops, folded into the ops before it on the same
// message where a client applying the result gets the same list:
//
//   - an append right after an append to the same index: the texts add up;
//   - a replace after ops on its index that are appends and replaces of the
//     same message (same id): it alone (it sets the whole message; ops on
//     other indexes commute with it, and none changes the list's length
//     but an add, which never names an index before its own);
//   - the same after an add of that message: the add, with the replace's
//     message.
//
// Anything else is appended as it is.
func addMessageOp(ops []messageOp, op messageOp) []messageOp {
	if n := len(ops); n > 0 && op.op == "append" && ops[n-1].op == "append" && ops[n-1].index == op.index {
		t := *ops[n-1].text + *op.text
		ops[n-1] = messageOp{index: op.index, op: "append", text: &t}
		return ops
	}
	if op.op != "replace" {
		return append(ops, op)
	}
	add := -1
	for i, o := range ops {
		if o.index != op.index {
			continue
		}
		switch {
		case o.op == "append", o.op == "replace" && o.id == op.id:
		case o.op == "add" && o.id == op.id && add < 0:
			add = i
		default:
			return append(ops, op)
		}
	}
	out := ops[:0]
	for i, o := range ops {
		switch {
		case i == add:
			b := append([]byte(`{"index":`), strconv.Itoa(op.index)...)
			b = append(b, `,"op":"add","message":`...)
			b = append(append(b, op.message...), '}')
			out = append(out, messageOp{index: op.index, op: "add", id: op.id, message: op.message, raw: b})
		case o.index != op.index:
			out = append(out, o)
		}
	}
	if add < 0 {
		out = append(out, op)
	}
	return out
}

// encode writes d as a change document ("null" for nil).
func (d *changeDoc) encode() json.RawMessage {
	if d == nil {
		return json.RawMessage("null")
	}
	b := []byte{'{'}
	sep := func() {
		if len(b) > 1 {
			b = append(b, ',')
		}
	}
	member := func(name string, v []byte) {
		if v == nil {
			return
		}
		sep()
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":`...)
		b = append(b, v...)
	}
	member("allMessages", d.allMessages)
	if d.hasMessages {
		sep()
		b = append(b, `"messages":[`...)
		for i, op := range d.messages {
			if i > 0 {
				b = append(b, ',')
			}
			if op.raw != nil {
				b = append(b, op.raw...)
				continue
			}
			b = append(b, `{"index":`...)
			b = strconv.AppendInt(b, int64(op.index), 10)
			b = append(b, `,"op":"append","text":`...)
			b = appendJSONString(b, *op.text)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	member("state", d.state)
	if d.hasStateOps {
		sep()
		b = append(b, `"stateOps":[`...)
		for i, ops := range d.stateOps {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, ops...)
		}
		b = append(b, ']')
	}
	member("view", d.view)
	member("warnings", d.warnings)
	for _, k := range runMembers {
		member(k, d.run[k])
	}
	return append(b, '}')
}

// runMembers are the run-level members of a change document, in the order
// they are encoded.
var runMembers = []string{"status", "runs", "steps", "subagents", "error", "runsFrom", "runCount", "subagentsFrom", "subagentCount"}

// appendJSONString appends s as a JSON string, without HTML escaping.
func appendJSONString(b []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}
