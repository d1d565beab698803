package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// NOTE: a partition's ack floor, kept in the checkpoint bucket as well as in
// its consumer. With Config.ConsumerMemory the consumer's own state lives
// only in the server's memory, so a server restart loses it; the floor
// stored here lets bindConsumer start the recreated consumer where the last
// one stood instead of at the stream's beginning. Any stored value is safe
// to start after, however stale: a shard stores a floor only after acking
// it, and it acks only what stored checkpoints cover. A stale (lower) floor
// costs a longer replay, whose covered events are skipped by checkpoint seq.

// floorInterval is the least time between two floor writes of a partition.
const floorInterval = time.Second

// floorWait bounds the wait for the final floor write at shutdown.
const floorWait = 5 * time.Second

// floorKey is the bucket key of partition p's floor. Tenants never start
// with '_' (wire.ValidTenant), so no checkpoint key can collide; "_f."
// keys are not fenced (lease_fence.go): they are advisory, as above.
func floorKey(p int) string { return "_f.p" + strconv.Itoa(p) }

// loadFloor returns partition p's stored floor (0: none).
func loadFloor(ctx context.Context, store CheckpointStore, p int) (uint64, error) {
	b, err := store.Get(ctx, floorKey(p))
	if errors.Is(err, ErrNoCheckpoint) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("pipeline: ack floor of partition %d: %w", p, err)
	}
	seq, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		// Not ours to trust; starting from the beginning is never wrong.
		return 0, nil
	}
	return seq, nil
}

// storeFloor writes ps's floor, the seq it last acked (ps.acked), when that
// is past the stored one, at most every floorInterval unless force. It is
// called on every ack pass, whether or not the pass acked anything, so an
// ack that came too soon after the last write is stored by a later pass
// (within floorInterval of it) or at shutdown. While running, the write is
// not awaited: a lost one leaves an older floor, which is safe. At shutdown
// (force) it is awaited, bounded by ctx and floorWait, so a stop that
// returned has stored its final floor and the next start replays nothing it
// need not; until then the write could still be in flight when the next
// ingest reads it.
func (s *shard) storeFloor(ctx context.Context, ps *partState, force bool) {
	seq := ps.acked
	if !s.cfg.ConsumerMemory || seq <= ps.floor || (!force && s.now.Sub(ps.floorAt) < floorInterval) {
		return
	}
	f, err := s.store.Put(ctx, floorKey(ps.p), strconv.AppendUint(nil, seq, 10), nil)
	if err == nil && force {
		wctx, cancel := context.WithTimeout(ctx, floorWait)
		err = f.Wait(wctx)
		cancel()
	}
	if err != nil {
		s.log.Warn("ack floor not stored", "partition", ps.p, "err", err)
		return
	}
	ps.floor, ps.floorAt = seq, s.now
}
