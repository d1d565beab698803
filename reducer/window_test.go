package reducer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/threadcast/threadcast/codec"
)

// The windowed forms are checked against the whole ones, sliced: a window
// must be exactly a suffix of the full view's messages (and runs, and
// subagents), and its snapshot events exactly the full snapshot events with
// a suffix of the full MESSAGES_SNAPSHOT.

// checkWindow compares AppendWindowView and AppendWindowSnapshotEvents for a
// window of n against AppendView and AppendSnapshotEvents.
func checkWindow(t *testing.T, what string, thr *Thread, n int) {
	t.Helper()
	var full, win map[string]json.RawMessage
	mustUnmarshal(t, thr.AppendView(nil), &full)
	mustUnmarshal(t, thr.AppendWindowView(nil, n), &win)
	total := decodeArray(t, full["messages"])
	from := thr.WindowStart(n)
	if want := max(0, len(total)-max(n, 0)); from > want {
		t.Fatalf("%s: WindowStart(%d) = %d, after the newest %d (%d messages)", what, n, from, n, len(total))
	}
	checkSuffix(t, what+": messages", total, win["messages"], win["messagesFrom"], win["messageCount"], from)
	runs := decodeArray(t, full["runs"])
	runsFrom := intOf(t, win["runsFrom"])
	if len(runs) > 0 && runsFrom >= len(runs) {
		t.Fatalf("%s: the window holds no run of %d", what, len(runs))
	}
	if len(runs)-runsFrom > max(n, 1) {
		t.Fatalf("%s: %d runs held for a window of %d", what, len(runs)-runsFrom, n)
	}
	checkSuffix(t, what+": runs", runs, win["runs"], win["runsFrom"], win["runCount"], runsFrom)
	subs := decodeArray(t, full["subagents"])
	checkSuffix(t, what+": subagents", subs, win["subagents"], win["subagentsFrom"], win["subagentCount"], intOf(t, win["subagentsFrom"]))
	for k, v := range full {
		switch k {
		case "messages", "runs", "subagents":
			continue
		}
		if !bytes.Equal(v, win[k]) {
			t.Fatalf("%s: %s is %s in the window, %s in the view", what, k, win[k], v)
		}
	}
	if len(win) != len(full)+6 {
		t.Fatalf("%s: window view has %d members, the view %d (+6 expected)", what, len(win), len(full))
	}

	fullEv := splitJSONL(t, thr.AppendSnapshotEvents(nil))
	winEv := splitJSONL(t, thr.AppendWindowSnapshotEvents(nil, n))
	if len(fullEv) != len(winEv) {
		t.Fatalf("%s: %d windowed snapshot events, %d in the full snapshot", what, len(winEv), len(fullEv))
	}
	for i := range fullEv {
		if !bytes.HasPrefix(fullEv[i], []byte(`{"type":"MESSAGES_SNAPSHOT"`)) {
			if !bytes.Equal(fullEv[i], winEv[i]) {
				t.Fatalf("%s: snapshot event %d:\n got %s\nwant %s", what, i, winEv[i], fullEv[i])
			}
			continue
		}
		var fm, wm struct{ Messages []json.RawMessage }
		mustUnmarshal(t, fullEv[i], &fm)
		mustUnmarshal(t, winEv[i], &wm)
		if !equalRaw(fm.Messages[from:], wm.Messages) {
			t.Fatalf("%s: windowed MESSAGES_SNAPSHOT holds %d messages, not the full one's %d from %d", what, len(wm.Messages), len(fm.Messages), from)
		}
	}
	// A fresh consumer accepts the windowed snapshot as a stream prefix.
	joiner := NewThread(thr.ThreadID())
	r := &corpusRun{thread: joiner, fatalIdx: -1}
	feedRange(r, winEv, 0, len(winEv))
	if r.fatal != nil {
		t.Fatalf("%s: a fresh consumer rejects the windowed snapshot at event %d: %v", what, r.fatalIdx, r.fatal)
	}
	if got := decodeArray(t, joiner.AppendMessages(nil)); !equalRaw(got, total[from:]) {
		t.Fatalf("%s: a consumer of the windowed snapshot holds %d messages, want the %d from %d", what, len(got), len(total)-from, from)
	}
}

func checkSuffix(t *testing.T, what string, all []json.RawMessage, held, fromRaw, countRaw json.RawMessage, from int) {
	t.Helper()
	if got := intOf(t, fromRaw); got != from {
		t.Fatalf("%s: from is %d, want %d", what, got, from)
	}
	if got := intOf(t, countRaw); got != len(all) {
		t.Fatalf("%s: count is %d, want %d", what, got, len(all))
	}
	if got := decodeArray(t, held); !equalRaw(got, all[from:]) {
		t.Fatalf("%s: held %d, want the %d from %d", what, len(got), len(all)-from, from)
	}
}

func decodeArray(t *testing.T, raw json.RawMessage) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	mustUnmarshal(t, raw, &out)
	return out
}

func intOf(t *testing.T, raw json.RawMessage) int {
	t.Helper()
	var n int
	mustUnmarshal(t, raw, &n)
	return n
}

func equalRaw(a, b []json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// TestWindowCorpus checks every window size that matters (none, one, two,
// all but one, all, more) after every prefix of every corpus stream, so
// that windows are taken with items open at every point of the lifecycle.
func TestWindowCorpus(t *testing.T) {
	for _, s := range corpusStreams(t) {
		t.Run(strings.TrimSuffix(s.name, ".json"), func(t *testing.T) {
			for k := 0; k <= len(s.events); k++ {
				r := &corpusRun{thread: s.start(t), fatalIdx: -1, proto: s.proto}
				feedRange(r, s.events, 0, k)
				total := r.thread.MessageCount()
				for _, n := range []int{-1, 0, 1, 2, total - 1, total, total + 5} {
					checkWindow(t, fmt.Sprintf("after %d events, window %d", k, n), r.thread, n)
				}
				checkPages(t, fmt.Sprintf("after %d events", k), r.thread, 2)
			}
		})
	}
}

// checkPages walks the thread back page by page from the newest and checks
// that the pages, concatenated, are the view's messages.
func checkPages(t *testing.T, what string, thr *Thread, limit int) {
	t.Helper()
	all := decodeArray(t, thr.AppendMessages(nil))
	var got []json.RawMessage
	before := ""
	for pages := 0; ; pages++ {
		if pages > len(all)+1 {
			t.Fatalf("%s: paging does not end", what)
		}
		p, err := thr.MessagePage(before, limit)
		if err != nil {
			t.Fatalf("%s: MessagePage(%q): %v", what, before, err)
		}
		if p.Total != len(all) || p.End-p.First > limit || p.First < 0 || p.End < p.First {
			t.Fatalf("%s: page %+v of %d messages, limit %d", what, p, len(all), limit)
		}
		page := decodeArray(t, thr.AppendMessageRange(nil, p.First, p.End))
		if len(page) != p.End-p.First {
			t.Fatalf("%s: page %+v encodes %d messages", what, p, len(page))
		}
		got = append(page, got...)
		if p.First == 0 {
			break
		}
		before = thr.MessageID(p.First)
	}
	if !equalRaw(got, all) {
		t.Fatalf("%s: pages hold %d messages, the view %d (or they differ)", what, len(got), len(all))
	}
}

// longThread builds a thread of n text messages in runs of runLen, with a
// tool call (and its result) every 7th message and the last message left
// open when open is set.
func longEvents(n, runLen int, open bool) []json.RawMessage {
	var evs []json.RawMessage
	add := func(format string, args ...any) { evs = append(evs, json.RawMessage(fmt.Sprintf(format, args...))) }
	for i := 0; i < n; {
		run := i / runLen
		add(`{"type":"RUN_STARTED","threadId":"long","runId":"r%d"}`, run)
		for ; i < n && (i/runLen == run); i++ {
			if i%7 == 6 && i+1 < n {
				add(`{"type":"TOOL_CALL_START","toolCallId":"c%d","toolCallName":"search","parentMessageId":"m%d"}`, i, i)
				add(`{"type":"TOOL_CALL_ARGS","toolCallId":"c%d","delta":"{\"q\":%d}"}`, i, i)
				add(`{"type":"TOOL_CALL_END","toolCallId":"c%d"}`, i)
				i++
				add(`{"type":"TOOL_CALL_RESULT","messageId":"m%d","toolCallId":"c%d","content":"result %d"}`, i, i-1, i)
				continue
			}
			add(`{"type":"TEXT_MESSAGE_START","messageId":"m%d","role":"assistant"}`, i)
			add(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m%d","delta":"message number %d of the long thread"}`, i, i)
			if !(open && i == n-1) {
				add(`{"type":"TEXT_MESSAGE_END","messageId":"m%d"}`, i)
			}
		}
		if !(open && i == n) {
			add(`{"type":"RUN_FINISHED","threadId":"long","runId":"r%d"}`, run)
		}
	}
	return evs
}

func TestWindowLongThread(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		open bool
	}{{"finished", 10_000, false}, {"open", 10_000, true}} {
		t.Run(tc.name, func(t *testing.T) {
			thr := NewThread("long")
			r := feed(t, thr, longEvents(tc.n, 50, tc.open))
			if r.fatal != nil || len(r.warnText) > 0 {
				t.Fatalf("the generated thread is not clean: %v %v", r.fatal, r.warnText)
			}
			if thr.MessageCount() < tc.n {
				t.Fatalf("%d messages, want at least %d", thr.MessageCount(), tc.n)
			}
			for _, n := range []int{0, 1, 50, 1000} {
				checkWindow(t, fmt.Sprintf("window %d", n), thr, n)
			}
			checkPages(t, "pages of 100", thr, 100)
			checkPages(t, "pages of 997", thr, 997)
		})
	}
}

// TestWindowWidensToOpenItems: an item left open while newer messages
// arrive pulls the window back to its message, so that its live
// continuation finds it on the joiner's side.
func TestWindowWidensToOpenItems(t *testing.T) {
	evs := []json.RawMessage{
		json.RawMessage(`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`),
		json.RawMessage(`{"type":"TEXT_MESSAGE_START","messageId":"old","role":"assistant"}`),
		json.RawMessage(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"old","delta":"still streaming"}`),
	}
	for i := 0; i < 20; i++ {
		evs = append(evs, json.RawMessage(fmt.Sprintf(`{"type":"TOOL_CALL_START","toolCallId":"c%d","toolCallName":"f","parentMessageId":"p%d"}`, i, i)),
			json.RawMessage(fmt.Sprintf(`{"type":"TOOL_CALL_END","toolCallId":"c%d"}`, i)))
	}
	thr := NewThread("t")
	if r := feed(t, thr, evs); r.fatal != nil || len(r.warnText) > 0 {
		t.Fatalf("setup: %v %v", r.fatal, r.warnText)
	}
	if got := thr.WindowStart(3); got != 0 {
		t.Fatalf("WindowStart(3) = %d with message 0 open; want 0", got)
	}
	checkWindow(t, "open text", thr, 3)
	// The joiner continues the open message.
	ev := thr.AppendWindowSnapshotEvents(nil, 3)
	joiner := NewThread("t")
	raws := append(splitJSONL(t, ev), json.RawMessage(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"old","delta":", done"}`),
		json.RawMessage(`{"type":"TEXT_MESSAGE_END","messageId":"old"}`))
	if r := feed(t, joiner, raws); r.fatal != nil || len(r.warnText) > 0 {
		t.Fatalf("joiner: %v %v", r.fatal, r.warnText)
	}
	if !strings.Contains(string(joiner.AppendMessages(nil)), `"still streaming, done"`) {
		t.Fatalf("joiner did not continue the open message: %s", joiner.AppendMessages(nil))
	}

	// Closed, the window is the newest 3 again.
	end := []json.RawMessage{json.RawMessage(`{"type":"TEXT_MESSAGE_END","messageId":"old"}`)}
	feedFrom(t, thr, end, uint64(len(evs)+1))
	if got, want := thr.WindowStart(3), thr.MessageCount()-3; got != want {
		t.Fatalf("WindowStart(3) = %d after the message ended; want %d", got, want)
	}
}

func feedFrom(t *testing.T, thr *Thread, evs []json.RawMessage, seq uint64) {
	t.Helper()
	var dec codec.Decoder
	var ev codec.Event
	for i, raw := range evs {
		if err := dec.Decode(append([]byte(nil), raw...), &ev); err != nil {
			t.Fatal(err)
		}
		if res := thr.Apply(seq+uint64(i), &ev); res.Fatal != nil {
			t.Fatal(res.Fatal)
		}
	}
}

func TestMessagePageErrors(t *testing.T) {
	thr := NewThread("long")
	feed(t, thr, longEvents(30, 10, false))
	if _, err := thr.MessagePage("nope", 5); !errors.Is(err, ErrNoMessage) {
		t.Fatalf("MessagePage of an unknown id: %v, want ErrNoMessage", err)
	}
	for _, tc := range []struct {
		before string
		limit  int
		want   Page
	}{
		{"", 5, Page{25, 30, 30}},
		{"", 0, Page{30, 30, 30}},
		{"", -3, Page{30, 30, 30}},
		{"", 100, Page{0, 30, 30}},
		{"m0", 5, Page{0, 0, 30}},
		{"m10", 4, Page{6, 10, 30}},
		{"m2", 4, Page{0, 2, 30}},
	} {
		got, err := thr.MessagePage(tc.before, tc.limit)
		if err != nil || got != tc.want {
			t.Errorf("MessagePage(%q, %d) = %+v, %v; want %+v", tc.before, tc.limit, got, err, tc.want)
		}
	}
	if id := thr.MessageID(10); id != "m10" {
		t.Fatalf("MessageID(10) = %q", id)
	}
}
