package pipeline

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/threadcast/threadcast/wire"
)

// TestDeadLetterStream: EnsureStreams keeps dead letters in a stream with
// the configured, bounded retention (updated in place on a restart with
// other bounds), none when DeadLetters is empty, and Validate refuses an
// unbounded one.
func TestDeadLetterStream(t *testing.T) {
	s := runServer(t)
	js, _ := jetstream.New(connect(t, s))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := DefaultConfig()
	for _, bounds := range []struct {
		age   time.Duration
		bytes int64
	}{{time.Hour, 1 << 20}, {2 * time.Hour, 2 << 20}} {
		cfg.DeadLetterMaxAge, cfg.DeadLetterMaxBytes = bounds.age, bounds.bytes
		if _, _, err := EnsureStreams(ctx, js, &cfg); err != nil {
			t.Fatal(err)
		}
		st, err := js.Stream(ctx, wire.DefaultDeadLetters)
		if err != nil {
			t.Fatal(err)
		}
		c := st.CachedInfo().Config
		if c.MaxAge != bounds.age || c.MaxBytes != bounds.bytes || len(c.Subjects) != 1 || c.Subjects[0] != "dlq.>" || c.Discard != jetstream.DiscardOld {
			t.Fatalf("dead-letter stream %+v, want %v/%d on dlq.>", c, bounds.age, bounds.bytes)
		}
	}
	// DeadLetters "": no dead-letter stream (a fresh server).
	js2, _ := jetstream.New(connect(t, runServer(t)))
	none := DefaultConfig()
	none.DeadLetters = ""
	if _, _, err := EnsureStreams(ctx, js2, &none); err != nil {
		t.Fatal(err)
	}
	if _, err := js2.Stream(ctx, wire.DefaultDeadLetters); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("dead-letter stream with DeadLetters empty: %v", err)
	}
	for _, bad := range []func(c *Config){
		func(c *Config) { c.DeadLetterMaxAge = 0 },
		func(c *Config) { c.DeadLetterMaxBytes = -1 },
	} {
		c := DefaultConfig()
		bad(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("Validate of unbounded dead letters: %v", err)
		}
	}
}
