package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/threadcast/threadcast/wire"
)

// hostileIDs are thread ids that would change a subject's meaning if used
// raw, plus edge cases of the encoding itself.
var hostileIDs = []string{
	".", "..", "a.b", "*", ">", "a.>", "a.*.b", " ", "a b", "\t", "\r\n",
	"=", "=abc", "==", "ü", "日本語", "\x00", "a/b", "a\\b",
	"$JS.API", "_INBOX.x", strings.Repeat("x", wire.MaxThreadIDLen), "-", "_",
}

// refusedIDs are ids no thread may have (wire.ValidThread): the empty id
// and bytes that are not UTF-8.
var refusedIDs = []string{"", "\xff\xfe", "ok\xc3"}

// TestPartitionMatchesServer publishes through a stream with the partition
// subject transform and checks that the stored subject's partition equals
// Partition for every id, hostile ones included.
func TestPartitionMatchesServer(t *testing.T) {
	checkNoGoroutineLeak(t)
	s := runServer(t)
	nc := connect(t, s)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := DefaultConfig()
	cfg.Partitions = 7
	stream, _, err := EnsureStreams(ctx, js, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Idempotent: a second call with the same config succeeds.
	if _, _, err := EnsureStreams(ctx, js, &cfg); err != nil {
		t.Fatalf("second EnsureStreams: %v", err)
	}
	ids := append([]string{}, hostileIDs...)
	for i := range 200 {
		ids = append(ids, fmt.Sprintf("thread-%d", i))
	}
	tenants := []string{"acme", "t0", "b-c_d"}
	type key struct{ tenant, tok string }
	want := map[key]int{}
	for _, tenant := range tenants {
		for _, id := range ids {
			subj, err := wire.EventSubject(tenant, id)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := js.Publish(ctx, subj, []byte("{}")); err != nil {
				t.Fatalf("publish %q: %v", subj, err)
			}
			want[key{tenant, wire.EncodeThread(id)}] = wire.Partition(tenant, wire.EncodeThread(id), cfg.Partitions)
		}
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for seen < len(want) {
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("after %d: %v", seen, err)
		}
		p, tenant, tok, err := wire.ParseStoredSubject(msg.Subject())
		if err != nil {
			t.Fatalf("stored subject %q: %v", msg.Subject(), err)
		}
		if w, ok := want[key{tenant, tok}]; !ok || w != p {
			t.Errorf("%q: server partition %d, Partition() = %d (known %v)", msg.Subject(), p, w, ok)
		}
		seen++
	}
	// Changing P on a live stream is refused.
	cfg2 := cfg
	cfg2.Partitions = 8
	if _, _, err := EnsureStreams(ctx, js, &cfg2); !errors.Is(err, ErrPartitionsChanged) {
		t.Errorf("EnsureStreams with other P: %v, want ErrPartitionsChanged", err)
	}
}

// TestHostileIDsIsolated: a subscriber to one thread's view subject never
// receives another thread's message, whatever the ids.
func TestHostileIDsIsolated(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	subs := make([]*nats.Subscription, len(hostileIDs))
	for i, id := range hostileIDs {
		sub, err := nc.SubscribeSync(wire.ViewSubject("acme", wire.EncodeThread(id)))
		if err != nil {
			t.Fatalf("subscribe %q: %v", id, err)
		}
		subs[i] = sub
	}
	for i, id := range hostileIDs {
		if err := nc.Publish(wire.ViewSubject("acme", wire.EncodeThread(id)), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for i, sub := range subs {
		msg, err := sub.NextMsg(5 * time.Second)
		if err != nil || string(msg.Data) != fmt.Sprint(i) {
			t.Fatalf("thread %q: got %v, %v", hostileIDs[i], msg, err)
		}
		if extra, err := sub.NextMsg(20 * time.Millisecond); err == nil {
			t.Errorf("thread %q also received %q", hostileIDs[i], extra.Data)
		}
	}
}
