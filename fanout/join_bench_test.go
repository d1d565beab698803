package fanout

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkJoin measures what a late joiner of a long thread costs, whole
// against windowed (?window=50), side by side in one run: the time from
// the request to the end of the join's snapshot (p50 over the joins) and
// the bytes sent before the first live frame (the join's SSE body), for
// threads of 1k, 10k and 100k messages, each on a fresh server. Everything is real: an embedded
// NATS server (its default 1 MiB max payload: the whole join of a 100k
// thread, 11 MB, travels in parts), the ingest, the fanout over HTTP. The
// hub lingers for no time, so every join subscribes anew and asks the
// pipeline; the pipeline answers whole joins of a thread at rest from the
// reply it cached, and encodes every windowed one.
//
//	go test -run '^$' -bench '^BenchmarkJoin$' -benchtime 1x ./fanout
//
// Reported per size: whole_p50_ms, win_p50_ms, whole_join_bytes,
// win_join_bytes.
func BenchmarkJoin(b *testing.B) {
	for _, size := range []int{1000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("msgs=%d", size), func(b *testing.B) {
			ns := startNATS(b)
			const parts = 8
			startIngest(b, ns, parts)
			_, hs := newServer(b, connect(b, ns), func(c *Config) {
				c.Hub.Partitions = parts
				c.Hub.Linger = 0
			})
			js, err := jetstream.New(connect(b, ns))
			if err != nil {
				b.Fatal(err)
			}
			tok := token(b, "acme")
			lt := newStoredThread(b, js, "acme", fmt.Sprintf("bench-%d", size))
			lt.publish(b, lt.gen.Messages(size))
			lt.publish(b, lt.gen.Finish())
			waitApplied(b, hs.URL, tok, lt)
			base := hs.URL + "/v1/threads/" + url.PathEscape(lt.id) + "/events"
			// Windowed joins are cheap: more of them steady their p50
			// on a shared machine.
			const winJoins, wholeJoins = 41, 11
			var whole, win []time.Duration
			var wholeBytes, winBytes int
			for b.Loop() {
				whole, win = whole[:0], win[:0]
				// Windowed joins first, then whole ones: alternated, each
				// windowed join paid for the garbage and the busy
				// connections the 11 MB join before it left (its p50
				// doubled at 100k messages, and with it the ratio to 1k).
				for i := 0; i < winJoins; i++ {
					d, n := timeJoin(b, base+"?window=50", tok)
					win, winBytes = append(win, d), n
				}
				for i := 0; i < wholeJoins; i++ {
					d, n := timeJoin(b, base, tok)
					whole, wholeBytes = append(whole, d), n
				}
			}
			b.ReportMetric(p50ms(whole), "whole_p50_ms")
			b.ReportMetric(p50ms(win), "win_p50_ms")
			b.ReportMetric(float64(wholeBytes), "whole_join_bytes")
			b.ReportMetric(float64(winBytes), "win_join_bytes")
		})
	}
}

// timeJoin opens an agui SSE stream and reads it to the end of the join's
// snapshot (the event whose id is the bare seq); it returns the time that
// took and the body bytes read.
func timeJoin(b *testing.B, u, tok string) (time.Duration, int) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %d", u, resp.StatusCode)
	}
	br := bufio.NewReaderSize(resp.Body, 1<<20)
	n, last := 0, false
	for {
		line, err := br.ReadSlice('\n')
		for err == bufio.ErrBufferFull { // a line longer than the buffer: a large event
			n += len(line)
			line, err = br.ReadSlice('\n')
		}
		if err != nil {
			b.Fatalf("reading the join: %v", err)
		}
		n += len(line)
		s := string(line)
		switch {
		case strings.HasPrefix(s, "id: "):
			last = !strings.HasSuffix(strings.TrimSpace(s), ".snap")
		case s == "\n" && last:
			return time.Since(start), n
		}
	}
}

func p50ms(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2]) / float64(time.Millisecond)
}
