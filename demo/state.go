package demo

import "strconv"

// planState mirrors the agent state the script has sent: a plan whose steps
// move from pending to in_progress to done, the turn number, and notes the
// subagents leave. Patches are generated from it, so every patch applies to
// what the consumer holds (a failing patch would be a warning).
type planState struct {
	Agent string     `json:"agent"`
	Turn  int        `json:"turn"`
	Plan  plan       `json:"plan"`
	Notes []planNote `json:"notes"`
	// next is the index of the persona's next plan step to add.
	next int
}

type plan struct {
	Goal  string     `json:"goal"`
	Steps []planStep `json:"steps"`
}

type planStep struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Status string `json:"status"`
}

type planNote struct {
	By   string `json:"by"`
	Text string `json:"text"`
}

// Bounds that keep the state of a long thread small.
const (
	maxPlanSteps = 8
	maxNotes     = 5
)

// syncState opens each run's state work: a STATE_SNAPSHOT when the consumer
// must be (re)synchronised, otherwise a STATE_DELTA bumping the turn (guarded
// by a test op, as careful agents do) and adding the run's new plan steps.
func (s *Script) syncState() {
	st := &s.state
	st.Turn++
	if st.Plan.Steps == nil {
		st.Agent = s.p.agent
		st.Plan.Goal = s.goal()
		st.Plan.Steps = []planStep{}
		st.Notes = []planNote{}
		for range 3 {
			st.Plan.Steps = append(st.Plan.Steps, s.newStep())
		}
	}
	if s.resync {
		s.resync = false
		s.add(StateSnapshot, event(StateSnapshot).val("snapshot", st), s.ms(20, 100))
		return
	}
	ops := []map[string]any{
		{"op": "test", "path": "/turn", "value": st.Turn - 1},
		{"op": "replace", "path": "/turn", "value": st.Turn},
	}
	for range 1 + s.r.IntN(2) {
		if len(st.Plan.Steps) >= maxPlanSteps && st.Plan.Steps[0].Status == "done" {
			st.Plan.Steps = st.Plan.Steps[1:]
			ops = append(ops, map[string]any{"op": "remove", "path": "/plan/steps/0"})
		}
		step := s.newStep()
		st.Plan.Steps = append(st.Plan.Steps, step)
		ops = append(ops, map[string]any{"op": "add", "path": "/plan/steps/-", "value": step})
	}
	s.add(StateDelta, event(StateDelta).val("delta", ops), s.ms(20, 100))
}

// goal is the plan's goal: the thread's first question, shortened.
func (s *Script) goal() string {
	g := s.prompt
	if len(g) > 60 {
		g = g[:60]
		for len(g) > 0 && g[len(g)-1]&0xc0 == 0x80 {
			g = g[:len(g)-1] // do not cut a UTF-8 sequence
		}
		if len(g) > 0 && g[len(g)-1] >= 0xc0 {
			g = g[:len(g)-1]
		}
		g += "…"
	}
	return g
}

func (s *Script) newStep() planStep {
	st := &s.state
	title := s.p.planSteps[st.next%len(s.p.planSteps)]
	st.next++
	return planStep{ID: "step-" + strconv.Itoa(st.next), Title: title, Status: "pending"}
}

// advancePlan marks the step in progress done and starts the next pending
// one, as one STATE_DELTA (tagged when a subagent reports it).
func (s *Script) advancePlan(sub string) {
	var ops []map[string]any
	steps := s.state.Plan.Steps
	for i := range steps {
		if steps[i].Status == "in_progress" {
			steps[i].Status = "done"
			ops = append(ops, map[string]any{"op": "replace", "path": "/plan/steps/" + strconv.Itoa(i) + "/status", "value": "done"})
			break
		}
	}
	for i := range steps {
		if steps[i].Status == "pending" {
			steps[i].Status = "in_progress"
			ops = append(ops, map[string]any{"op": "replace", "path": "/plan/steps/" + strconv.Itoa(i) + "/status", "value": "in_progress"})
			break
		}
	}
	if len(ops) > 0 {
		s.add(StateDelta, tag(event(StateDelta).val("delta", ops), sub), s.ms(10, 80))
	}
}

// finishPlan marks the step in progress done at the end of a run.
func (s *Script) finishPlan() {
	steps := s.state.Plan.Steps
	for i := range steps {
		if steps[i].Status == "in_progress" {
			steps[i].Status = "done"
			s.add(StateDelta, event(StateDelta).val("delta", []map[string]any{{"op": "replace", "path": "/plan/steps/" + strconv.Itoa(i) + "/status", "value": "done"}}), s.ms(10, 80))
			return
		}
	}
}

// addNote appends a subagent's note to the state (the tag is provenance: the
// state is the run's, subagents.md §5), dropping the oldest beyond maxNotes.
func (s *Script) addNote(sub, by, text string) {
	st := &s.state
	var ops []map[string]any
	if len(st.Notes) >= maxNotes {
		st.Notes = st.Notes[1:]
		ops = append(ops, map[string]any{"op": "remove", "path": "/notes/0"})
	}
	n := planNote{By: by, Text: text}
	st.Notes = append(st.Notes, n)
	ops = append(ops, map[string]any{"op": "add", "path": "/notes/-", "value": n})
	s.add(StateDelta, tag(event(StateDelta).val("delta", ops), sub), s.ms(10, 80))
}
