package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/jsondoc"
)

// viewDoc is what a view-mode subscriber holds: the thread's view document,
// kept up to date from the fanout's payloads (the format of
// pipeline/reduce.go appendChanges, as web/static/viewdoc.js applies it):
//
//	{"type":"view","seq":S,"view":{...}}
//	{"type":"changes","seq":S,"prev":P,"changes":null | {
//	   "messages":[{"index":i,"op":"add"|"replace","message":{..}} |
//	               {"index":i,"op":"append","text":".."}],
//	   "allMessages":[..], "stateOps":[[patch],..] | "state":<any>,
//	   "status":"..", "runs":[..], "steps":[..], "subagents":[..], "error":..,
//	   "view":{..}, "warnings":n}}
//
// Appended text is kept beside each message and folded in only by JSON, so
// that an append costs O(its text), not O(the message). It is independent of
// the reducer: only the state's JSON Patch is applied with jsondoc (the
// server applied it with the same package; the offline reduction and the
// REST view check it independently of this fold).
type viewDoc struct {
	seq   uint64
	have  bool
	other map[string]json.RawMessage // the view's fields besides messages, state, seq
	msgs  []vmsg
	state *jsondoc.Doc
	dec   codec.Decoder
	ev    codec.Event
}

type vmsg struct {
	raw   json.RawMessage
	extra []byte // text appended to content since raw
}

// errGap reports a changes payload that does not continue the held seq.
var errGap = errors.New("loadtest: view payload does not continue the held seq")

type viewPayload struct {
	Type    string          `json:"type"`
	Seq     uint64          `json:"seq"`
	Prev    uint64          `json:"prev"`
	View    json.RawMessage `json:"view"`
	Changes json.RawMessage `json:"changes"`
}

type viewChanges struct {
	Messages []struct {
		Index   int             `json:"index"`
		Op      string          `json:"op"`
		Text    *string         `json:"text"`
		Message json.RawMessage `json:"message"`
	} `json:"messages"`
	AllMessages []json.RawMessage `json:"allMessages"`
	StateOps    []json.RawMessage `json:"stateOps"`
	State       json.RawMessage   `json:"state"`
	View        json.RawMessage   `json:"view"`
	Warnings    json.RawMessage   `json:"warnings"`
	// The run-level members, restated when runs, steps or subagents
	// changed.
	Status    json.RawMessage `json:"status"`
	Runs      json.RawMessage `json:"runs"`
	Steps     json.RawMessage `json:"steps"`
	Subagents json.RawMessage `json:"subagents"`
	Error     json.RawMessage `json:"error"`
}

// apply folds one payload in. It returns the payload's type and seq and
// errGap (changing nothing) when a changes payload's prev is not the held
// seq; a seq at or below the held one is a duplicate (also errGap).
func (d *viewDoc) apply(b []byte) (typ string, seq uint64, err error) {
	var p viewPayload
	if err := json.Unmarshal(b, &p); err != nil {
		return "", 0, fmt.Errorf("loadtest: view payload: %w", err)
	}
	switch p.Type {
	case "view":
		if err := d.setView(p.View); err != nil {
			return p.Type, p.Seq, err
		}
	case "changes":
		if !d.have || p.Prev != d.seq {
			return p.Type, p.Seq, errGap
		}
		if len(p.Changes) > 0 && string(p.Changes) != "null" {
			if err := d.applyChanges(p.Changes); err != nil {
				return p.Type, p.Seq, err
			}
		}
	default:
		return p.Type, p.Seq, fmt.Errorf("loadtest: view payload type %q", p.Type)
	}
	d.seq = p.Seq
	return p.Type, p.Seq, nil
}

func (d *viewDoc) setView(raw json.RawMessage) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("loadtest: view: %w", err)
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(m["messages"], &msgs); err != nil {
		return fmt.Errorf("loadtest: view messages: %w", err)
	}
	st, err := jsondoc.Parse(m["state"])
	if err != nil {
		return fmt.Errorf("loadtest: view state: %w", err)
	}
	delete(m, "messages")
	delete(m, "state")
	delete(m, "seq")
	d.other, d.state, d.have = m, st, true
	d.msgs = d.msgs[:0]
	for _, r := range msgs {
		d.msgs = append(d.msgs, vmsg{raw: r})
	}
	return nil
}

func (d *viewDoc) applyChanges(raw json.RawMessage) error {
	var c viewChanges
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("loadtest: changes: %w", err)
	}
	if c.View != nil {
		// The whole view, current as of this frame: the rest is redundant.
		return d.setView(c.View)
	}
	if c.AllMessages != nil {
		d.msgs = d.msgs[:0]
		for _, r := range c.AllMessages {
			d.msgs = append(d.msgs, vmsg{raw: r})
		}
	}
	for _, mc := range c.Messages {
		switch {
		case mc.Op == "append" && mc.Text != nil && mc.Index >= 0 && mc.Index < len(d.msgs):
			d.msgs[mc.Index].extra = append(d.msgs[mc.Index].extra, *mc.Text...)
		case mc.Op == "replace" && mc.Index >= 0 && mc.Index < len(d.msgs):
			d.msgs[mc.Index] = vmsg{raw: mc.Message}
		case mc.Op == "add" && mc.Index == len(d.msgs):
			d.msgs = append(d.msgs, vmsg{raw: mc.Message})
		default:
			return fmt.Errorf("loadtest: message change %q at %d of %d", mc.Op, mc.Index, len(d.msgs))
		}
	}
	if c.State != nil {
		if err := d.state.Set(c.State); err != nil {
			return fmt.Errorf("loadtest: state: %w", err)
		}
	} else {
		for _, ops := range c.StateOps {
			// The codec parses a patch only inside an event.
			ev := append([]byte(`{"type":"STATE_DELTA","delta":`), ops...)
			ev = append(ev, '}')
			if err := d.dec.Decode(ev, &d.ev); err != nil {
				return fmt.Errorf("loadtest: state ops: %w", err)
			}
			if err := d.state.Apply(d.ev.Patch); err != nil {
				return fmt.Errorf("loadtest: state ops: %w", err)
			}
		}
	}
	if c.Warnings != nil {
		d.other["warnings"] = c.Warnings
	}
	for _, m := range [...]struct {
		k string
		v json.RawMessage
	}{{"status", c.Status}, {"runs", c.Runs}, {"steps", c.Steps}, {"subagents", c.Subagents}, {"error", c.Error}} {
		if m.v != nil {
			d.other[m.k] = m.v
		}
	}
	return nil
}

// appendJSON appends the held view document (the AppendView shape).
func (d *viewDoc) appendJSON(dst []byte) ([]byte, error) {
	if !d.have {
		return nil, errors.New("loadtest: no view held")
	}
	m := make(map[string]json.RawMessage, len(d.other)+3)
	for k, v := range d.other {
		m[k] = v
	}
	m["seq"] = strconv.AppendUint(nil, d.seq, 10)
	m["state"] = d.state.AppendJSON(nil)
	msgs := make([]json.RawMessage, len(d.msgs))
	for i, vm := range d.msgs {
		if len(vm.extra) == 0 {
			msgs[i] = vm.raw
			continue
		}
		var mm map[string]json.RawMessage
		if err := json.Unmarshal(vm.raw, &mm); err != nil {
			return nil, err
		}
		var content string
		if err := json.Unmarshal(mm["content"], &content); err != nil {
			return nil, fmt.Errorf("loadtest: append to message %d without string content", i)
		}
		mm["content"], _ = json.Marshal(content + string(vm.extra))
		msgs[i], _ = json.Marshal(mm)
	}
	m["messages"], _ = json.Marshal(msgs)
	b, err := json.Marshal(m)
	return append(dst, b...), err
}
