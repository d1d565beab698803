package pipeline

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
)

// A checkpoint record, the value stored under wire.CheckpointKey in the views
// bucket:
//
//	"TCK1" | uvarint seq | uvarint frameSeq | uvarint len(run) | run | reducer checkpoint
//
// seq is the last stream sequence applied to the thread (events ≤ seq are
// skipped on replay); frameSeq the Tc-Seq of the last frame published, so the
// Tc-Prev chain continues after a reload; run the open run's summary
// accumulator (JSON, may be empty); the rest is reducer.AppendCheckpoint.

const ckptMagic = "TCK1"

// A checkpoint record larger than a chunk (a long conversation) is stored in
// chunks, so that it never exceeds the server's max message size — a
// checkpoint that cannot be written would hold its partition's acks back
// forever. The head key then holds
//
//	"TCKC" | uvarint gen | uvarint chunks
//
// and chunk i is at ChunkKey(head key, gen, i). gen is the checkpoint's seq,
// so a new generation never overwrites the chunks a stored head points at;
// chunks are written and confirmed before their head, and the previous
// generation's chunks are purged after it.
const ckptChunkMagic = "TCKC"

// chunkKey is the key of chunk i of generation gen of a checkpoint. The "_c"
// prefix keeps chunks out of the <tenant>.<thread> key space that listings
// read.
func chunkKey(key string, gen uint64, i int) string {
	return "_c." + key + "." + strconv.FormatUint(gen, 10) + "." + strconv.Itoa(i)
}

// chunkHead returns the head record of a chunked checkpoint.
func chunkHead(gen uint64, n int) []byte {
	b := append([]byte(nil), ckptChunkMagic...)
	b = binary.AppendUvarint(b, gen)
	return binary.AppendUvarint(b, uint64(n))
}

// parseChunkHead reports whether b is a chunk head, and its generation and
// chunk count.
func parseChunkHead(b []byte) (gen uint64, n int, ok bool, err error) {
	if len(b) < len(ckptChunkMagic) || string(b[:len(ckptChunkMagic)]) != ckptChunkMagic {
		return 0, 0, false, nil
	}
	b = b[len(ckptChunkMagic):]
	gen, k := binary.Uvarint(b)
	if k <= 0 {
		return 0, 0, true, fmt.Errorf("%w: truncated chunk head", ErrCheckpoint)
	}
	cn, k2 := binary.Uvarint(b[k:])
	if k2 <= 0 || cn == 0 || cn > 1<<16 {
		return 0, 0, true, fmt.Errorf("%w: bad chunk count", ErrCheckpoint)
	}
	return gen, int(cn), true, nil
}

// ErrCheckpoint is wrapped by every error about a stored checkpoint.
var ErrCheckpoint = errors.New("pipeline: bad checkpoint")

type ckptRecord struct {
	seq, frameSeq uint64
	run           []byte // aliases the record
	thread        []byte // aliases the record
}

func appendCkptHeader(dst []byte, seq, frameSeq uint64, run []byte) []byte {
	dst = append(dst, ckptMagic...)
	dst = binary.AppendUvarint(dst, seq)
	dst = binary.AppendUvarint(dst, frameSeq)
	dst = binary.AppendUvarint(dst, uint64(len(run)))
	return append(dst, run...)
}

// parseCkpt splits a record; the returned slices alias b.
func parseCkpt(b []byte) (ckptRecord, error) {
	var r ckptRecord
	if len(b) < len(ckptMagic) || string(b[:len(ckptMagic)]) != ckptMagic {
		return r, fmt.Errorf("%w: no magic", ErrCheckpoint)
	}
	b = b[len(ckptMagic):]
	var vals [3]uint64
	for i := range vals {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return r, fmt.Errorf("%w: truncated header", ErrCheckpoint)
		}
		vals[i], b = v, b[n:]
	}
	if vals[2] > uint64(len(b)) {
		return r, fmt.Errorf("%w: truncated run state", ErrCheckpoint)
	}
	r.seq, r.frameSeq = vals[0], vals[1]
	r.run, r.thread = b[:vals[2]], b[vals[2]:]
	return r, nil
}
