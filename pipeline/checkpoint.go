package pipeline

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A checkpoint record, the value stored under CheckpointKey in the views
// bucket:
//
//	"TCK1" | uvarint seq | uvarint frameSeq | uvarint len(run) | run | reducer checkpoint
//
// seq is the last stream sequence applied to the thread (events ≤ seq are
// skipped on replay); frameSeq the Tc-Seq of the last frame published, so the
// Tc-Prev chain continues after a reload; run the open run's summary
// accumulator (JSON, may be empty); the rest is reducer.AppendCheckpoint.

const ckptMagic = "TCK1"

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
