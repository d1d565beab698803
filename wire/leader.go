package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// StoredMsg is a message as a stream stores it.
type StoredMsg struct {
	Subject string
	Seq     uint64
	Header  nats.Header // nil: none
	Data    []byte
}

// ErrNoStoredMsg is returned by LeaderLast when the stream holds no message
// on the subject.
var ErrNoStoredMsg = errors.New("wire: no stored message on the subject")

// LeaderReadTimeout bounds a LeaderLast whose context has no deadline (as
// JetStream clients bound their own API requests).
const LeaderReadTimeout = 5 * time.Second

// leaderAttemptTimeout bounds one request of a LeaderLast. A request in
// flight when the stream's leader goes away can go unanswered: the old
// leader never replies, and the new one never saw it. An unanswered
// request is sent again, until the read's own deadline, so a failover costs
// the read about this long rather than the whole deadline.
const leaderAttemptTimeout = time.Second

// jsNoMessageFound is JetStream's error code for a get that matched nothing
// (JSNoMessageFoundErr).
const jsNoMessageFound = 10037

// LeaderLast reads the last message on subject in stream through the
// STREAM.MSG.GET API of api (the JetStream API prefix with its trailing
// dot, "$JS.API." by default), which only the stream's leader answers. Not
// through a direct get (what a KV bucket's Get and a stream's
// GetLastMsgForSubject use when the stream allows them): any replica
// answers those, a follower that lags behind the leader included — a
// server back from a restart answers them once 90 % synchronized, a
// partitioned one keeps answering from what it had — and the local replica
// is preferred. What a reader decides from the last message (a checkpoint
// to reload, the revision a conditional write expects, whether a cursor is
// real) is only right for the leader's.
func LeaderLast(ctx context.Context, nc *nats.Conn, api, stream, subject string) (*StoredMsg, error) {
	req, err := json.Marshal(struct {
		LastBySubj string `json:"last_by_subj"`
	}{subject})
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, LeaderReadTimeout)
		defer cancel()
	}
	reply, err := leaderRequest(ctx, nc, api+"STREAM.MSG.GET."+stream, req)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Error *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error,omitempty"`
		Message *struct {
			Subject string `json:"subject"`
			Seq     uint64 `json:"seq"`
			Header  []byte `json:"hdrs,omitempty"`
			Data    []byte `json:"data,omitempty"`
		} `json:"message,omitempty"`
	}
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return nil, fmt.Errorf("wire: stream message reply: %w", err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrCode == jsNoMessageFound:
		return nil, ErrNoStoredMsg
	case resp.Error != nil:
		return nil, fmt.Errorf("wire: stream %s: %s (code %d, err_code %d)", stream, resp.Error.Description, resp.Error.Code, resp.Error.ErrCode)
	case resp.Message == nil:
		return nil, errors.New("wire: stream message reply without a message")
	}
	m := &StoredMsg{Subject: resp.Message.Subject, Seq: resp.Message.Seq, Data: resp.Message.Data}
	if len(resp.Message.Header) > 0 {
		if m.Header, err = nats.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return nil, fmt.Errorf("wire: stream message headers: %w", err)
		}
	}
	return m, nil
}

// leaderRequest sends req to subj and returns the reply, sending it again
// each time an attempt goes unanswered for leaderAttemptTimeout (the
// request is a read: answering it twice changes nothing), until ctx ends.
// Any other failure (no responders: no JetStream API at all) is returned
// at once.
func leaderRequest(ctx context.Context, nc *nats.Conn, subj string, req []byte) (*nats.Msg, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, leaderAttemptTimeout)
		reply, err := nc.RequestWithContext(actx, subj, req)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return reply, err
		}
	}
}
