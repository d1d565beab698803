package export

// NOTE: how a thread's rows are derived. The thread's stored messages are
// folded in stream order exactly as ingest folds them (history.NextEvent
// cuts a message into events, the reducer applies them, FoldStored removes
// an event naming another thread, pipeline.RunSummarizer sums the runs).
// Runs are rows as they end. Messages and tool calls are rows once the
// fold reached the end of the range: their content is the view's, and
// their first/last seq and time come from the reducer's change journal,
// flushed after every event. A structural flush (a MESSAGES_SNAPSHOT, a
// tool result placed before later messages) says only "re-read the list";
// a message's encoding is then hashed and compared with its hash from
// before the event, taken just before an event of a type that can be
// structural (refresh), so that a restated message that did not change
// keeps its last seq.

import (
	"bytes"
	"encoding/json"
	"errors"
	"hash/maphash"
	"strings"
	"time"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/history"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/reducer"
)

// window is the inclusive range of stream sequences whose rows are
// exported.
type window struct{ from, to uint64 }

func (w window) has(seq uint64) bool { return seq >= w.from && seq <= w.to }

// track is what the journal told about one message or tool call.
type track struct {
	firstSeq, lastSeq uint64
	firstAt, lastAt   int64 // µs since the epoch
	run               string
	hash              uint64
	hashed            bool // hash is the encoding as of lastSeq
}

// threadFold folds one thread's events and derives its rows. It is used by
// one goroutine, for one thread.
type threadFold struct {
	tenant, id string
	win        window
	th         *reducer.Thread
	sum        pipeline.RunSummarizer
	dec        codec.Decoder
	ev         codec.Event
	run        string // the open run's id; "" when none is open
	msgs       map[string]*track
	calls      map[string]*track
	stale      bool // some message changed since its hash was taken
	seed       maphash.Seed
	buf        []byte
	runs       []RunRow
}

func newThreadFold(tenant, id string, win window) *threadFold {
	return &threadFold{
		tenant: tenant, id: id, win: win,
		th:   reducer.NewThread(id),
		msgs: map[string]*track{}, calls: map[string]*track{},
		seed: maphash.MakeSeed(),
	}
}

// apply folds one stored message (one event or several) with its stream
// seq and the time the stream stored it.
func (f *threadFold) apply(seq uint64, stored time.Time, data []byte) {
	for {
		line, rest, ok := history.NextEvent(data)
		if !ok {
			return
		}
		f.applyOne(seq, stored, line)
		data = rest
	}
}

func (f *threadFold) applyOne(seq uint64, stored time.Time, line []byte) {
	err := f.dec.Decode(line, &f.ev)
	warns := f.dec.Warnings()
	at := stored.UnixMicro()
	if err == nil {
		if f.ev.Has(codec.FieldTimestamp) && f.ev.Timestamp > 0 {
			at = f.ev.Timestamp * 1000
		}
		if mayRestructure(f.ev.Type) {
			f.refresh()
		}
		if history.OtherThread(&f.ev, f.id) != nil {
			history.FoldStored(f.th, f.id, seq, &f.ev, nil, warns)
			f.flush(seq, at)
			return
		}
	}
	res := f.th.ApplyDecoded(seq, &f.ev, err, warns)
	switch {
	case err != nil:
		var ce *codec.Error
		if !errors.As(err, &ce) || ce.Verdict == codec.Fatal {
			f.reject(seq, err, stored)
		}
		f.flush(seq, at)
	case res.Fatal != nil:
		if !errors.Is(res.Fatal, reducer.ErrStaleSeq) {
			f.reject(seq, res.Fatal, stored)
		}
		f.flush(seq, at)
	default:
		if f.ev.Type == codec.TypeRunStarted {
			f.run = strings.Clone(f.ev.RunID)
		}
		if f.ev.ToolCallID != "" && f.ev.Type != codec.TypeToolCallResult {
			// A result is an event of its tool message, not of the
			// call: rows() takes its seq from that message.
			f.touchCall(f.ev.ToolCallID, seq, at)
		}
		f.flush(seq, at)
		if s, ok := f.sum.Observe(seq, &f.ev, stored); ok {
			f.ended(s)
		}
	}
}

// mayRestructure reports whether an event of type t can change the message
// list structurally (reducer.Changes.Structural).
func mayRestructure(t codec.Type) bool {
	switch t {
	case codec.TypeMessagesSnapshot, codec.TypeToolCallResult, codec.TypeActivitySnapshot, codec.TypeRunStarted:
		return true
	}
	return false
}

func (f *threadFold) reject(seq uint64, err error, stored time.Time) {
	if s, ok := f.sum.Reject(seq, err.Error(), stored); ok {
		f.ended(s)
	}
}

// ended keeps the row of a run that ended inside the window.
func (f *threadFold) ended(s pipeline.RunSummary) {
	f.run = ""
	if !f.win.has(s.EndSeq) {
		return
	}
	f.runs = append(f.runs, runRow(f.tenant, f.id, &s))
}

func (f *threadFold) touchCall(id string, seq uint64, at int64) {
	c := f.calls[id]
	if c == nil {
		c = &track{firstSeq: seq, firstAt: at, run: f.run}
		f.calls[strings.Clone(id)] = c
	}
	c.lastSeq, c.lastAt = seq, at
}

// touch records that message i changed at seq.
func (f *threadFold) touch(i int, seq uint64, at int64) *track {
	id := f.th.MessageID(i) // the reducer's own copy: safe to keep
	m := f.msgs[id]
	if m == nil {
		m = &track{firstSeq: seq, firstAt: at, run: f.run}
		f.msgs[id] = m
	}
	m.lastSeq, m.lastAt, m.hashed = seq, at, false
	f.stale = true
	return m
}

// flush reads the reducer's journal after one event.
func (f *threadFold) flush(seq uint64, at int64) {
	c := f.th.Flush()
	if !c.Structural {
		for _, mc := range c.Messages {
			f.touch(mc.Index, seq, at)
		}
		return
	}
	for i := range f.th.MessageCount() {
		h := f.hash(i)
		m := f.msgs[f.th.MessageID(i)]
		if m == nil || !m.hashed || m.hash != h {
			// New, changed, or changed earlier and not hashed since
			// (an event mayRestructure did not expect): counted as
			// changed here, which can only move its last seq later.
			m = f.touch(i, seq, at)
		}
		m.hash, m.hashed = h, true
	}
	f.stale = false
}

// refresh hashes the messages that changed since their hash was taken, so
// that a structural flush can tell which ones the next event changed.
func (f *threadFold) refresh() {
	if !f.stale {
		return
	}
	for i := range f.th.MessageCount() {
		if m := f.msgs[f.th.MessageID(i)]; m != nil && !m.hashed {
			m.hash, m.hashed = f.hash(i), true
		}
	}
	f.stale = false
}

func (f *threadFold) hash(i int) uint64 {
	f.buf = f.th.AppendMessageAt(f.buf[:0], i)
	return maphash.Bytes(f.seed, f.buf)
}

// aguiMessage is the part of an AG-UI message (reducer.AppendMessageAt)
// the rows read.
type aguiMessage struct {
	ID           string          `json:"id"`
	Role         string          `json:"role"`
	Content      json.RawMessage `json:"content"`
	Name         *string         `json:"name"`
	ToolCallID   *string         `json:"toolCallId"`
	Error        *string         `json:"error"`
	ActivityType *string         `json:"activityType"`
	ToolCalls    []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"toolCalls"`
}

// rows returns the thread's message and tool call rows as the view stands
// now (the end of the range): those whose last change is in the window.
func (f *threadFold) rows() (msgs []MessageRow, calls []ToolCallRow, err error) {
	n := f.th.MessageCount()
	parsed := make([]aguiMessage, n)
	results := map[string]int{} // tool call id → index of the tool message answering it
	for i := range n {
		f.buf = f.th.AppendMessageAt(f.buf[:0], i)
		if err := json.Unmarshal(f.buf, &parsed[i]); err != nil {
			return nil, nil, err // the reducer's own encoding: a bug if it happens
		}
		if p := &parsed[i]; p.Role == "tool" && p.ToolCallID != nil {
			if _, dup := results[*p.ToolCallID]; !dup {
				results[*p.ToolCallID] = i
			}
		}
	}
	for i := range parsed {
		p := &parsed[i]
		m := f.msgs[p.ID]
		if m == nil { // every message went through the journal; keep the row anyway
			m = &track{}
		}
		if f.win.has(m.lastSeq) {
			msgs = append(msgs, f.messageRow(i, p, m))
		}
		for _, tc := range p.ToolCalls {
			c := f.calls[tc.ID]
			if c == nil { // known from a snapshot only: its message's seqs
				c = m
			}
			row := ToolCallRow{
				Tenant: f.tenant, ThreadID: f.id, ToolCallID: tc.ID, Name: tc.Function.Name,
				ParentMessageID: p.ID, RunID: optString(c.run), Arguments: tc.Function.Arguments,
				FirstSeq: int64(c.firstSeq), LastSeq: int64(c.lastSeq), FirstAt: c.firstAt, LastAt: c.lastAt,
			}
			if row.RunID == nil {
				row.RunID = optString(m.run)
			}
			last := c.lastSeq
			if j, ok := results[tc.ID]; ok {
				r := &parsed[j]
				text, raw := content(r.Content)
				if text == nil {
					text = raw
				}
				row.Result, row.ResultMessageID, row.ResultError = text, &r.ID, r.Error
				if rm := f.msgs[r.ID]; rm != nil && rm.lastSeq > last {
					last = rm.lastSeq
					row.LastSeq, row.LastAt = int64(rm.lastSeq), rm.lastAt
				}
			}
			if f.win.has(last) {
				calls = append(calls, row)
			}
		}
	}
	return msgs, calls, nil
}

func (f *threadFold) messageRow(i int, p *aguiMessage, m *track) MessageRow {
	text, raw := content(p.Content)
	return MessageRow{
		Tenant: f.tenant, ThreadID: f.id, MessageID: p.ID, Position: int64(i), Role: p.Role,
		Name: p.Name, RunID: optString(m.run), Content: text, ContentJSON: raw,
		ToolCallID: p.ToolCallID, ActivityType: p.ActivityType, Error: p.Error,
		FirstSeq: int64(m.firstSeq), LastSeq: int64(m.lastSeq), FirstAt: m.firstAt, LastAt: m.lastAt,
	}
}

// content splits a message's content: a string is text; anything else (an
// array of content parts, an activity's object) is JSON.
func content(raw json.RawMessage) (text, js *string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return &s, nil
		}
	}
	s := string(raw)
	return nil, &s
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// runRow maps a run summary to its row.
func runRow(tenant, thread string, s *pipeline.RunSummary) RunRow {
	r := RunRow{
		Tenant: tenant, ThreadID: thread, RunID: s.RunID,
		StartSeq: int64(s.StartSeq), EndSeq: int64(s.EndSeq),
		StartedAt: s.StartedAt * 1000, EndedAt: s.EndedAt * 1000, DurationMs: s.DurationMs,
		Outcome: s.Outcome, Error: optString(s.Error), Code: optString(s.Code),
		Events: int64(s.Events), Messages: int64(s.Messages), ToolCalls: int64(s.ToolCalls),
		Activities: int64(s.Activities), Reasoning: int64(s.Reasoning), Subagents: int64(s.Subagents),
	}
	for _, u := range s.Usage {
		r.InputTokens = addCount(r.InputTokens, u.InputTokens)
		r.OutputTokens = addCount(r.OutputTokens, u.OutputTokens)
		r.TotalTokens = addCount(r.TotalTokens, u.TotalTokens)
		r.ReasoningTokens = addCount(r.ReasoningTokens, u.ReasoningTokens)
		r.CachedInputTokens = addCount(r.CachedInputTokens, u.CachedInputTokens)
		r.CacheWriteInputTokens = addCount(r.CacheWriteInputTokens, u.CacheWriteInputTokens)
	}
	if len(s.Usage) > 0 {
		b, _ := json.Marshal(s.Usage) // strings and numbers: cannot fail
		u := string(b)
		r.Usage = &u
	}
	return r
}

// addCount adds a reported count to a sum; nil (not reported) leaves it.
func addCount(sum, n *int64) *int64 {
	if n == nil {
		return sum
	}
	v := *n
	if sum != nil {
		v += *sum
	}
	return &v
}
