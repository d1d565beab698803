package reducer

import (
	"encoding/json"
	"fmt"

	"github.com/threadcast/threadcast/codec"
)

// Checkpoints capture a whole Thread — the view and the protocol machine
// (open items, owners, lanes, steps, subagents, run state, seq) — so that
// LoadCheckpoint followed by the events after Seq() gives exactly the Thread
// that never stopped (DESIGN.md contract 2). The change journal is not
// captured: after a load, subscribers resynchronise from the view.
//
// Format (version 1): one JSON object. The messages are their AG-UI JSON
// (AppendMessages), read back through the codec, so a checkpoint is also a
// readable view; the machine is plain JSON. encoding/json is used for the
// machine part: checkpoints are written once per many events, and its cost
// is measured in BenchmarkCheckpoint.
const checkpointVersion = 1

type ckpt struct {
	V         int             `json:"v"`
	ThreadID  string          `json:"threadId"`
	Seq       uint64          `json:"seq"`
	Phase     uint8           `json:"phase"`
	Warnings  uint64          `json:"warnings"`
	Rejection string          `json:"rejection,omitempty"`
	Messages  json.RawMessage `json:"messages"`
	State     json.RawMessage `json:"state"`
	Runs      []ckRun         `json:"runs,omitempty"`
	Subagents []ckSub         `json:"subagents,omitempty"`
	Machine   ckMachine       `json:"machine"`
}

type ckOwner struct {
	ID     string `json:"i,omitempty"`
	Tagged bool   `json:"t,omitempty"`
}

type ckRun struct {
	ThreadID        string          `json:"threadId"`
	RunID           string          `json:"runId"`
	ParentRunID     *string         `json:"parentRunId,omitempty"`
	ProtocolVersion string          `json:"protocolVersion,omitempty"`
	Status          uint8           `json:"status"`
	Result          json.RawMessage `json:"result,omitempty"`
	Outcome         json.RawMessage `json:"outcome,omitempty"`
	Usage           json.RawMessage `json:"usage,omitempty"`
	Pending         json.RawMessage `json:"pending,omitempty"`
	ErrMessage      *string         `json:"errMessage,omitempty"`
	ErrCode         *string         `json:"errCode,omitempty"`
	Rejected        bool            `json:"rejected,omitempty"`
	RejectCode      string          `json:"rejectCode,omitempty"`
	RejectReason    string          `json:"rejectReason,omitempty"`
	Synthetic       bool            `json:"synthetic,omitempty"`
}

type ckSub struct {
	ID             string          `json:"id"`
	Name           string          `json:"name"`
	Description    *string         `json:"description,omitempty"`
	ParentSub      *string         `json:"parentSub,omitempty"`
	ParentToolCall *string         `json:"parentToolCall,omitempty"`
	ParentMessage  *string         `json:"parentMessage,omitempty"`
	Run            int             `json:"run"`
	Status         uint8           `json:"status"`
	Result         json.RawMessage `json:"result,omitempty"`
	Outcome        json.RawMessage `json:"outcome,omitempty"`
	ErrMessage     string          `json:"errMessage,omitempty"`
	ErrCode        *string         `json:"errCode,omitempty"`
}

type ckMachine struct {
	OpenText    []string           `json:"openText,omitempty"`
	OpenTool    []string           `json:"openTool,omitempty"`
	OpenSpan    []string           `json:"openSpan,omitempty"`
	OpenReason  []string           `json:"openReason,omitempty"`
	OwnText     map[string]ckOwner `json:"ownText,omitempty"`
	OwnTool     map[string]ckOwner `json:"ownTool,omitempty"`
	OwnActivity map[string]ckOwner `json:"ownActivity,omitempty"`
	OwnReason   map[string]ckOwner `json:"ownReason,omitempty"`
	// OwnSpan: absent in checkpoints written before spans had their own
	// map, whose ownReason held span owners too (see load).
	OwnSpan   map[string]ckOwner `json:"ownSpan,omitempty"`
	Steps     []ckStep           `json:"steps,omitempty"`
	Active    []int              `json:"active,omitempty"` // indices into Subagents
	Closed    []string           `json:"closed,omitempty"`
	Lanes     []ckLane           `json:"lanes,omitempty"`
	Calls     []string           `json:"calls,omitempty"` // tool calls started this run, in order
	Answered  []string           `json:"answered,omitempty"`
	ThinkSpan string             `json:"thinkSpan,omitempty"` // ids minted for open retired THINKING items
	ThinkMsg  string             `json:"thinkMsg,omitempty"`
	Minted    uint64             `json:"minted,omitempty"`
}

type ckStep struct {
	Owner ckOwner `json:"o"`
	Name  string  `json:"n"`
}

type ckLane struct {
	Owner  ckOwner `json:"o"`
	Kind   uint8   `json:"k"`
	ID     string  `json:"id"`
	Tag    ckOwner `json:"tag"`
	Role   string  `json:"role,omitempty"`
	Name   *string `json:"name,omitempty"`
	Parent *string `json:"parent,omitempty"`
}

// AppendCheckpoint appends a versioned checkpoint of the whole Thread to dst.
// The bytes belong to the caller.
func (t *Thread) AppendCheckpoint(dst []byte) []byte {
	c := ckpt{
		V: checkpointVersion, ThreadID: t.threadID, Seq: t.seq, Phase: uint8(t.phase),
		Warnings: t.warnings, Rejection: t.rejection,
		Machine: t.m.checkpoint(t.subagents),
	}
	for _, r := range t.runs {
		c.Runs = append(c.Runs, ckRun{
			ThreadID: r.threadID, RunID: r.runID, ParentRunID: optStr(r.parentRunID, r.hasParent),
			ProtocolVersion: r.protocolVersion, Status: uint8(r.status),
			Result: r.result, Outcome: r.outcome, Usage: r.usage, Pending: r.pending,
			ErrMessage: optStr(r.errMessage, r.hasError), ErrCode: optStr(r.errCode, r.hasCode),
			Rejected: r.rejected, RejectCode: r.rejectCode, RejectReason: r.rejectReason, Synthetic: r.synthetic,
		})
	}
	for _, s := range t.subagents {
		c.Subagents = append(c.Subagents, ckSub{
			ID: s.id, Name: s.name, Description: optStr(s.description, s.hasDescription),
			ParentSub: optStr(s.parentSub, s.hasParentSub), ParentToolCall: optStr(s.parentToolCall, s.hasParentToolCall),
			ParentMessage: optStr(s.parentMessage, s.hasParentMessage), Run: s.run, Status: uint8(s.status),
			Result: s.result, Outcome: s.outcome, ErrMessage: s.errMessage, ErrCode: optStr(s.errCode, s.hasCode),
		})
	}
	_ = c.mapStrings(ckEscape) // escaping fails never
	// The messages and the state, nearly all of a checkpoint, are JSON the
	// reducer writes itself: they are written straight into dst rather than
	// handed to encoding/json, which would scan and compact every byte of
	// them again (RawMessage), and rather than built apart and copied. The
	// rest goes through Marshal. Key order is free.
	type plain ckpt
	tail, err := json.Marshal(&struct {
		*plain
		// Shallower than plain's fields of the same names, so they win:
		// empty, omitted.
		Messages json.RawMessage `json:"messages,omitempty"`
		State    json.RawMessage `json:"state,omitempty"`
	}{plain: (*plain)(&c)})
	if err != nil || len(tail) < 2 || tail[0] != '{' {
		// Every member is valid JSON by construction; this is a bug.
		panic(fmt.Sprintf("reducer: BUG: checkpoint encoding: %v", err))
	}
	dst = t.AppendMessages(append(dst, `{"messages":`...))
	dst = t.state.AppendJSON(append(dst, `,"state":`...))
	dst = append(dst, ',')
	return append(dst, tail[1:]...)
}

func (m *machine) checkpoint(subs []*invocation) ckMachine {
	c := ckMachine{
		OpenText: sortedKeys(&m.openText), OpenTool: sortedKeys(&m.openTool), OpenSpan: sortedKeys(&m.openSpan), OpenReason: sortedKeys(&m.openReason),
		OwnText: owners(&m.ownText), OwnTool: owners(&m.ownTool), OwnActivity: owners(&m.ownActivity), OwnReason: owners(&m.ownReason), OwnSpan: owners(&m.ownSpan),
		Closed: sortedKeys(&m.closed), Calls: m.calls, Answered: sortedKeys(&m.answered),
		ThinkSpan: m.thinkSpan, ThinkMsg: m.thinkMsg, Minted: m.minted,
	}
	for _, s := range m.steps {
		c.Steps = append(c.Steps, ckStep{Owner: toCk(s.owner), Name: s.name})
	}
	for i, s := range subs {
		if m.active[s.id] == s {
			c.Active = append(c.Active, i)
		}
	}
	for _, l := range m.lanes {
		c.Lanes = append(c.Lanes, ckLane{Owner: toCk(l.owner), Kind: uint8(l.kind), ID: l.id, Tag: toCk(l.tag),
			Role: l.role, Name: optStr(l.name, l.hasName), Parent: optStr(l.parent, l.hasParent)})
	}
	return c
}

func optStr(s string, has bool) *string {
	if !has {
		return nil
	}
	return &s
}

func owners(m *idMap[owner]) map[string]ckOwner {
	out := make(map[string]ckOwner, m.len())
	for k, o := range m.all() {
		out[k] = toCk(o)
	}
	return out
}

// LoadCheckpoint rebuilds a Thread from AppendCheckpoint's output. data is
// not retained. Errors wrap ErrCheckpoint.
func LoadCheckpoint(data []byte) (*Thread, error) {
	var c ckpt
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCheckpoint, err)
	}
	if c.V != checkpointVersion {
		return nil, fmt.Errorf("%w: version %d, this build reads %d", ErrCheckpoint, c.V, checkpointVersion)
	}
	if err := c.mapStrings(ckUnescape); err != nil {
		return nil, err
	}
	if c.Phase > uint8(phaseRejected) {
		return nil, fmt.Errorf("%w: phase %d", ErrCheckpoint, c.Phase)
	}
	t := NewThread(c.ThreadID)
	t.seq, t.phase, t.warnings, t.rejection = c.Seq, phase(c.Phase), c.Warnings, c.Rejection
	var dec codec.Decoder
	msgs, err := dec.DecodeMessages(c.Messages)
	if err != nil {
		return nil, fmt.Errorf("%w: messages: %v", ErrCheckpoint, err)
	}
	for i := range msgs {
		t.msgs = append(t.msgs, newMessage(&msgs[i]))
	}
	t.reindex()
	t.j.memAll = true
	if err := t.state.Set(c.State); err != nil {
		return nil, fmt.Errorf("%w: state: %v", ErrCheckpoint, err)
	}
	if err := t.loadRuns(&c); err != nil {
		return nil, err
	}
	if err := t.m.load(&c.Machine, t.subagents); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Thread) loadRuns(c *ckpt) error {
	for _, r := range c.Runs {
		if r.Status > uint8(runError) {
			return fmt.Errorf("%w: run status %d", ErrCheckpoint, r.Status)
		}
		x := &run{threadID: r.ThreadID, runID: r.RunID, protocolVersion: r.ProtocolVersion, status: runStatus(r.Status),
			result: raw(r.Result), outcome: raw(r.Outcome), usage: raw(r.Usage), pending: raw(r.Pending),
			rejected: r.Rejected, rejectCode: r.RejectCode, rejectReason: r.RejectReason, synthetic: r.Synthetic}
		x.parentRunID, x.hasParent = fromOpt(r.ParentRunID)
		x.errMessage, x.hasError = fromOpt(r.ErrMessage)
		x.errCode, x.hasCode = fromOpt(r.ErrCode)
		t.runs = append(t.runs, x)
	}
	for _, s := range c.Subagents {
		if s.Status > uint8(subAbandoned) {
			return fmt.Errorf("%w: subagent status %d", ErrCheckpoint, s.Status)
		}
		x := &invocation{id: s.ID, name: s.Name, run: s.Run, status: subStatus(s.Status),
			result: raw(s.Result), outcome: raw(s.Outcome), errMessage: s.ErrMessage}
		x.description, x.hasDescription = fromOpt(s.Description)
		x.parentSub, x.hasParentSub = fromOpt(s.ParentSub)
		x.parentToolCall, x.hasParentToolCall = fromOpt(s.ParentToolCall)
		x.parentMessage, x.hasParentMessage = fromOpt(s.ParentMessage)
		x.errCode, x.hasCode = fromOpt(s.ErrCode)
		t.subagents = append(t.subagents, x)
	}
	return nil
}

func (m *machine) load(c *ckMachine, subs []*invocation) error {
	m.dropHot()
	for _, set := range []struct {
		dst *idSet
		src []string
	}{{&m.openText, c.OpenText}, {&m.openTool, c.OpenTool}, {&m.openSpan, c.OpenSpan}, {&m.openReason, c.OpenReason},
		{&m.closed, c.Closed}, {&m.started, c.Calls}, {&m.answered, c.Answered}} {
		for _, k := range set.src {
			set.dst.put(k, struct{}{})
		}
	}
	for _, om := range []struct {
		dst *idMap[owner]
		src map[string]ckOwner
	}{{&m.ownText, c.OwnText}, {&m.ownTool, c.OwnTool}, {&m.ownActivity, c.OwnActivity}, {&m.ownReason, c.OwnReason}, {&m.ownSpan, c.OwnSpan}} {
		for k, o := range om.src {
			om.dst.put(k, fromCk(o))
		}
	}
	if c.OwnSpan == nil {
		// An older checkpoint kept span owners in ownReason: the open
		// spans' owners, which their ends are checked against, are there.
		for _, id := range c.OpenSpan {
			if o, ok := c.OwnReason[id]; ok {
				m.ownSpan.put(id, fromCk(o))
			}
		}
	}
	m.calls = append(m.calls[:0], c.Calls...)
	m.thinkSpan, m.thinkMsg, m.minted = c.ThinkSpan, c.ThinkMsg, c.Minted
	for _, s := range c.Steps {
		m.steps = append(m.steps, step{owner: fromCk(s.Owner), name: s.Name})
	}
	for _, i := range c.Active {
		if i < 0 || i >= len(subs) {
			return fmt.Errorf("%w: active subagent index %d", ErrCheckpoint, i)
		}
		put(&m.active, subs[i].id, subs[i])
	}
	for _, l := range c.Lanes {
		if l.Kind < uint8(laneText) || l.Kind > uint8(laneReasoning) {
			return fmt.Errorf("%w: lane kind %d", ErrCheckpoint, l.Kind)
		}
		x := lane{owner: fromCk(l.Owner), kind: laneKind(l.Kind), id: l.ID, tag: fromCk(l.Tag), role: l.Role}
		x.name, x.hasName = fromOpt(l.Name)
		x.parent, x.hasParent = fromOpt(l.Parent)
		m.lanes = append(m.lanes, x)
	}
	return nil
}

func fromOpt(p *string) (string, bool) {
	if p == nil {
		return "", false
	}
	return *p, true
}

func raw(r json.RawMessage) []byte {
	if len(r) == 0 {
		return nil
	}
	return []byte(r)
}

func toCk(o owner) ckOwner   { return ckOwner{ID: o.id, Tagged: o.tagged} }
func fromCk(o ckOwner) owner { return owner{id: o.ID, tagged: o.Tagged} }
