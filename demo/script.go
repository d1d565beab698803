package demo

import (
	"encoding/base64"
	"math/rand/v2"
	"strconv"
	"time"
)

// Event types the generator emits (wire names, AG-UI 1.0).
const (
	RunStarted              = "RUN_STARTED"
	RunFinished             = "RUN_FINISHED"
	RunError                = "RUN_ERROR"
	StepStarted             = "STEP_STARTED"
	StepFinished            = "STEP_FINISHED"
	TextMessageStart        = "TEXT_MESSAGE_START"
	TextMessageContent      = "TEXT_MESSAGE_CONTENT"
	TextMessageEnd          = "TEXT_MESSAGE_END"
	ToolCallStart           = "TOOL_CALL_START"
	ToolCallArgs            = "TOOL_CALL_ARGS"
	ToolCallEnd             = "TOOL_CALL_END"
	ToolCallResult          = "TOOL_CALL_RESULT"
	ReasoningStart          = "REASONING_START"
	ReasoningMessageStart   = "REASONING_MESSAGE_START"
	ReasoningMessageContent = "REASONING_MESSAGE_CONTENT"
	ReasoningMessageEnd     = "REASONING_MESSAGE_END"
	ReasoningEnd            = "REASONING_END"
	ReasoningEncryptedValue = "REASONING_ENCRYPTED_VALUE"
	StateSnapshot           = "STATE_SNAPSHOT"
	StateDelta              = "STATE_DELTA"
	ActivitySnapshot        = "ACTIVITY_SNAPSHOT"
	ActivityDelta           = "ACTIVITY_DELTA"
	SubagentStarted         = "SUBAGENT_STARTED"
	SubagentFinished        = "SUBAGENT_FINISHED"
	SubagentError           = "SUBAGENT_ERROR"
)

// Activity types of the widgets the dashboard draws. Each persona also emits
// one activity type of its own that no dashboard knows (see Persona docs).
const (
	ActivityWebSearch = "web_search"
	ActivityChecklist = "checklist"
)

// MetaPrefix starts every metadata key the demo agents write. The `ag-ui`
// key is reserved to the protocol, which defines nothing under it in 1.0
// (spec metadata.md §2), so application data — model, token usage, finish
// reason, latencies — goes under keys of our own, as producers SHOULD do.
const MetaPrefix = "threadcast.demo/"

// Default option values.
const (
	DefaultErrorRate  = 0.05 // share of runs that fail with RUN_ERROR
	DefaultCancelRate = 0.03 // share of runs the "user" stops (cancelled outcome)
)

// Event is one generated AG-UI event.
type Event struct {
	// Type is the event's wire type, e.g. "TEXT_MESSAGE_CONTENT".
	Type string
	// JSON is the complete event: one JSON object, no trailing newline. It is
	// freshly allocated for this Event and belongs to the caller, who may keep
	// or modify it.
	JSON []byte
	// Pause is the timing hint: how long a live agent would take to produce
	// this event after the previous one (model latency, token pace, tool
	// execution, user think time before a new run).
	Pause time.Duration
}

// Options shape the traffic of one thread. The zero value is usable.
type Options struct {
	// ThreadID is the AG-UI threadId of the script. Empty: "thread-" and 8
	// hex digits derived from the seed.
	ThreadID string
	// Persona selects the subject matter: "travel", "research" or "devops"
	// (Personas lists them). Empty: chosen by the seed.
	Persona string
	// ErrorRate is the probability that a run fails with RUN_ERROR part-way.
	// 0 means DefaultErrorRate; a negative value disables errors.
	ErrorRate float64
	// CancelRate is the probability that the user stops a run during its
	// answer (RUN_FINISHED with the cancelled outcome). 0 means
	// DefaultCancelRate; a negative value disables it.
	CancelRate float64
	// Verbosity scales the length of texts (1 = typical chat answers of a
	// hundred-odd tokens). 0 means 1.
	Verbosity float64
}

// Personas returns the names accepted by Options.Persona, in the order
// Config assigns them to tenants.
func Personas() []string {
	out := make([]string, len(personas))
	for i, p := range personas {
		out[i] = p.name
	}
	return out
}

// Script generates the AG-UI event stream of one thread, run after run,
// deterministically: the same seed and Options give the same bytes on every
// machine. Every stream it produces is valid AG-UI 1.0 — a conforming
// consumer applies it with no error and no warning — including the runs it
// ends with RUN_ERROR and the ones it cancels.
//
// A Script is not safe for concurrent use; give each goroutine its own.
type Script struct {
	r      *rand.Rand
	p      *persona
	opts   Options
	thread string
	runs   int
	ids    uint64
	state  planState
	prompt string // the thread's first question, the plan's goal
	// resync asks the next run to restate the state with a STATE_SNAPSHOT:
	// set at the start and after a run cut short by RUN_ERROR, whose
	// unsent patches the consumer never saw.
	resync bool
	// buf collects the run being generated.
	buf []Event
}

// NewScript returns the script of one thread. Unknown Persona names fall back
// to the seed's choice.
func NewScript(seed uint64, opts Options) *Script {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	if opts.ErrorRate == 0 {
		opts.ErrorRate = DefaultErrorRate
	}
	if opts.CancelRate == 0 {
		opts.CancelRate = DefaultCancelRate
	}
	if opts.Verbosity <= 0 {
		opts.Verbosity = 1
	}
	p := personaByName(opts.Persona)
	if p == nil {
		p = personas[r.IntN(len(personas))]
	}
	if opts.ThreadID == "" {
		opts.ThreadID = "thread-" + strconv.FormatUint(r.Uint64()>>32|1<<31, 16)
	}
	return &Script{r: r, p: p, opts: opts, thread: opts.ThreadID, resync: true}
}

// ThreadID returns the thread's AG-UI threadId.
func (s *Script) ThreadID() string { return s.thread }

// Persona returns the name of the script's persona.
func (s *Script) Persona() string { return s.p.name }

// Runs returns how many runs NextRun has produced.
func (s *Script) Runs() int { return s.runs }

// NextRun generates the next run of the thread: RUN_STARTED, a user message,
// the agent's work, and RUN_FINISHED (or RUN_ERROR). The slice is new and
// belongs to the caller. The first event's Pause is the user's think time
// before asking (zero for the first run).
func (s *Script) NextRun() []Event {
	s.runs++
	s.buf = make([]Event, 0, 400)
	runID := s.id("run")
	var pause time.Duration
	if s.runs > 1 {
		pause = s.ms(2000, 7000)
	}
	s.add(RunStarted, event(RunStarted).str("threadId", s.thread).str("runId", runID).str("protocolVersion", "1.0"), pause)

	u := usage{input: 350 + 180*s.runs + s.r.IntN(200)}
	if s.runs == 1 {
		s.prompt = pick(s.r, s.p.prompts)
		s.userMessage(s.prompt)
	} else {
		s.userMessage(pick(s.r, s.p.followups))
	}
	s.syncState()
	if s.r.Float64() < 0.8 {
		s.add(StepStarted, event(StepStarted).str("stepName", "think"), s.ms(0, 5))
		u.reasoning += s.reasoning("", s.scaled(2, 4))
		s.add(StepFinished, event(StepFinished).str("stepName", "think"), s.ms(0, 5))
	}
	s.advancePlan("")

	// The middle of a run: a shuffled subset of what agents do between the
	// question and the answer.
	phases := []func(*usage){s.searchPhase, s.toolPhase, s.subagentPhase, s.widgetPhase}
	s.r.Shuffle(len(phases), func(i, j int) { phases[i], phases[j] = phases[j], phases[i] })
	for _, ph := range phases[:1+s.r.IntN(3)] {
		ph(&u)
		s.advancePlan("")
	}

	cancelled := s.r.Float64() < s.opts.CancelRate
	answerID := s.answerPhase(&u, cancelled)
	s.finishPlan()

	fin := event(RunFinished).str("threadId", s.thread).str("runId", runID)
	switch {
	case cancelled:
		fin.val("outcome", map[string]string{"type": "cancelled"})
	case s.r.Float64() < 0.3:
		fin.val("outcome", map[string]string{"type": "success"})
		fin.val("result", map[string]string{"answerMessageId": answerID})
	}
	fin.raw("usage", u.json(s.p.model))
	s.add(RunFinished, fin, s.ms(10, 60))

	if !cancelled && s.r.Float64() < s.opts.ErrorRate {
		s.failRun(&u)
	}
	out := s.buf
	s.buf = nil
	return out
}

// failRun cuts the run at a random point after RUN_STARTED and ends it with
// RUN_ERROR, which abandons whatever was open (patterns.md §1.7). State
// patches that were cut never reached the consumer, so the next run restates
// the state.
func (s *Script) failRun(u *usage) {
	// One failure in eight is discovered after success was reported (a late
	// RUN_ERROR, patterns.md §1.2): the run stays whole and then fails.
	if s.r.IntN(8) != 0 {
		s.buf = s.buf[:2+s.r.IntN(len(s.buf)-2)]
	}
	failures := [][2]string{
		{"upstream model timed out after 30s", "provider_timeout"},
		{"rate limit exceeded, retry later", "rate_limited"},
		{"tool sandbox crashed", "tool_crash"},
		{"context window exceeded", "context_length_exceeded"},
	}
	f := pick(s.r, failures)
	u.output /= 2
	u.reasoning /= 2
	s.add(RunError, event(RunError).str("message", f[0]).str("code", f[1]).raw("usage", u.json(s.p.model)), s.ms(500, 3000))
	s.resync = true
}

// add appends one event to the run being built.
func (s *Script) add(typ string, o *obj, pause time.Duration) {
	s.buf = append(s.buf, Event{Type: typ, JSON: o.done(), Pause: pause})
}

// id mints an identifier unique in the thread: a per-script counter makes it
// unique, random hex makes it look like the ids real providers mint.
func (s *Script) id(prefix string) string {
	s.ids++
	b := make([]byte, 0, len(prefix)+16)
	b = append(b, prefix...)
	b = append(b, '_')
	b = strconv.AppendUint(b, s.ids, 36)
	v := s.r.Uint32()
	for k := 0; k < 6; k++ {
		b = append(b, hexDigits[v&0xf])
		v >>= 4
	}
	return string(b)
}

// ms draws a duration in [lo, hi] milliseconds.
func (s *Script) ms(lo, hi int) time.Duration {
	return time.Duration(lo+s.r.IntN(hi-lo+1)) * time.Millisecond
}

// opaque returns an encryptedValue-like blob: base64 of random bytes.
func (s *Script) opaque() string {
	b := make([]byte, 48+s.r.IntN(64))
	for i := range b {
		b[i] = byte(s.r.Uint32())
	}
	return base64.StdEncoding.EncodeToString(b)
}

// usage accumulates the token counts of a run for RUN_FINISHED/RUN_ERROR.
type usage struct {
	input, output, reasoning int
	subOutput                int // tokens generated by subagents (another model)
}

// json renders the run's `usage` array: one entry per provider and model
// (patterns.md §1.6): totalTokens = input + output, reasoning and cached
// tokens are parts of those totals, never additions.
func (u *usage) json(model string) []byte {
	out := u.output + u.reasoning
	entries := []map[string]any{{
		"provider": "threadcast-demo", "model": model,
		"inputTokens": u.input, "outputTokens": out, "totalTokens": u.input + out,
		"reasoningTokens": u.reasoning, "cachedInputTokens": u.input / 3,
	}}
	if u.subOutput > 0 {
		in := 200 + u.subOutput*2
		entries = append(entries, map[string]any{
			"provider": "threadcast-demo", "model": "demo-small-1",
			"inputTokens": in, "outputTokens": u.subOutput, "totalTokens": in + u.subOutput,
		})
	}
	return mustJSON(entries)
}
