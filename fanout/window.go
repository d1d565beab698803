package fanout

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// NOTE: windows in the fanout. A subscriber that joins with ?window=N gets
// the pipeline's windowed snapshot (the newest N messages, the state, the
// open run and its open items) at its join and at every resync; the frames
// after it are the thread's frames, shared with every other subscriber.
//
// In agui mode that is all: the live AG-UI events are the same for every
// joiner. In view mode, members of a frame's changes restate lists that
// grow with the thread (wire/frame.go): "allMessages" (after a structural
// change), "runs" and "subagents" (with the other run-level members, when
// runs, steps or subagents changed), and "view" (the whole view). Sent as
// they are, they would hand a windowed subscriber the whole thread. For a
// windowed view-mode subscriber they are windowed to N (windowChanges)
// once per frame and window, encoded once per variant, and shared:
//
//	"allMessages":[the newest N],"messagesFrom":i,"messageCount":n
//	"runs":[the newest N],"subagents":[theirs],"runsFrom":i,"runCount":n,
//	        "subagentsFrom":j,"subagentCount":m
//	"view":{the view with the newest N messages, the newest N runs and their
//	        subagents, and messagesFrom, messageCount, runsFrom, runCount,
//	        subagentsFrom, subagentCount}
//
// The "messages" ops keep the whole view's indexes; an op for an index below
// what a client holds is for a message it does not hold (it may skip it).
// A restated list from messagesFrom replaces what the client holds from
// there on; an "allMessages" one also makes what it holds before
// messagesFrom stale (a structural change may have moved or removed it), so
// the client drops it and reads older messages page by page again.

// wideKeys are the top-level members of a frame's changes that restate
// a growing list. A frame whose changes text contains neither is never windowed;
// a false positive (the name inside some nested object) costs only a parse.
var wideKeys = [][]byte{[]byte(`"allMessages":`), []byte(`"view":`), []byte(`"runs":`)}

func isWide(changes []byte) bool {
	for _, k := range wideKeys {
		if bytes.Contains(changes, k) {
			return true
		}
	}
	return false
}

// windowEnc is one cached windowed encoding of a frame, with the windowed
// changes it encodes (shared by the variants of one window: the parse of a
// whole view is the costly part).
type windowEnc struct {
	v       Variant
	window  int
	changes json.RawMessage
	enc     [][]byte
}

// maxWindowEncs bounds the windowed encodings cached on one frame; past it
// the oldest is replaced (a subscriber of another window re-encodes).
const maxWindowEncs = 4

// encoding returns fr's wire messages for a subscriber of variant v and
// window (0: none), encoding them on first use. Called with the feed's lock
// held (as enc is guarded).
func (fr *frame) encoding(v Variant, window int) [][]byte {
	if window > 0 && v.ViewMode() && fr.wide {
		for _, e := range fr.wenc {
			if e.v == v && e.window == window {
				return e.enc
			}
		}
		w := *fr
		w.changes = nil
		for _, e := range fr.wenc { // another variant's: the same changes
			if e.window == window {
				w.changes = e.changes
				break
			}
		}
		if w.changes == nil {
			w.changes = windowChanges(fr.changes, window)
		}
		enc := encodeFrame(&w, v)
		if len(fr.wenc) >= maxWindowEncs {
			copy(fr.wenc, fr.wenc[1:])
			fr.wenc = fr.wenc[:len(fr.wenc)-1]
		}
		fr.wenc = append(fr.wenc, windowEnc{v, window, w.changes, enc})
		return enc
	}
	enc := fr.enc[v]
	if enc == nil {
		enc = encodeFrame(fr, v)
		fr.enc[v] = enc
	}
	return enc
}

// dropEncodings forgets every cached encoding (trimIdle, and onMsg for a
// frame behind its ring's newest keepEncoded).
func (fr *frame) dropEncodings() {
	clear(fr.enc[:])
	fr.wenc = nil
}

// windowChanges returns changes with "allMessages", "runs" and
// "subagents", and "view" windowed to the newest n (see the NOTE), or
// changes itself when there is nothing to window or it cannot be parsed
// (the subscriber then gets what every other one does: never less than
// the truth).
func windowChanges(changes json.RawMessage, n int) json.RawMessage {
	var members map[string]json.RawMessage
	if json.Unmarshal(changes, &members) != nil {
		return changes
	}
	_, hasAll := members["allMessages"]
	view, hasView := members["view"]
	_, hasRuns := members["runs"]
	if !hasAll && !hasView && !hasRuns {
		return changes
	}
	if hasAll && !windowMessages(members, "allMessages", n) {
		return changes
	}
	if hasView {
		w, ok := windowView(view, n)
		if !ok {
			return changes
		}
		members["view"] = w
	}
	if hasRuns && !windowRuns(members, n) {
		return changes
	}
	b, err := marshalRaw(members)
	if err != nil {
		return changes
	}
	return b
}

// marshalRaw encodes members as a JSON object (sorted by name) without
// json.Marshal's HTML escaping, so the members' text stays as the pipeline
// wrote it.
func marshalRaw(members map[string]json.RawMessage) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(members); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// windowView windows a whole view document to the newest n messages, the
// newest n runs (at least one) and the subagents announced in them: the
// shape reducer.AppendWindowView gives, without its widening to open items
// (a view-mode client holds documents, not AG-UI item lifecycles). A view
// that is already windowed is returned as it is.
func windowView(view json.RawMessage, n int) (json.RawMessage, bool) {
	var doc map[string]json.RawMessage
	if json.Unmarshal(view, &doc) != nil {
		return nil, false
	}
	if _, done := doc["messagesFrom"]; done {
		return view, true
	}
	if !windowMessages(doc, "messages", n) || !windowRuns(doc, n) {
		return nil, false
	}
	b, err := marshalRaw(doc)
	return b, err == nil
}

// windowMessages windows the message list doc[key] to the newest n and
// adds messagesFrom and messageCount. It reports false when the list does
// not parse.
func windowMessages(doc map[string]json.RawMessage, key string, n int) bool {
	var msgs []json.RawMessage
	if json.Unmarshal(doc[key], &msgs) != nil {
		return false
	}
	from := max(0, len(msgs)-n)
	doc[key] = encodeArray(msgs[from:])
	doc["messagesFrom"] = json.RawMessage(strconv.Itoa(from))
	doc["messageCount"] = json.RawMessage(strconv.Itoa(len(msgs)))
	return true
}

// windowRuns windows the "runs" and "subagents" of doc (a view, or a
// change document restating them) to the newest n runs (at least one) and
// the subagents announced in them, and adds runsFrom, runCount,
// subagentsFrom and subagentCount. It reports false when they do not
// parse.
func windowRuns(doc map[string]json.RawMessage, n int) bool {
	var runs, subs []json.RawMessage
	if json.Unmarshal(doc["runs"], &runs) != nil || json.Unmarshal(doc["subagents"], &subs) != nil {
		return false
	}
	runsFrom := max(0, len(runs)-max(n, 1))
	held := make(map[string]bool, len(runs)-runsFrom)
	for _, r := range runs[runsFrom:] {
		var id struct {
			RunID string `json:"runId"`
		}
		_ = json.Unmarshal(r, &id)
		held[id.RunID] = true
	}
	subsFrom := len(subs)
	for subsFrom > 0 {
		var id struct {
			RunID string `json:"runId"`
		}
		_ = json.Unmarshal(subs[subsFrom-1], &id)
		if !held[id.RunID] {
			break
		}
		subsFrom--
	}
	doc["runs"] = encodeArray(runs[runsFrom:])
	doc["subagents"] = encodeArray(subs[subsFrom:])
	for k, v := range map[string]int{"runsFrom": runsFrom, "runCount": len(runs), "subagentsFrom": subsFrom, "subagentCount": len(subs)} {
		doc[k] = json.RawMessage(strconv.Itoa(v))
	}
	return true
}

func encodeArray(items []json.RawMessage) json.RawMessage {
	b := []byte{'['}
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, ']')
}
