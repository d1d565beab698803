package reducer

import (
	"encoding/base64"
	"fmt"
	"strings"
	"unicode/utf8"
)

// A checkpoint's members other than the messages and the state go through
// encoding/json, which writes the bytes of a string that is not valid
// UTF-8 as U+FFFD and reads an escaped lone surrogate the same way. The ids
// and texts in them come from events as the codec decodes them, and an
// escaped lone surrogate ("m\ud800": valid JSON, and a valid JavaScript
// string) decodes to such bytes (WTF-8). So those strings are written in a
// form JSON keeps: ckMark and the base64 of their bytes. Every other
// string, nearly all of them, is written as it is; a string that itself
// begins with ckMark is marked too, so that reading is unambiguous.
const ckMark = "\x00"

func ckEscape(s string) (string, error) {
	if utf8.ValidString(s) && !strings.HasPrefix(s, ckMark) {
		return s, nil
	}
	return ckMark + base64.RawStdEncoding.EncodeToString([]byte(s)), nil
}

func ckUnescape(s string) (string, error) {
	if !strings.HasPrefix(s, ckMark) {
		return s, nil
	}
	b, err := base64.RawStdEncoding.DecodeString(s[len(ckMark):])
	if err != nil {
		return "", fmt.Errorf("%w: a marked string is not base64: %v", ErrCheckpoint, err)
	}
	return string(b), nil
}

// mapStrings replaces every string of c that goes through encoding/json
// with f's result. It changes nothing it shares with the thread: a slice
// or map in which a string changes is copied first, and a *string is
// replaced, not written through. Unchanged, it allocates nothing.
func (c *ckpt) mapStrings(f func(string) (string, error)) error {
	w := ckWalker{f: f}
	w.str(&c.ThreadID)
	w.str(&c.Rejection)
	for i := range c.Runs {
		r := &c.Runs[i]
		w.str(&r.ThreadID)
		w.str(&r.RunID)
		w.ptr(&r.ParentRunID)
		w.str(&r.ProtocolVersion)
		w.ptr(&r.ErrMessage)
		w.ptr(&r.ErrCode)
		w.str(&r.RejectCode)
		w.str(&r.RejectReason)
	}
	for i := range c.Subagents {
		s := &c.Subagents[i]
		w.str(&s.ID)
		w.str(&s.Name)
		w.ptr(&s.Description)
		w.ptr(&s.ParentSub)
		w.ptr(&s.ParentToolCall)
		w.ptr(&s.ParentMessage)
		w.str(&s.ErrMessage)
		w.ptr(&s.ErrCode)
	}
	m := &c.Machine
	for _, ss := range []*[]string{&m.OpenText, &m.OpenTool, &m.OpenSpan, &m.OpenReason, &m.Closed, &m.Calls, &m.Answered} {
		w.slice(ss)
	}
	for _, o := range []*map[string]ckOwner{&m.OwnText, &m.OwnTool, &m.OwnActivity, &m.OwnReason, &m.OwnSpan} {
		w.owners(o)
	}
	for i := range m.Steps {
		w.str(&m.Steps[i].Owner.ID)
		w.str(&m.Steps[i].Name)
	}
	for i := range m.Lanes {
		l := &m.Lanes[i]
		w.str(&l.Owner.ID)
		w.str(&l.ID)
		w.str(&l.Tag.ID)
		w.str(&l.Role)
		w.ptr(&l.Name)
		w.ptr(&l.Parent)
	}
	w.str(&m.ThinkSpan)
	w.str(&m.ThinkMsg)
	return w.err
}

// ckWalker applies f to strings, keeping its first error.
type ckWalker struct {
	f   func(string) (string, error)
	err error
}

// conv returns f(s) and whether it differs from s.
func (w *ckWalker) conv(s string) (string, bool) {
	if w.err != nil {
		return s, false
	}
	out, err := w.f(s)
	if err != nil {
		w.err = err
		return s, false
	}
	return out, out != s
}

func (w *ckWalker) str(p *string) {
	if s, changed := w.conv(*p); changed {
		*p = s
	}
}

func (w *ckWalker) ptr(p **string) {
	if *p == nil {
		return
	}
	if s, changed := w.conv(**p); changed {
		v := s // allocated only here
		*p = &v
	}
}

func (w *ckWalker) slice(p *[]string) {
	copied := false
	for i, s := range *p {
		out, changed := w.conv(s)
		if !changed {
			continue
		}
		if !copied {
			*p, copied = append([]string(nil), *p...), true
		}
		(*p)[i] = out
	}
}

func (w *ckWalker) owners(p *map[string]ckOwner) {
	var out map[string]ckOwner
	for k, o := range *p {
		nk, kc := w.conv(k)
		nid, ic := w.conv(o.ID)
		if (kc || ic) && out == nil {
			out = make(map[string]ckOwner, len(*p))
			for k2, o2 := range *p {
				out[k2] = o2
			}
		}
		if out != nil {
			delete(out, k)
			o.ID = nid
			out[nk] = o
		}
	}
	if out != nil {
		*p = out
	}
}
