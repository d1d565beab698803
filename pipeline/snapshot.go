package pipeline

import (
	"context"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/threadcast/threadcast/subject"
)

// Snapshot error kinds (Tc-Error-Kind of a failed snapshot reply).
const (
	SnapErrBadRequest = "bad-request"     // the subject does not name a valid thread
	SnapErrPartition  = "wrong-partition" // p is not the thread's partition
	SnapErrBusy       = "busy"            // the shard's request queue is full; retry
	SnapErrStore      = "store"           // the checkpoint could not be read
)

// snapshot answers one request on tc.snap.<p>.<tenant>.<token> (frame.go).
// It runs on the shard goroutine between batches, so the reply's seq is the
// seq of the thread's last published frame.
func (s *shard) snapshot(ctx context.Context, req *nats.Msg) {
	p, tenant, token, err := subject.ParseSnapSubject(req.Subject)
	if err != nil {
		s.m.Snapshots.WithLabelValues("error").Inc()
		snapError(req, SnapErrBadRequest, "malformed snapshot subject")
		return
	}
	part := s.parts[p]
	if part == nil || Partition(tenant, token, s.cfg.Partitions) != p {
		s.m.Snapshots.WithLabelValues("error").Inc()
		snapError(req, SnapErrPartition, "thread is in partition "+strconv.Itoa(Partition(tenant, token, s.cfg.Partitions)))
		return
	}
	k := threadKey{tenant, token}
	t, result := s.threads[k], "hot"
	if t == nil {
		id, _ := DecodeThread(token)
		t = &hotThread{key: k, id: id, part: part}
		if err := s.load(ctx, t); err != nil {
			s.m.Snapshots.WithLabelValues("error").Inc()
			snapError(req, SnapErrStore, err.Error())
			return
		}
		// Not kept hot: a snapshot of a cold thread should not evict a
		// thread that is being written to.
		result = "cold"
	}
	found := t.th.Seq() > 0
	if !found {
		result = "miss"
	}
	s.m.Snapshots.WithLabelValues(result).Inc()
	seq := t.th.Seq()
	b := s.buf[:0]
	b = append(b, `{"tenant":"`...)
	b = append(b, tenant...)
	b = append(b, `","thread":`...)
	b = appendJSONString(b, t.id)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"status":"`...)
	b = append(b, t.th.Status().String()...)
	b = append(b, `","found":`...)
	b = strconv.AppendBool(b, found)
	b = append(b, `,"view":`...)
	b = appendThreadView(b, t.th)
	b = append(b, `,"events":`...)
	b = appendSnapshotEvents(b, t.th)
	b = append(b, '}')
	h := nats.Header{HeaderSeq: {strconv.FormatUint(seq, 10)}}
	_ = req.RespondMsg(&nats.Msg{Data: b, Header: h})
	s.buf = b[:0]
}

func snapError(req *nats.Msg, kind, text string) {
	_ = req.RespondMsg(&nats.Msg{Header: nats.Header{HeaderErrorKind: {kind}, HeaderError: {truncateN(text, 256)}}})
}
