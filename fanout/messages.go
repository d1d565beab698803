package fanout

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"unicode/utf8"

	"github.com/threadcast/threadcast/wire"
)

// ErrNoMessage is returned (wrapped) by a page request whose before names
// no message of the thread: 404 message_not_found.
var ErrNoMessage = errors.New("fanout: no such message in the thread")

// maxMessageIDLen bounds ?before=, a message id from the URL.
const maxMessageIDLen = 1024

// windowParam reads ?window=N: 0 when absent, else an integer from 1 to
// MaxWindow; anything else is refused with 400 bad_window.
func (s *Server) windowParam(w http.ResponseWriter, r *http.Request) (int, bool) {
	v := r.URL.Query().Get("window")
	if v == "" {
		return 0, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > s.cfg.MaxWindow {
		s.denyDetail(w, http.StatusBadRequest, "bad_window", "window must be an integer from 1 to "+strconv.Itoa(s.cfg.MaxWindow))
		return 0, false
	}
	return n, true
}

// threadMessages serves GET /v1/threads/{thread}/messages?before=<id>&limit=K:
// the K messages before the message before (without it, the newest K),
// oldest first, as AG-UI message objects, with the seq they are consistent
// with (Tc-Seq and "seq") and the cursor of the next older page ("before",
// absent on the page that holds the first message):
//
//	{"thread":"..","seq":S,"messages":[..],"first":i,"end":e,"total":n,"before":"<id>"}
//
// where the messages are the thread's [i, e) of n. A before that names no
// message is 404 message_not_found; a thread never seen, 404 not_found.
func (s *Server) threadMessages(w http.ResponseWriter, r *http.Request) {
	c, thread, ok := s.authorizeThread(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	limit, ok := s.pageLimit(w, q, s.cfg.DefaultPageLimit, s.cfg.MaxPageLimit)
	if !ok {
		return
	}
	before := q.Get("before")
	if len(before) > maxMessageIDLen || !utf8.ValidString(before) {
		s.denyDetail(w, http.StatusBadRequest, "bad_before", "before must be a message id of at most "+strconv.Itoa(maxMessageIDLen)+" bytes of UTF-8")
		return
	}
	p, err := s.hub.page(r.Context(), c.Tenant, wire.EncodeThread(thread), before, limit)
	switch {
	case errors.Is(err, ErrNoMessage):
		s.deny(w, http.StatusNotFound, "message_not_found")
		return
	case err != nil:
		s.log.Warn("fanout: messages request failed", "tenant", c.Tenant, "err", err)
		s.denyUnavailable(w, err)
		return
	case p.Seq == 0:
		s.deny(w, http.StatusNotFound, "not_found")
		return
	}
	b := append([]byte(`{"thread":`), mustJSON(thread)...)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, p.Seq, 10)
	b = append(b, `,"messages":`...)
	b = append(b, encodeArray(p.Messages)...)
	b = append(b, `,"first":`...)
	b = strconv.AppendInt(b, int64(p.First), 10)
	b = append(b, `,"end":`...)
	b = strconv.AppendInt(b, int64(p.End), 10)
	b = append(b, `,"total":`...)
	b = strconv.AppendInt(b, int64(p.Total), 10)
	if p.Before != "" {
		b = append(b, `,"before":`...)
		b = append(b, mustJSON(p.Before)...)
	}
	b = append(b, "}\n"...)
	w.Header().Set(wire.HeaderSeq, strconv.FormatUint(p.Seq, 10))
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// pageLimit reads a paged endpoint's ?limit=: def when absent, else an
// integer from 1 to most; anything else is answered 400 bad_limit (false).
func (s *Server) pageLimit(w http.ResponseWriter, q url.Values, def, most int) (int, bool) {
	v := q.Get("limit")
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		s.denyDetail(w, http.StatusBadRequest, "bad_limit", "limit must be an integer from 1 to "+strconv.Itoa(most))
		return 0, false
	}
	return n, true
}
