package reducer

// The change journal feeds the fanout's "view" mode: after one or more
// Apply calls, Flush says what changed since the previous Flush, so that a
// view update costs O(changes), not O(view). Recording is O(1) per event and
// bounded: past maxJournalMessages touched messages or maxJournalOpBytes of
// state patches, the journal degrades to "re-read the list" / "re-read the
// state", which is always a correct answer.

const (
	maxJournalMessages = 256
	maxJournalOpBytes  = 64 << 10
)

// ChangeKind says how one message changed.
type ChangeKind uint8

// Change kinds, from weakest to strongest: a message that was added in the
// same flush period is reported as added only.
const (
	// Appended: only its string content grew, from TextFrom on.
	Appended ChangeKind = 1 << iota
	// Replaced: anything else about it changed (metadata, tool calls, tool
	// arguments, activity content, a restatement); re-send it whole.
	Replaced
	// Added: it is new, at the end of the list.
	Added
)

// StateChange says how the state changed.
type StateChange uint8

// State changes.
const (
	StateUnchanged StateChange = iota
	// StateDelta: only patches were applied; Changes.StateOps lists them.
	StateDelta
	// StateReplaced: re-read the state (AppendState).
	StateReplaced
)

// MessageChange is one changed message.
type MessageChange struct {
	Index    int // position in the message list at Flush time
	Kind     ChangeKind
	TextFrom int // for Appended: byte offset (in the decoded text) the new text starts at
}

// Changes is what changed between two flushes. It is valid until the next
// call on the Thread (its slices are reused).
type Changes struct {
	Seq uint64 // the Thread's Seq at Flush time
	// Structural: messages were inserted in the middle, removed or
	// reordered (a tool result placed after its call, a MESSAGES_SNAPSHOT):
	// re-read the whole list; Messages is then empty.
	Structural bool
	Messages   []MessageChange
	State      StateChange
	// StateOps are the JSON Patch arrays applied to the state, in order,
	// when State is StateDelta.
	StateOps [][]byte
	Runs     bool // runs, steps, subagents, the status or the rejection changed (re-read AppendRunMembers)
	Warnings bool // the warning count changed
}

// Empty reports whether nothing changed.
func (c *Changes) Empty() bool {
	return !c.Structural && len(c.Messages) == 0 && c.State == StateUnchanged && !c.Runs && !c.Warnings
}

type journal struct {
	epoch   uint64 // messages with jEpoch == epoch are recorded in msgs
	msgs    []*message
	shape   bool // structural change recorded
	state   StateChange
	ops     [][]byte
	opBytes int
	runs    bool
	warns   bool
	// out is Flush's result, allocated by the first Flush: held inline it
	// put Thread (1,192 bytes) in the 1,280-byte size class, and without
	// it Thread fits the 1,152-byte one, so that a flushed Thread takes 48
	// bytes less and one never flushed (threadcast reduce, bench/) 128.
	out *Changes

	// Memory accounting rides on the same marks (MemSize, ViewSize):
	// messages touched since the last measure, or memAll after a
	// structural change; viewStateOK is false once the state changed
	// since ViewSize last measured it.
	memDirty    []*message
	memAll      bool
	viewStateOK bool
}

// touchSeq is where a seq-only change would be recorded; Changes.Seq is
// read at Flush time, so there is nothing to keep.
func (j *journal) touchSeq() {}

// journalStart is the first capacity of the journal's message lists: a
// period between Flushes touches a few messages, and growing from one by
// doubling cost an allocation per doubling on every new thread.
const journalStart = 8

func (j *journal) mark(m *message, k uint8) {
	if !m.memMark && !j.memAll {
		m.memMark = true
		if j.memDirty == nil {
			j.memDirty = make([]*message, 0, journalStart) // skip the smallest growth steps
		}
		j.memDirty = append(j.memDirty, m)
	}
	if j.shape {
		return
	}
	if m.jEpoch != j.epoch+1 {
		if len(j.msgs) >= maxJournalMessages {
			j.structuralNow()
			return
		}
		m.jEpoch, m.jKind = j.epoch+1, 0
		if j.msgs == nil {
			j.msgs = make([]*message, 0, journalStart)
		}
		j.msgs = append(j.msgs, m)
	}
	if k == uint8(Appended) && m.jKind == 0 {
		m.jTextOff = len(m.text)
	}
	m.jKind |= k
}

func (j *journal) added(m *message)    { j.mark(m, uint8(Added)) }
func (j *journal) replaced(m *message) { j.mark(m, uint8(Replaced)) }
func (j *journal) appended(m *message) { j.mark(m, uint8(Appended)) }

// argsAppended: tool arguments live inside a tool call, so the holder is
// re-sent whole.
func (j *journal) argsAppended(c *toolCall) { j.mark(c.msg, uint8(Replaced)) }

func (j *journal) structural() { j.structuralNow() }

func (j *journal) structuralNow() {
	j.memAll = true
	clear(j.memDirty)
	j.memDirty = j.memDirty[:0]
	j.shape = true
	clear(j.msgs)
	j.msgs = j.msgs[:0]
}

func (j *journal) stateReplaced() {
	j.viewStateOK = false
	j.state = StateReplaced
	j.dropOps()
}

func (j *journal) stateDelta(patch []byte) {
	j.viewStateOK = false
	if j.state == StateReplaced {
		return
	}
	if j.opBytes+len(patch) > maxJournalOpBytes {
		j.stateReplaced()
		return
	}
	j.state = StateDelta
	j.ops = append(j.ops, retainBytes(patch))
	j.opBytes += len(patch)
}

func (j *journal) dropOps() {
	clear(j.ops)
	j.ops, j.opBytes = j.ops[:0], 0
}

func (j *journal) runsChanged() { j.runs = true }
func (j *journal) warned()      { j.warns = true }

// Flush returns what changed since the previous Flush (or since the Thread
// was created or loaded) and starts a new period. A view-mode consumer reads
// the whole view once (AppendView), then folds each Flush into it, reading
// only what Changes names (AppendMessageAt, AppendTextFrom, AppendState). The
// journal is not part of a checkpoint: after LoadCheckpoint, start again from
// AppendView. The result is valid until the next call on t.
func (t *Thread) Flush() *Changes {
	j := &t.j
	if j.out == nil {
		j.out = new(Changes)
	}
	out := j.out
	out.Seq, out.Structural = t.seq, j.shape
	out.Messages = out.Messages[:0]
	if !j.shape {
		for _, m := range j.msgs {
			c := MessageChange{Index: m.idx, Kind: strongest(m.jKind)}
			if c.Kind == Appended {
				c.TextFrom = m.jTextOff
			}
			out.Messages = append(out.Messages, c)
		}
	}
	out.State = j.state
	out.StateOps = append(out.StateOps[:0], j.ops...)
	out.Runs, out.Warnings = j.runs, j.warns
	// New period: an epoch bump invalidates every message's mark at once.
	j.epoch++
	clear(j.msgs)
	j.msgs = j.msgs[:0]
	j.shape, j.state, j.runs, j.warns = false, StateUnchanged, false, false
	j.ops, j.opBytes = j.ops[:0], 0
	return out
}

func strongest(k uint8) ChangeKind {
	switch {
	case k&uint8(Added) != 0:
		return Added
	case k&uint8(Replaced) != 0:
		return Replaced
	}
	return Appended
}
