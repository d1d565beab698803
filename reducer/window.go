package reducer

import "errors"

// NOTE: windows and pages, for threads too long to send whole. A window of
// n holds the newest n messages of the view; a page holds the messages
// before a given one. Both are ranges of t.msgs, found in O(1) (byID is a
// map once a thread holds more than a few messages, and a message knows its
// index), so their cost is that of encoding what they hold, never that of
// the thread:
//
//   - AppendWindowView: O(window + open items + state + held runs and
//     subagents).
//   - AppendWindowSnapshotEvents: the same, as AG-UI events.
//   - MessagePage + AppendMessageRange: O(page).
//
// A window is widened to reach back to the oldest message an open item of
// the active run lives in (an open text or reasoning message, the holder of
// an open tool call, the message of an open chunk lane), so that the live
// continuations of every open item find their message on the subscriber's
// side, as they do after AppendSnapshotEvents. Widening costs what the
// widened window holds: an item left open while many messages arrive after
// it makes the window that much longer.
//
// The runs and subagents of a windowed view are the newest n runs (at least
// the last one, which is the open one when a run is active) and the
// invocations announced in them.

// ErrNoMessage is returned by MessagePage when before names no message of
// the view.
var ErrNoMessage = errors.New("reducer: no message with that id")

// span says where a view document starts its messages, runs and subagents.
// The zero span is the whole view.
type span struct {
	msgs, runs, subs int
	windowed         bool
}

// WindowStart returns the index of the first message a window of the
// newest n messages holds (n < 0 counts as 0): max(0, MessageCount()-n),
// widened to the oldest message holding an open item (see the NOTE).
func (t *Thread) WindowStart(n int) int {
	from := max(0, len(t.msgs)-max(n, 0))
	if t.phase != phaseActive {
		return from
	}
	m := &t.m
	lower := func(msg *message) {
		if msg != nil && msg.idx < from {
			from = msg.idx
		}
	}
	for id := range m.openText.all() {
		lower(t.byID.at(id))
	}
	for id := range m.openReason.all() {
		lower(t.byID.at(id))
	}
	for id := range m.openTool.all() {
		if c := t.calls.at(id); c != nil {
			lower(c.msg)
		}
	}
	for i := range m.lanes {
		l := &m.lanes[i]
		if l.kind == laneTool {
			if c := t.calls.at(l.id); c != nil {
				lower(c.msg)
			}
			continue
		}
		lower(t.byID.at(l.id))
	}
	return from
}

// window returns the span of a window of the newest n messages.
func (t *Thread) window(n int) span {
	w := span{msgs: t.WindowStart(n), windowed: true}
	w.runs = max(0, len(t.runs)-max(n, 1))
	// Invocations are announced in run order: those of the held runs are a
	// suffix of t.subagents.
	w.subs = len(t.subagents)
	for w.subs > 0 && t.subagents[w.subs-1].run >= w.runs {
		w.subs--
	}
	return w
}

// AppendWindowView appends the view document of a window of the newest n
// messages: AppendView's document whose messages are those from
// WindowStart(n) on, whose runs are the newest n (at least one) and whose
// subagents are those announced in the runs held, with six more members
// saying what was left out:
//
//	messagesFrom   the index (in the whole view) of the first message held
//	messageCount   how many messages the whole view has
//	runsFrom, runCount, subagentsFrom, subagentCount   the same for runs
//	               and subagents
//
// The messages held are exactly the whole view's messages from messagesFrom
// on. Cost: O(what it holds), not O(thread).
func (t *Thread) AppendWindowView(dst []byte, n int) []byte {
	return t.appendView(dst, t.window(n))
}

// AppendWindowSnapshotEvents appends AppendSnapshotEvents' events for a
// window of the newest n messages: the same events, except that
// MESSAGES_SNAPSHOT holds only the messages from WindowStart(n) on. The
// live events after Seq() continue it as they continue the full snapshot:
// every message an open item lives in is held. Cost: O(window + open items
// + state).
func (t *Thread) AppendWindowSnapshotEvents(dst []byte, n int) []byte {
	return t.appendSnapshotEvents(dst, t.WindowStart(n))
}

// Page is a range of the view's messages: [First, End) of Total.
type Page struct {
	First, End, Total int
}

// MessagePage returns the range of the limit messages before the message
// whose id is before (the newest limit messages when before is ""), oldest
// first; limit < 0 counts as 0. It fails with ErrNoMessage when before names
// no message. When ids repeat (never in a conforming stream), before names
// the first message with that id. The next older page is the one before
// MessageID(p.First), when p.First > 0. Cost: O(1).
func (t *Thread) MessagePage(before string, limit int) (Page, error) {
	end := len(t.msgs)
	if before != "" {
		m, ok := t.byID.get(before)
		if !ok {
			return Page{}, ErrNoMessage
		}
		end = m.idx
	}
	return Page{First: max(0, end-max(limit, 0)), End: end, Total: len(t.msgs)}, nil
}

// AppendMessageRange appends the messages [from, to) as a JSON array of
// AG-UI messages (0 <= from <= to <= MessageCount()), exactly as they
// appear in AppendMessages. Cost: O(to - from).
func (t *Thread) AppendMessageRange(dst []byte, from, to int) []byte {
	return t.appendMessages(dst, t.msgs[from:to])
}

// MessageID returns the id of message i (0 <= i < MessageCount()).
func (t *Thread) MessageID(i int) string { return t.msgs[i].id }
