package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/threadcast/threadcast/wire"
)

// ErrPartitionsChanged is returned by EnsureStreams when the stream exists
// with a different partition count: re-partitioning a live stream would split
// threads across partitions and break one-owner-per-thread.
var ErrPartitionsChanged = errors.New("pipeline: stream exists with a different partition count")

// StreamConfig returns the event stream's configuration for cfg.
func StreamConfig(cfg *Config) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        cfg.Stream,
		Description: "Threadcast AG-UI event log",
		Subjects:    []string{wire.EventsWildcard},
		SubjectTransform: &jetstream.SubjectTransformConfig{
			Source:      wire.EventsWildcard,
			Destination: wire.StreamSubjectTransform(cfg.Partitions),
		},
		Retention:  jetstream.LimitsPolicy,
		Storage:    jetstream.FileStorage,
		Replicas:   cfg.Replicas,
		MaxAge:     cfg.MaxAge,
		MaxBytes:   cfg.MaxBytes,
		MaxMsgSize: cfg.MaxMsgSize,
		Duplicates: cfg.Duplicates,
		Discard:    jetstream.DiscardOld,
	}
}

// DeadLetterStreamConfig returns the configuration of the stream that keeps
// the dead letters (every subject under dlq.>, which carry the tenant:
// dlq.<tenant>.<thread>), so that an operator who was not subscribed when
// one was published can still read it (fanout's GET /v1/deadletters,
// tenant-scoped). Retention is bounded by age and bytes, oldest first.
func DeadLetterStreamConfig(cfg *Config) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        cfg.DeadLetters,
		Description: "Threadcast dead letters: rejected input with its reason",
		Subjects:    []string{wire.DLQPrefix + ".>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		MaxAge:      cfg.DeadLetterMaxAge,
		MaxBytes:    cfg.DeadLetterMaxBytes,
		MaxMsgSize:  -1,
		Discard:     jetstream.DiscardOld,
	}
}

// TapStreamConfig returns the configuration of the stream that keeps the
// analytics tap (tapSubjects: the run summaries, or every subject under
// tap.>; tap subjects carry the tenant:
// tap.<tenant>.<TYPE>.<thread>), so that a consumer that was not subscribed
// when a message was published can replay it from a time or a sequence
// (fanout's GET /v1/tap?since=, tenant-scoped, or any NATS consumer with
// access to the stream). Retention is bounded by age and bytes, oldest
// first: a full tap stream drops its oldest messages, never a new one.
func TapStreamConfig(cfg *Config) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        cfg.TapStream,
		Description: "Threadcast analytics tap",
		Subjects:    tapSubjects(cfg.TapKeep),
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		MaxAge:      cfg.TapMaxAge,
		MaxBytes:    cfg.TapMaxBytes,
		MaxMsgSize:  -1,
		Duplicates:  cfg.TapDuplicates,
		Discard:     jetstream.DiscardOld,
	}
}

// tapSubjects are the subjects the tap stream keeps: every tap subject, or
// only the run summaries' (tap.<tenant>.RUN_SUMMARY.<thread>).
func tapSubjects(keep string) []string {
	if keep == TapKeepAll {
		return []string{wire.TapPrefix + ".>"}
	}
	return []string{wire.TapSubject("*", wire.RunSummaryType, "*")}
}

// kvConfig returns the checkpoint bucket's configuration for cfg. History 1:
// only the latest checkpoint of a thread matters.
func kvConfig(cfg *Config) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      cfg.Bucket,
		Description: "Threadcast thread checkpoints (view + stream seq)",
		History:     1,
		MaxBytes:    cfg.KVMaxBytes,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
	}
}

// EnsureStreams creates the event stream, the checkpoint bucket, the
// dead-letter stream (unless Config.DeadLetters is "") and the tap stream
// (when Config.Tap is on and Config.TapStream is not ""), or
// updates them to cfg when they exist (idempotent: safe on every start and
// from several instances at once). It refuses to change the partition count.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, cfg *Config) (jetstream.Stream, jetstream.KeyValue, error) {
	want := StreamConfig(cfg)
	if s, err := js.Stream(ctx, cfg.Stream); err == nil {
		have := s.CachedInfo().Config.SubjectTransform
		if have != nil && have.Destination != want.SubjectTransform.Destination {
			return nil, nil, fmt.Errorf("%w: have %q, want %q", ErrPartitionsChanged, have.Destination, want.SubjectTransform.Destination)
		}
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil, fmt.Errorf("pipeline: stream %s: %w", cfg.Stream, err)
	}
	stream, err := js.CreateOrUpdateStream(ctx, want)
	if err != nil {
		return nil, nil, fmt.Errorf("pipeline: create/update stream %s: %w", cfg.Stream, err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, kvConfig(cfg))
	if err != nil {
		return nil, nil, fmt.Errorf("pipeline: create/update bucket %s: %w", cfg.Bucket, err)
	}
	if cfg.DeadLetters != "" {
		if _, err := js.CreateOrUpdateStream(ctx, DeadLetterStreamConfig(cfg)); err != nil {
			return nil, nil, fmt.Errorf("pipeline: create/update stream %s: %w", cfg.DeadLetters, err)
		}
	}
	if cfg.Tap && cfg.TapStream != "" {
		if _, err := js.CreateOrUpdateStream(ctx, TapStreamConfig(cfg)); err != nil {
			return nil, nil, fmt.Errorf("pipeline: create/update stream %s: %w", cfg.TapStream, err)
		}
	}
	return stream, kv, nil
}
