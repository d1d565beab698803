package demo

import (
	"context"
	"sync"

	"github.com/threadcast/threadcast/agent"
)

// AgentPublisher adapts the publisher SDK, the same one a real agent uses,
// to Publisher. Publish returns at once any refusal of the SDK (invalid
// event, overflow, closed). Events the SDK accepted resolve later; when one
// of them fails for good, the failure is returned by the next Publish for the
// same thread, which is when the agent can do something about it. (A failure
// of a thread's very last events is therefore never reported: the agent has
// moved on.) The caller still owns p and closes it after Run returns.
func AgentPublisher(p *agent.Publisher) Publisher {
	return &sdkPublisher{p: p, failed: make(map[threadKey]error)}
}

type threadKey struct{ tenant, thread string }

type sdkPublisher struct {
	p  *agent.Publisher
	mu sync.Mutex
	// inflight holds the futures of accepted events in publish order; they
	// are reaped from the front as they resolve, so it is bounded by the
	// SDK's own MaxPending. failed keeps a thread's first unreported failure.
	inflight []pendingEvent
	failed   map[threadKey]error
}

type pendingEvent struct {
	key threadKey
	fut *agent.Future
}

func (s *sdkPublisher) Publish(ctx context.Context, tenant, thread string, event []byte) error {
	fut, err := s.p.Publish(ctx, tenant, thread, event)
	k := threadKey{tenant, thread}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reap()
	if err == nil {
		s.inflight = append(s.inflight, pendingEvent{k, fut})
	}
	if ferr, ok := s.failed[k]; ok {
		delete(s.failed, k)
		return ferr
	}
	return err
}

// reap drops the resolved futures at the front of inflight, remembering the
// first failure of each thread. Acks arrive roughly in publish order, so
// stopping at the first unresolved future leaves little behind.
func (s *sdkPublisher) reap() {
	n := 0
	for _, pe := range s.inflight {
		select {
		case <-pe.fut.Done():
		default:
			s.inflight = append(s.inflight[:0], s.inflight[n:]...)
			return
		}
		if _, err := pe.fut.Result(); err != nil {
			if _, ok := s.failed[pe.key]; !ok {
				s.failed[pe.key] = err
			}
		}
		n++
	}
	s.inflight = s.inflight[:0]
}
