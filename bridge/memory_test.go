package bridge_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/threadcast/threadcast/bridge"
	"github.com/threadcast/threadcast/wire"
)

// eventBody is a JSONL body of size bytes generated as it is read (so the
// client holds none of it): TEXT_MESSAGE_CONTENT events of about eventSize
// bytes each.
type eventBody struct {
	left, eventSize int
	pending         []byte
	i               int
}

func (b *eventBody) Read(p []byte) (int, error) {
	if len(b.pending) == 0 {
		if b.left <= 0 {
			return 0, io.EOF
		}
		b.i++
		head := fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"%d `, b.i)
		pad := max(1, b.eventSize-len(head)-3)
		b.pending = append(append(append(b.pending[:0], head...), strings.Repeat("x", pad)...), "\"}\n"...)
		b.left -= len(b.pending)
	}
	n := copy(p, b.pending)
	b.pending = b.pending[n:]
	return n, nil
}

// heapPeak samples the live heap every millisecond until stop is called,
// and returns the peak seen.
func heapPeak() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	done := make(chan struct{})
	res := make(chan uint64)
	go func() {
		var peak uint64
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-done:
				res <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 { close(done); return <-res }
}

// concurrentBodies posts n bodies of size bytes at once, each to its own
// thread, and returns the live heap's peak above the baseline taken before.
func concurrentBodies(t *testing.T, env *bridgeEnv, n, size, eventSize int, tag string) uint64 {
	t.Helper()
	runtime.GC()
	base := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(base)
	stop := heapPeak()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/v1/ingest/acme/%s-%d", env.http.URL, tag, i),
				&eventBody{left: size, eventSize: eventSize})
			req.Header.Set("Authorization", bridgeToken)
			res, err := env.http.Client().Do(req)
			if err != nil {
				errs <- err
				return
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				errs <- fmt.Errorf("status %d: %s", res.StatusCode, body)
			}
		}()
	}
	wg.Wait()
	peak := stop()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return peak - min(peak, base[0].Value.Uint64())
}

// TestBridgeMemoryBounded posts six bodies at once, 8 MiB each and then
// 32 MiB each, with the bridge's window, and 32 MiB each without one (the
// behaviour before the window existed, for comparison in the log). The
// bounded runs' heap growth must stay within the documented formula per
// request (2-4 × the largest event + the window), times a generous margin
// for the embedded NATS server's own buffers (it runs in this process and
// holds what it is storing), and must not grow with the bodies' length.
func TestBridgeMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 450 MiB through the bridge")
	}
	const (
		n         = 6
		eventSize = 16 << 10
		maxEvent  = 64 << 10
		window    = 256 << 10
	)
	bounded := func(c *bridge.Config) { c.MaxEventBytes = maxEvent; c.Window = window }
	env := startBridge(t, bounded)
	small := concurrentBodies(t, env, n, 8<<20, eventSize, "small")
	large := concurrentBodies(t, env, n, 32<<20, eventSize, "large")
	if got, want := storedBytes(t, env), uint64(n*(40<<20)); got < want || got > want+want/10 {
		t.Errorf("%d bytes stored, want the bodies' %d and at most 10%% of subjects and headers", got, want)
	}
	open := concurrentBodies(t, startBridge(t, func(c *bridge.Config) { c.MaxEventBytes = maxEvent; c.Window = -1 }),
		n, 32<<20, eventSize, "open")

	perRequest := 4*maxEvent + window + 4<<10
	bound := uint64(n*perRequest)*4 + 64<<20 // ×4, and 64 MiB for the server's write buffers and block cache
	mib := func(v uint64) float64 { return float64(v) / (1 << 20) }
	t.Logf("%d concurrent bodies, heap peak growth: 8 MiB each +%.1f MiB, 32 MiB each +%.1f MiB (window %d KiB; formula %d KiB per request; bound %.0f MiB); 32 MiB each without a window +%.1f MiB",
		n, mib(small), mib(large), window>>10, perRequest>>10, mib(bound), mib(open))
	if large > bound {
		t.Errorf("heap grew by %.1f MiB for %d concurrent 32 MiB bodies, over the bound of %.1f MiB", mib(large), n, mib(bound))
	}
	if large > 2*small+16<<20 {
		t.Errorf("heap growth follows the bodies' length: +%.1f MiB for 8 MiB bodies, +%.1f MiB for 32 MiB ones", mib(small), mib(large))
	}
}

// storedBytes is the size of the event stream as JetStream reports it.
func storedBytes(t *testing.T, env *bridgeEnv) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := env.js.Stream(ctx, wire.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Bytes
}
