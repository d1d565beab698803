// Package longthread generates the AG-UI 1.0 events of long conversation
// threads, for the tests and benchmarks of several packages (windowed joins,
// message pages). It is test support: deterministic, no I/O.
//
// A Gen is not safe for concurrent use.
package longthread

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Gen emits a thread message by message: runs of RunLen messages, each an
// assistant text message of about Body bytes, except that every seventh
// message is a tool call (in an assistant message) followed by its result.
// A run is opened before its first message and finished after its last, so
// between calls the thread may be in the middle of a run.
type Gen struct {
	Thread string
	RunLen int // messages per run; 0 means 50
	Body   int // bytes of text per message; 0 means 64

	msgs  int // messages emitted
	run   int // runs started
	open  bool
	inRun int // messages of the open run
}

// Messages returns the events of the next n messages (or a few more: a tool
// call and its result come together).
func (g *Gen) Messages(n int) []json.RawMessage {
	runLen, body := g.RunLen, g.Body
	if runLen <= 0 {
		runLen = 50
	}
	if body <= 0 {
		body = 64
	}
	var evs []json.RawMessage
	add := func(format string, args ...any) { evs = append(evs, json.RawMessage(fmt.Sprintf(format, args...))) }
	for end := g.msgs + n; g.msgs < end; {
		if !g.open {
			add(`{"type":"RUN_STARTED","threadId":%q,"runId":"run-%d"}`, g.Thread, g.run)
			g.run++
			g.open, g.inRun = true, 0
		}
		i := g.msgs
		if i%7 == 6 {
			add(`{"type":"TOOL_CALL_START","toolCallId":"call-%d","toolCallName":"search","parentMessageId":"msg-%d"}`, i, i)
			add(`{"type":"TOOL_CALL_ARGS","toolCallId":"call-%d","delta":"{\"query\":\"%d\"}"}`, i, i)
			add(`{"type":"TOOL_CALL_END","toolCallId":"call-%d"}`, i)
			add(`{"type":"TOOL_CALL_RESULT","messageId":"msg-%d","toolCallId":"call-%d","content":"result of %d"}`, i+1, i, i)
			g.msgs += 2
			g.inRun += 2
		} else {
			text := fmt.Sprintf("message %d: ", i)
			text += strings.Repeat("x", max(0, body-len(text)))
			add(`{"type":"TEXT_MESSAGE_START","messageId":"msg-%d","role":"assistant"}`, i)
			add(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg-%d","delta":%q}`, i, text)
			add(`{"type":"TEXT_MESSAGE_END","messageId":"msg-%d"}`, i)
			g.msgs++
			g.inRun++
		}
		if g.inRun >= runLen {
			add(`{"type":"RUN_FINISHED","threadId":%q,"runId":"run-%d"}`, g.Thread, g.run-1)
			g.open = false
		}
	}
	return evs
}

// Finish returns the event that ends the open run, if one is open.
func (g *Gen) Finish() []json.RawMessage {
	if !g.open {
		return nil
	}
	g.open = false
	return []json.RawMessage{json.RawMessage(fmt.Sprintf(`{"type":"RUN_FINISHED","threadId":%q,"runId":"run-%d"}`, g.Thread, g.run-1))}
}

// RunID returns the id of the run started last ("" before any).
func (g *Gen) RunID() string {
	if g.run == 0 {
		return ""
	}
	return fmt.Sprintf("run-%d", g.run-1)
}

// Count returns how many messages have been emitted.
func (g *Gen) Count() int { return g.msgs }
