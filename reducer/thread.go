package reducer

import (
	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/jsondoc"
)

// Thread is one conversation thread's consolidated view plus the protocol
// machine that judges its events. It is owned by one goroutine: not safe for
// concurrent use. The zero Thread is not usable; call NewThread or
// LoadCheckpoint.
//
// Invariants (enforced by the methods of this package, relied on by view.go,
// snapshot.go and checkpoint.go):
//   - msgs is the message order; msgs[i].idx == i for every i.
//   - byID maps every message id to the first message in msgs with that id
//     (ids are unique in a conforming stream; duplicates resolve like the
//     reference's Array.find).
//   - calls maps every tool call id to the first tool call with that id,
//     scanning msgs in order; call.msg is the message holding it.
//   - seq never decreases.
//   - phase says which events the lifecycle admits next (patterns.md §1.1);
//     the open sets, steps, active subagents and lanes in m are empty unless
//     phase == phaseActive; the owner maps, the closed-subagent set and the
//     run's tool-call lists live until the next RUN_STARTED.
type Thread struct {
	threadID string
	seq      uint64

	msgs  []*message
	byID  idMap[*message]
	calls idMap[*toolCall]
	state jsondoc.Doc

	runs      []*run
	subagents []*invocation // every invocation announced, in order
	warnings  uint64
	rejection string // reason of the most recent stream rejection; "" if none

	phase phase
	m     machine

	// cur* describe the event being applied, for error and warning text.
	curSeq  uint64
	curType codec.Type

	res Result  // reused: Result.Warnings is valid until the next call
	j   journal // change journal for the fanout's view mode

	memMsgs   int    // sum of messages' memSize (see MemSize)
	viewMsgs  int    // sum of messages' viewSize (see ViewSize)
	viewState int    // state.TextLen() when journal.viewStateOK
	scratch   []byte // reused by comparisons (reconcile.go)
}

// NewThread returns an empty Thread for threadID, whose state is {} (the
// spec's value for a run input without state).
func NewThread(threadID string) *Thread {
	t := &Thread{threadID: retain(threadID)}
	// Sized for a short conversation (bench/'s short threads hold 3 to 21
	// messages, 9 in the median): a linear search of up to 16 ids costs
	// about what a map lookup does, and a map sized for 16 took 984 bytes
	// in four allocations, a sixth of the bytes a short thread allocates.
	t.byID.reserve(16)
	t.m.ownText.reserve(smallIDs) // 3 to 17 ids at the end of bench/'s short threads' runs, 5 in the median
	_ = t.state.Set([]byte("{}"))
	t.m.init()
	return t
}

// ThreadID returns the thread's id as given to NewThread.
func (t *Thread) ThreadID() string { return t.threadID }

// Seq returns the stream sequence of the last event handed to Apply, Reject
// or Warn (0 before any).
func (t *Thread) Seq() uint64 { return t.seq }

// Warnings returns how many warnings the thread has counted.
func (t *Thread) Warnings() uint64 { return t.warnings }

// Rejection returns the reason of the most recent stream rejection, or "".
func (t *Thread) Rejection() string { return t.rejection }

// ChunkLanesOpen reports how many chunk streams are open (patterns.md §3):
// a Compactor for the events that follow must assume them open
// (compact.NewMidStream) unless there are none (compact.New).
func (t *Thread) ChunkLanesOpen() int { return len(t.m.lanes) }

// Status is where the thread's protocol machine stands.
type Status uint8

// Statuses. The zero value is StatusIdle.
const (
	// StatusIdle: no run yet; the stream must begin with RUN_STARTED or
	// RUN_ERROR.
	StatusIdle Status = iota
	// StatusRunning: a run is active.
	StatusRunning
	// StatusFinished: the last run ended with RUN_FINISHED.
	StatusFinished
	// StatusErrored: the last run ended with the producer's RUN_ERROR.
	StatusErrored
	// StatusRejected: the consumer rejected the stream (a fatal protocol
	// error); only RUN_STARTED is accepted.
	StatusRejected
)

var statusNames = [...]string{"idle", "running", "finished", "errored", "rejected"}

// String returns "idle", "running", "finished", "errored" or "rejected".
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "status(?)"
}

// Status returns where the protocol machine stands.
func (t *Thread) Status() Status { return Status(t.phase) }

// phase is Status under the name the machine code uses.
type phase = Status

const (
	phaseIdle     = StatusIdle
	phaseActive   = StatusRunning
	phaseFinished = StatusFinished
	phaseErrored  = StatusErrored
	phaseRejected = StatusRejected
)

// Result is what Apply reports about one event. It is reused by the Thread:
// Warnings is valid until the next call on the same Thread.
type Result struct {
	// Warnings are the warn-and-skip diagnostics this event produced (each
	// also counted in the view).
	Warnings []Warning
	// Fatal is non-nil when the event was not applied: a *ProtocolError (the
	// stream is now rejected), or an error wrapping ErrRejected (the stream
	// was already rejected) or ErrStaleSeq (the event was refused and
	// nothing was counted).
	Fatal error
}

// Warning is one warn-and-skip diagnostic. Code is stable and machine
// readable; Message is for people.
type Warning struct {
	Code    string
	Seq     uint64
	Message string
}

// Warning codes the reducer itself produces. Codec-level warnings passed to
// Thread.Warn keep their own codes (see CodecWarning).
const (
	WarnPatchFailed       = "patch-failed"                 // P3: a well-formed patch did not apply
	WarnActivityMissing   = "activity-target-missing"      // P6: ACTIVITY_DELTA for no message
	WarnActivityNotActive = "activity-target-not-activity" // P6: ACTIVITY_DELTA for another role
	WarnEncryptedUnknown  = "encrypted-target-unknown"     // R1: REASONING_ENCRYPTED_VALUE names nothing usable
	WarnTargetMissing     = "target-missing"               // content/end for a message a snapshot dropped
	WarnTargetActivity    = "target-is-activity"           // text/reasoning event naming an activity message
	WarnToolRenamed       = "tool-call-renamed"            // S6: reopened tool call with another name
	WarnToolParentRole    = "tool-parent-not-assistant"    // parentMessageId names a non-assistant message
	WarnUnknownEvent      = "unknown-event-type"           // X1: Apply got TypeUnknown
	WarnRetiredUnopened   = "retired-continues-nothing"    // a translated THINKING_* content/end with no THINKING opener
)

// message is one message of the view, of any of the seven roles. The one-byte
// fields are grouped at the end: scattered between the words they padded the
// struct from 272 to 328 bytes (a 352-byte size class instead of 288), and a
// thread allocates one per message.
type message struct {
	id  string
	idx int // position in Thread.msgs

	// Content: text for string content (decoded, WTF-8 for lone
	// surrogates), raw for a content-part array (user, tool), doc for an
	// activity's object. hasContent is false only for an assistant message
	// that has none (a turn of tool calls only).
	text []byte
	raw  []byte
	doc  *jsondoc.Doc

	name         string
	toolCallID   string // tool
	errText      string // tool
	activityType string // activity
	toolCalls    []*toolCall
	encrypted    string
	encType      string // AG-UI 1.1 encryptedValueType, kept as the codec reads it
	owner        owner
	meta         *jsondoc.Doc // nil when absent

	jEpoch   uint64 // journal bookkeeping, see journal.go
	jTextOff int
	memSize  int // size at the last MemSize or ViewSize
	viewSize int // view size at the last MemSize or ViewSize

	role         role
	hasContent   bool
	hasName      bool
	hasError     bool
	hasToolCalls bool
	hasEncrypted bool
	hasEncType   bool
	jKind        uint8 // journal bookkeeping
	memMark      bool  // in journal.memDirty
}

// toolCall is one entry of an assistant message's toolCalls.
type toolCall struct {
	id           string
	name         string
	args         []byte
	encrypted    string
	hasEncrypted bool
	encType      string
	hasEncType   bool
	meta         *jsondoc.Doc
	msg          *message
}

// role is a message role (messages.md §1).
type role uint8

const (
	roleNone role = iota
	roleUser
	roleAssistant
	roleSystem
	roleDeveloper
	roleTool
	roleActivity
	roleReasoning
)

var roleNames = [...]string{"", "user", "assistant", "system", "developer", "tool", "activity", "reasoning"}

func (r role) String() string { return roleNames[r] }

func parseRole(s string) role {
	for i := 1; i < len(roleNames); i++ {
		if roleNames[i] == s {
			return role(i)
		}
	}
	return roleNone
}

// owner is an attribution: the parent agent (tagged == false) or one subagent
// invocation. The empty string is a legal subagentRunId, hence the flag.
type owner struct {
	id     string
	tagged bool
}

// ownerOf returns e's attribution as a view into e.
func ownerOf(e *codec.Event) owner {
	if e.Has(codec.FieldSubagentRunID) {
		return owner{e.SubagentRunID, true}
	}
	return owner{}
}

func (o owner) retained() owner { return owner{retain(o.id), o.tagged} }

func (o owner) String() string {
	if !o.tagged {
		return "the parent agent"
	}
	return "subagent " + quote(o.id)
}

// run is one RUN_STARTED … RUN_FINISHED | RUN_ERROR bracket.
type run struct {
	threadID        string
	runID           string
	parentRunID     string
	hasParent       bool
	protocolVersion string
	status          runStatus
	result          []byte // RUN_FINISHED.result; nil when absent
	outcome         []byte // RUN_FINISHED.outcome; nil when absent
	usage           []byte // usage of the terminal event, as JSON; nil when absent
	pending         []byte // pendingToolCallIds (named or derived) as a JSON array; nil when none
	errMessage      string // RUN_ERROR.message
	errCode         string
	hasError        bool
	hasCode         bool
	rejected        bool   // the consumer rejected the stream during this run
	rejectCode      string // verdict-table row
	rejectReason    string
	synthetic       bool // created by a RUN_ERROR that opened no run
}

type runStatus uint8

const (
	runRunning runStatus = iota
	runFinished
	runInterrupted
	runCancelled
	runError
)

var runStatusNames = [...]string{"running", "finished", "interrupted", "cancelled", "error"}

// invocation is one subagent invocation (subagents.md §7).
type invocation struct {
	id                string
	name              string
	description       string
	hasDescription    bool
	parentSub         string
	hasParentSub      bool
	parentToolCall    string
	hasParentToolCall bool
	parentMessage     string
	hasParentMessage  bool
	run               int // index into Thread.runs
	status            subStatus
	result            []byte
	outcome           []byte
	errMessage        string
	errCode           string
	hasCode           bool
}

type subStatus uint8

const (
	subActive subStatus = iota
	subFinished
	subSuspended
	subError
	subAbandoned
)

var subStatusNames = [...]string{"active", "finished", "suspended", "error", "abandoned"}

// MemSize approximates the bytes the Thread holds, for eviction decisions.
// It re-measures only the messages changed since the previous call (all of
// them after a restatement), so calling it after every batch costs O(changes).
func (t *Thread) MemSize() int {
	t.measure()
	return 512 + t.state.Size() + (len(t.runs)+len(t.subagents))*threadPerRun + t.memMsgs + t.m.size()
}

// ViewSize approximates the bytes of the Thread's view, for limits on it.
// MemSize counts the memory holding the view, which depends on how the
// Thread got there (buffers grown by appending, documents split by
// patches); ViewSize counts what the view holds (text and argument
// lengths, documents by their JSON text), so a Thread built event by event
// and the same Thread loaded from its checkpoint report the same, and a
// limit on it decides the same either way. Its cost is MemSize's (the
// messages changed since the previous call), and once after each state
// change the state's jsondoc.Doc.TextLen: O(1) for a state set whole, the
// containers patches changed for one patched.
func (t *Thread) ViewSize() int {
	t.measure()
	if !t.j.viewStateOK {
		t.viewState, t.j.viewStateOK = t.state.TextLen(), true
	}
	return 512 + t.viewState + (len(t.runs)+len(t.subagents))*threadPerRun + t.viewMsgs + t.m.size()
}

// threadPerRun is what MemSize and ViewSize count per run and per subagent
// invocation.
const threadPerRun = 200

// measure brings memMsgs and viewMsgs up to date: it re-measures the
// messages changed since the previous call (all of them after a
// restatement).
func (t *Thread) measure() {
	j := &t.j
	if j.memAll {
		t.memMsgs, t.viewMsgs = 0, 0
		for _, m := range t.msgs {
			m.memSize, m.viewSize = messageSize(m)
			m.memMark = false
			t.memMsgs += m.memSize
			t.viewMsgs += m.viewSize
		}
		j.memAll = false
	} else {
		for _, m := range j.memDirty {
			mem, view := messageSize(m)
			t.memMsgs += mem - m.memSize
			t.viewMsgs += view - m.viewSize
			m.memSize, m.viewSize, m.memMark = mem, view, false
		}
	}
	clear(j.memDirty)
	j.memDirty = j.memDirty[:0]
}

// messageSize approximates one message's bytes, tool calls included: in
// memory (buffer capacities, documents' nodes: MemSize) and in the view
// (lengths, documents' text: ViewSize).
func messageSize(m *message) (mem, view int) {
	const perMessage, perCall = 160, 96
	n := perMessage + len(m.id) + len(m.raw) + len(m.name) +
		len(m.toolCallID) + len(m.errText) + len(m.activityType) + len(m.encrypted)
	mem, view = n+cap(m.text), n+len(m.text)
	if m.doc != nil {
		mem += m.doc.Size()
		view += m.doc.TextLen()
	}
	if m.meta != nil {
		mem += m.meta.Size()
		view += m.meta.TextLen()
	}
	for _, c := range m.toolCalls {
		n := perCall + len(c.id) + len(c.name) + len(c.encrypted)
		mem += n + cap(c.args)
		view += n + len(c.args)
		if c.meta != nil {
			mem += c.meta.Size()
			view += c.meta.TextLen()
		}
	}
	return mem, view
}
