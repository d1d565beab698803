package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/history"
	"github.com/threadcast/threadcast/jsondoc"
	"github.com/threadcast/threadcast/reducer"
	"github.com/threadcast/threadcast/wire"
)

// StreamCheck is the harness's own verdict, independent of the load
// test's bookkeeping: the event stream as the cluster stored it, read back
// and reduced offline per thread, against every thread's REST view.
type StreamCheck struct {
	Messages   int `json:"messages"` // stored messages read back
	Events     int `json:"events"`
	Threads    int `json:"threads"`
	Matching   int `json:"matching"`   // REST view and seq equal the offline reduction's
	Mismatched int `json:"mismatched"` // a view or seq differs, or no view
	// DuplicateMessages counts messages of a thread whose payload equals an
	// earlier one's: an event stored twice (the SDK's retries carry the
	// same Nats-Msg-Id, which the stream de-duplicates).
	DuplicateMessages int      `json:"duplicateMessages"`
	Failures          []string `json:"failures,omitempty"`
}

func (s *StreamCheck) fail(format string, args ...any) {
	s.Mismatched++
	if len(s.Failures) < 20 {
		s.Failures = append(s.Failures, fmt.Sprintf(format, args...))
	}
}

type threadKey struct{ tenant, thread string }

type storedThread struct {
	th      *reducer.Thread
	lastSeq uint64
	seen    map[uint64]bool // payload hashes
}

// checkStream reads the whole event stream, folds every thread's events as
// ingest does (history.FoldStored), and compares each fold with the REST
// view a fanout serves for it (seq and document), waiting up to wait for
// a view to reach its last stored seq.
func checkStream(ctx context.Context, c *cluster, wait time.Duration, logf func(string, ...any)) (*StreamCheck, error) {
	// The cluster may still be settling from the last fault (a JetStream
	// API without a leader answers "no responders"): read again until the
	// stream reads whole.
	var threads map[threadKey]*storedThread
	var res *StreamCheck
	var err error
	for deadline := time.Now().Add(90 * time.Second); ; {
		if res, threads, err = readStream(ctx, c); err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		logf("stream read failed, again in 1 s: %v", err)
		time.Sleep(time.Second)
	}
	if err != nil {
		return nil, err
	}
	return res, compareViews(ctx, c, res, threads, wait)
}

// readStream reads the event stream from its first message to the last
// one it had when the read began, folding every thread's events.
func readStream(ctx context.Context, c *cluster) (*StreamCheck, map[threadKey]*storedThread, error) {
	nc, err := c.connect(1, "chaos-reader")
	if err != nil {
		return nil, nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	st, err := js.Stream(ctx, wire.DefaultStream)
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: stream info: %w", err)
	}
	last := st.CachedInfo().State.LastSeq
	// An ephemeral pull consumer of its own, as TestClusterFaults reads
	// the stream (pipeline/cluster_test.go).
	cons, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy, InactiveThreshold: time.Minute})
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: reader consumer: %w", err)
	}
	res := &StreamCheck{}
	threads := map[threadKey]*storedThread{}
	var dec codec.Decoder
	var ev codec.Event
	for done := last == 0; !done; {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, nil, fmt.Errorf("chaos: read stream: fetch after %d messages: %w", res.Messages, err)
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			meta, err := msg.Metadata()
			if err != nil {
				return nil, nil, err
			}
			seq := meta.Sequence.Stream
			if seq >= last {
				done = true
			}
			_, tenant, tok, err := wire.ParseStoredSubject(msg.Subject())
			if err != nil {
				continue
			}
			id, err := wire.DecodeThread(tok)
			if err != nil {
				continue
			}
			k := threadKey{tenant, id}
			t := threads[k]
			if t == nil {
				t = &storedThread{th: reducer.NewThread(id), seen: map[uint64]bool{}}
				threads[k] = t
			}
			res.Messages++
			h := fnv.New64a()
			h.Write(msg.Data())
			if t.seen[h.Sum64()] {
				res.DuplicateMessages++
			}
			t.seen[h.Sum64()] = true
			// The SDK's batches are JSON lines, one compact event each.
			for _, line := range bytes.Split(msg.Data(), []byte("\n")) {
				if len(bytes.TrimSpace(line)) == 0 {
					continue
				}
				res.Events++
				derr := dec.Decode(bytes.Clone(line), &ev)
				history.FoldStored(t.th, id, seq, &ev, derr, dec.Warnings())
			}
			t.lastSeq = seq
		}
		if err := batch.Error(); err != nil {
			return nil, nil, fmt.Errorf("chaos: read stream: batch after %d messages: %w", res.Messages, err)
		}
		if n == 0 && !done {
			return nil, nil, fmt.Errorf("chaos: read stream: nothing more before seq %d", last)
		}
	}
	res.Threads = len(threads)
	return res, threads, nil
}

// compareViews compares each thread's offline fold with the REST view a
// fanout serves for it, waiting up to wait for the view to reach the
// thread's last stored seq.
func compareViews(ctx context.Context, c *cluster, res *StreamCheck, threads map[threadKey]*storedThread, wait time.Duration) error {
	var err error
	keys := make([]threadKey, 0, len(threads))
	for k := range threads {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].thread < keys[j].thread })
	tokens := map[string]string{}
	bases := strings.Split(c.fanoutURLs(), ",")
	for i, k := range keys {
		t := threads[k]
		tok, ok := tokens[k.tenant]
		if !ok {
			if tok, err = auth.Mint([]byte(c.authKey), auth.Claims{Tenant: k.tenant, Expiry: time.Now().Add(time.Hour).Unix()}); err != nil {
				return err
			}
			tokens[k.tenant] = tok
		}
		want := t.th.AppendView(nil)
		deadline := time.Now().Add(wait)
		for {
			seq, view, err := restView(ctx, c.client, bases[i%len(bases)], k.thread, tok)
			switch {
			case err == nil && seq == t.lastSeq:
				if eq, err := jsondoc.Equal(view, want); err != nil || !eq {
					res.fail("%s/%s: REST view (seq %d) differs from the offline reduction of the stored stream", k.tenant, k.thread, seq)
				} else {
					res.Matching++
				}
			case time.Now().Before(deadline) && ctx.Err() == nil:
				time.Sleep(200 * time.Millisecond)
				continue
			case err != nil:
				res.fail("%s/%s: %v", k.tenant, k.thread, err)
			default:
				res.fail("%s/%s: REST view at seq %d, the stream's last event of the thread is %d", k.tenant, k.thread, seq, t.lastSeq)
			}
			break
		}
	}
	return nil
}

func restView(ctx context.Context, client *http.Client, base, thread, token string) (uint64, json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/threads/"+url.PathEscape(thread), nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, res.Body)
		return 0, nil, fmt.Errorf("GET %s: %s", req.URL.Path, res.Status)
	}
	var v struct {
		Seq  uint64          `json:"seq"`
		View json.RawMessage `json:"view"`
	}
	if err := json.NewDecoder(res.Body).Decode(&v); err != nil {
		return 0, nil, err
	}
	return v.Seq, v.View, nil
}
