// Package viewchange encodes the change documents of Threadcast's `view`
// subscriber mode: what changed in a thread's view document between two
// frames, in a form a browser applies without knowing anything of AG-UI.
// The dashboard (web/static/viewdoc.js) is its reference consumer; the
// pipeline puts the document in a frame's "changes" member and the fanout
// forwards it as {"type":"changes","seq":S,"prev":P,"changes":<document>}.
//
// # The document
//
// A change document brings the view document at seq P (the previous frame)
// to the view at "seq". Its members, all present unless said otherwise:
//
//	seq        the seq the view reflects after applying the document
//	count      the number of messages after applying (a consumer whose
//	           list has another length has lost track and resynchronises)
//	status     the thread's status (reducer.Status)
//	warnings   the thread's warning count
//	error      the rejection reason, or null
//	messages   optional: the whole message list, replacing the held one
//	           (insertions in the middle, removals, MESSAGES_SNAPSHOT)
//	changed    optional (absent when messages is present): changed messages
//	           by increasing index, each either
//	             {"index":i,"append":"text"}  string content grew by text
//	             {"index":i,"message":{...}}  message i is this (i == the
//	                                          list's length: a new message)
//	state      optional: the whole new state (any JSON value)
//	statePatch optional (absent when state is present): RFC 6902 patches,
//	           an array of patch arrays, to apply in order
//	runs, steps, subagents
//	           optional: the view's arrays of those names, whole, when any of
//	           them changed
//
// A consumer that cannot apply a document (a patch that does not apply, a
// count that does not match, a seq gap) fetches the view again; the
// document never has to be trusted further than it can be checked.
//
// # Concurrency
//
// Append reads the Thread; it must be called by the Thread's owner, like
// every method of reducer.Thread. It keeps nothing.
package viewchange

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/threadcast/threadcast/reducer"
)

// Append appends the change document for c, which t.Flush returned, to dst
// and returns the extended slice. c is read during the call only.
func Append(dst []byte, t *reducer.Thread, c *reducer.Changes) []byte {
	dst = append(dst, `{"seq":`...)
	dst = strconv.AppendUint(dst, t.Seq(), 10)
	dst = append(dst, `,"count":`...)
	dst = strconv.AppendInt(dst, int64(t.MessageCount()), 10)
	dst = append(dst, `,"status":"`...)
	dst = append(dst, t.Status().String()...)
	dst = append(dst, `","warnings":`...)
	dst = strconv.AppendUint(dst, t.Warnings(), 10)
	dst = append(dst, `,"error":`...)
	if r := t.Rejection(); r != "" {
		dst = appendJSON(dst, r)
	} else {
		dst = append(dst, "null"...)
	}
	switch {
	case c.Structural:
		dst = append(dst, `,"messages":`...)
		dst = t.AppendMessages(dst)
	case len(c.Messages) > 0:
		// The journal lists messages in the order they were first touched;
		// consumers apply by increasing index, so that a new message is
		// always put at the end of the list.
		ms := slices.SortedFunc(slices.Values(c.Messages), func(a, b reducer.MessageChange) int { return cmp.Compare(a.Index, b.Index) })
		dst = append(dst, `,"changed":[`...)
		for i, m := range ms {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"index":`...)
			dst = strconv.AppendInt(dst, int64(m.Index), 10)
			if m.Kind == reducer.Appended {
				dst = append(dst, `,"append":`...)
				dst = t.AppendTextFrom(dst, m.Index, m.TextFrom)
			} else {
				dst = append(dst, `,"message":`...)
				dst = t.AppendMessageAt(dst, m.Index)
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	switch c.State {
	case reducer.StateReplaced:
		dst = append(dst, `,"state":`...)
		dst = t.AppendState(dst)
	case reducer.StateDelta:
		dst = append(dst, `,"statePatch":[`...)
		for i, p := range c.StateOps {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, p...)
		}
		dst = append(dst, ']')
	}
	if c.Runs {
		dst = appendRuns(dst, t)
	}
	return append(dst, '}')
}

// appendRuns appends the runs, steps and subagents members, cut out of the
// whole view document. That costs O(view) and happens only when one of them
// changed (run and step boundaries, subagent lifecycle), a few times per
// run; the reducer exports no narrower encoder yet.
func appendRuns(dst []byte, t *reducer.Thread) []byte {
	var v struct {
		Runs      json.RawMessage `json:"runs"`
		Steps     json.RawMessage `json:"steps"`
		Subagents json.RawMessage `json:"subagents"`
	}
	if err := json.Unmarshal(t.AppendView(nil), &v); err != nil {
		// AppendView always produces valid JSON; if it ever did not, the
		// document still carries count and status, and a consumer that
		// needs runs refetches the view.
		return dst
	}
	dst = append(dst, `,"runs":`...)
	dst = append(dst, v.Runs...)
	dst = append(dst, `,"steps":`...)
	dst = append(dst, v.Steps...)
	dst = append(dst, `,"subagents":`...)
	return append(dst, v.Subagents...)
}

func appendJSON(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(dst, b...)
}
