package fanout

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/history"
	"github.com/threadcast/threadcast/wire"
)

// viewAtTimeout bounds one time travel request's read of the event log.
const viewAtTimeout = 30 * time.Second

// threadViewAt serves GET /v1/threads/{thread}?at=S: the thread's view as
// it was after event log seq S, folded from the event log (history.ViewAt:
// the cost is the thread's stored events up to S, read with a filter on
// the thread's subject; nothing is cached and nothing changes). The body is
// that of the current view, {"thread","seq","status","view"} plus "at":
// seq is that of the thread's last event at or before S (Tc-Seq too).
// Refused: S not a seq (400 bad_at), S past the thread's last stored
// event (400 at_beyond_end, the detail names it), ?window= with ?at= (400
// bad_at), a thread with no stored event (404 not_found).
func (s *Server) threadViewAt(w http.ResponseWriter, r *http.Request, c auth.Claims, thread string) {
	q := r.URL.Query()
	at, err := strconv.ParseUint(q.Get("at"), 10, 64)
	if err != nil || at == 0 {
		s.denyDetail(w, http.StatusBadRequest, "bad_at", "at must be an event log seq (an integer from 1)")
		return
	}
	if q.Has("window") {
		s.denyDetail(w, http.StatusBadRequest, "bad_at", "at and window cannot be combined")
		return
	}
	js, err := jetstream.New(s.nc)
	if err != nil {
		s.deny(w, http.StatusServiceUnavailable, "unavailable")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), viewAtTimeout)
	defer cancel()
	th, err := history.ViewAt(ctx, js, s.hub.cfg.EventStream, c.Tenant, thread, at)
	var beyond *history.BeyondError
	switch {
	case errors.As(err, &beyond):
		s.denyDetail(w, http.StatusBadRequest, "at_beyond_end",
			"at "+strconv.FormatUint(at, 10)+" is beyond the thread's last stored event, seq "+strconv.FormatUint(beyond.Last, 10))
		return
	case errors.Is(err, history.ErrNoThread):
		s.deny(w, http.StatusNotFound, "not_found")
		return
	case err != nil:
		s.log.Warn("fanout: view at seq failed", "tenant", c.Tenant, "at", at, "err", err)
		s.deny(w, http.StatusServiceUnavailable, "unavailable")
		return
	}
	seq := th.Seq()
	b := append([]byte(`{"thread":`), mustJSON(thread)...)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"at":`...)
	b = strconv.AppendUint(b, at, 10)
	b = append(b, `,"status":`...)
	b = append(b, mustJSON(th.Status().String())...)
	b = append(b, `,"view":`...)
	b = th.AppendView(b)
	b = append(b, "}\n"...)
	w.Header().Set(wire.HeaderSeq, strconv.FormatUint(seq, 10))
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}
