package reducer

// machine is the run-scoped protocol tracking (patterns.md §1.3): what is
// open, who owns what, which steps and subagents are active, and the chunk
// lanes. All of it is reset by RUN_STARTED; RUN_ERROR and a rejection
// abandon the open sets.
//
// Owners are kept per entity kind for the whole run, not only while an item
// is open (subagents.md §3, "Bookkeeping"), so that reopens and
// post-close continuations such as REASONING_ENCRYPTED_VALUE can be checked.
type machine struct {
	openText   idSet
	openTool   idSet
	openSpan   idSet // reasoning spans (REASONING_START)
	openReason idSet // reasoning messages

	ownText     idMap[owner] // text, tool-result and other messages
	ownTool     idMap[owner]
	ownActivity idMap[owner]
	ownReason   idMap[owner] // reasoning messages
	ownSpan     idMap[owner] // reasoning spans: their own namespace (envelope.md §4), unlike the reference's one map

	// thinkSpan and thinkMsg are the ids minted for the open retired
	// THINKING span and THINKING text message (completeRetired), "" when
	// none is open: what the reference's compatibility boundary keeps.
	// minted counts the ids minted in the thread's life (not reset by a
	// run), so that two minted in one seq (a batch) still differ.
	thinkSpan, thinkMsg string
	minted              uint64

	steps []step // active steps, in start order

	active map[string]*invocation // active subagent invocations of this run
	closed idSet                  // invocations finished or errored in this run

	lanes []lane // open chunk streams, at most one per owner

	// Tool calls this run started (first start, in order) and those it
	// answered with TOOL_CALL_RESULT, to derive pendingToolCallIds
	// (run-input.md §2, X19).
	calls    []string
	started  idSet
	answered idSet

	// hot caches the two items the last content events appended to, so
	// that deltas to one message, or to two interleaved ones (a text and
	// a reasoning message, two subagents' texts), cost one string compare
	// instead of three map lookups. For each entry with kind != 0: id is
	// open (openText or openReason by kind), its recorded owner is owner,
	// and Thread.byID[id] == msg, a non-activity message. Everything that
	// could break one of these calls dropHot, or dropHotID for one item.
	// hot[0] is the most recent.
	hot [2]hotItem

	// hotCall is the same for the tool call the last TOOL_CALL_ARGS
	// appended to. While call != nil: id is open (openTool), its recorded
	// owner (ownTool) is owner, and Thread.calls[id] == call. dropHot
	// empties it too; toolStart, toolEnd and indexCall do as well.
	hotCall struct {
		id    string
		owner owner
		call  *toolCall
	}
}

// hotItem is one entry of machine.hot.
type hotItem struct {
	kind  laneKind // laneText or laneReasoning; 0 = empty
	id    string
	owner owner
	msg   *message
}

// dropHot empties the content cache.
func (m *machine) dropHot() {
	m.hot = [2]hotItem{}
	m.dropHotCall()
}

// remember caches msg, the message of open item id (kind k, recorded
// owner o), as the most recent content target.
func (m *machine) remember(k laneKind, id string, o owner, msg *message) {
	if m.hot[0].kind != 0 && m.hot[0].id != id {
		m.hot[1] = m.hot[0]
	}
	m.hot[0] = hotItem{kind: k, id: id, owner: o, msg: msg}
}

// dropHotID drops the content cache's entries for item id, whatever their
// kind: what closing id, or re-recording its owner, invalidates.
func (m *machine) dropHotID(id string) {
	for i := range m.hot {
		if m.hot[i].kind != 0 && m.hot[i].id == id {
			m.hot[i] = hotItem{}
		}
	}
}

// dropHotCall empties the tool-call cache only.
func (m *machine) dropHotCall() { m.hotCall.id, m.hotCall.call = "", nil }

// step is an open step; steps are matched by name per owner.
type step struct {
	owner owner
	name  string
}

// laneKind is the kind of item a chunk lane is assembling.
type laneKind uint8

const (
	laneText laneKind = iota + 1
	laneTool
	laneReasoning
)

// lane is one owner's open chunk stream (patterns.md §3.4). The opener fields
// are kept so that continuations repeating them can be checked (S11) and so
// that the synthesized END carries the opener's attribution.
type lane struct {
	owner     owner // the lane's key
	kind      laneKind
	id        string // messageId or toolCallId
	tag       owner  // the opener's own subagentRunId
	role      string // text: the opener's role ("assistant" when absent)
	name      string // text: name; tool: toolCallName
	hasName   bool
	parent    string // tool: parentMessageId
	hasParent bool
}

// init prepares an empty machine. Nothing is allocated up front: the zero
// idMap is empty and allocates on first put, and active is created on first
// insert (put; reads of a nil map are valid), so a thread that never uses,
// say, reasoning spans never pays for their bookkeeping.
func (m *machine) init() {}

// put sets (*mp)[k] = v, creating the map on first use.
func put[V any](mp *map[string]V, k string, v V) {
	if *mp == nil {
		*mp = make(map[string]V)
	}
	(*mp)[k] = v
}

// reset forgets everything run-scoped (a new RUN_STARTED).
func (m *machine) reset() {
	m.abandon()
	m.ownText.clear()
	m.ownTool.clear()
	m.ownActivity.clear()
	m.ownReason.clear()
	m.ownSpan.clear()
	m.closed.clear()
	m.started.clear()
	m.answered.clear()
	m.calls = m.calls[:0]
	m.thinkSpan, m.thinkMsg = "", ""
}

// abandon drops every open item, step, active invocation and lane (RUN_ERROR,
// or a rejection: nothing open is expected to close).
func (m *machine) abandon() {
	m.dropHot()
	m.openText.clear()
	m.openTool.clear()
	m.openSpan.clear()
	m.openReason.clear()
	m.steps = m.steps[:0]
	clear(m.active)
	m.lanes = m.lanes[:0]
}

// stepIndex returns the index of the open step (o, name), or -1.
func (m *machine) stepIndex(o owner, name string) int {
	for i := range m.steps {
		if m.steps[i].owner == o && m.steps[i].name == name {
			return i
		}
	}
	return -1
}

// laneIndex returns the index of o's lane, or -1.
func (m *machine) laneIndex(o owner) int {
	for i := range m.lanes {
		if m.lanes[i].owner == o {
			return i
		}
	}
	return -1
}

// laneHolding returns the index of the lane assembling item id of kind k, or -1.
func (m *machine) laneHolding(k laneKind, id string) int {
	for i := range m.lanes {
		if m.lanes[i].kind == k && m.lanes[i].id == id {
			return i
		}
	}
	return -1
}

// size approximates the bytes the machine holds.
func (m *machine) size() int {
	n := 48 * (m.openText.len() + m.openTool.len() + m.openSpan.len() + m.openReason.len())
	n += 64 * (m.ownText.len() + m.ownTool.len() + m.ownActivity.len() + m.ownReason.len() + m.ownSpan.len())
	return n + 64*(len(m.steps)+len(m.lanes)+len(m.active)+m.closed.len())
}

// sameOwner reports whether a continuation tagged tag agrees with the
// recorded owner rec (subagents.md §3): an untagged continuation always
// agrees; a tagged one must name the same owner, the parent included.
func sameOwner(tag, rec owner) bool {
	return !tag.tagged || tag == rec
}

// ownerBucket is the owner map of messages of role r.
func (m *machine) ownerBucket(r role) *idMap[owner] {
	switch r {
	case roleReasoning:
		return &m.ownReason
	case roleActivity:
		return &m.ownActivity
	}
	return &m.ownText
}

// remint makes o the owner of message id (a retained string) in bucket and
// in every other message owner map that records id: an owner a snapshot
// states "replaces any recorded owner" (messages.md §4 rule 5), whatever
// role the message had when that owner was recorded. Spans are not
// messages: ownSpan is never touched.
func (m *machine) remint(bucket *idMap[owner], id string, o owner) {
	for _, b := range [...]*idMap[owner]{&m.ownText, &m.ownReason, &m.ownActivity} {
		if b != bucket && b.has(id) {
			m.dropHot() // an owner may change under a cached item
			b.put(id, o)
		}
	}
	bucket.put(id, o)
}

// forget drops what the owner maps record of message msg and of its tool
// calls, once a MESSAGES_SNAPSHOT has dropped it from the view: the id is no
// longer held, so a start for it creates a new message (messages.md §2.1)
// and an event naming it names an unknown entity, not a continuation. An
// item still open keeps its owner: its continuations must still agree with
// their opener (subagents.md §3) even though the content they carry is
// skipped. A span of the same id keeps its own.
func (m *machine) forget(msg *message) {
	m.dropHot()
	if !m.openText.has(msg.id) && !m.openReason.has(msg.id) {
		m.ownText.del(msg.id)
		m.ownReason.del(msg.id)
		m.ownActivity.del(msg.id)
	}
	for _, c := range msg.toolCalls {
		if !m.openTool.has(c.id) {
			m.ownTool.del(c.id)
		}
	}
}
