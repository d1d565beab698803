package export

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/parquet-go/parquet-go"
)

// A part is one file per table, written under a temporary name and renamed
// into place only when all three are complete and synced: a file that has
// its final name is whole. The manifest lists a part only after its files
// are renamed (export.go), so a part an interrupted export left behind is
// rewritten, under the same names, by the next run.

// tmpSuffix ends the name of a file being written; a run removes such
// files from the output directory before it writes.
const tmpSuffix = ".tmp"

// partFile returns the final name of table's file of part n.
func partFile(table string, n int, f Format) string {
	return fmt.Sprintf("%s-%06d.%s", table, n, f.ext())
}

// tableWriter writes one table's rows of a part.
type tableWriter interface {
	write(rows any) error // rows: []RunRow, []MessageRow or []ToolCallRow
	close() error         // finish the file format's encoding (not the file)
}

type partWriter struct {
	dir   string
	n     int
	files [len(Tables)]*os.File
	w     [len(Tables)]tableWriter
	names [len(Tables)]string
	rows  [len(Tables)]int64
}

func newPart(dir string, n int, format Format) (*partWriter, error) {
	p := &partWriter{dir: dir, n: n}
	for i, t := range Tables {
		p.names[i] = partFile(t, n, format)
		f, err := os.OpenFile(filepath.Join(dir, p.names[i]+tmpSuffix), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
		if err != nil {
			p.abort()
			return nil, fmt.Errorf("%w: %w", ErrWrite, err)
		}
		p.files[i] = f
		p.w[i] = newTableWriter(t, format, f)
	}
	return p, nil
}

func newTableWriter(table string, format Format, f *os.File) tableWriter {
	if format == FormatNDJSON {
		return &ndjsonWriter{bw: bufio.NewWriterSize(f, 64<<10)}
	}
	opts := []parquet.WriterOption{parquet.Compression(&parquet.Zstd)}
	switch table {
	case TableRuns:
		return &parquetWriter[RunRow]{parquet.NewGenericWriter[RunRow](f, opts...)}
	case TableMessages:
		return &parquetWriter[MessageRow]{parquet.NewGenericWriter[MessageRow](f, opts...)}
	default:
		return &parquetWriter[ToolCallRow]{parquet.NewGenericWriter[ToolCallRow](f, opts...)}
	}
}

// add writes one thread's rows.
func (p *partWriter) add(runs []RunRow, msgs []MessageRow, calls []ToolCallRow) error {
	for i, rows := range [...]any{runs, msgs, calls} {
		if err := p.w[i].write(rows); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrWrite, p.names[i], err)
		}
	}
	p.rows[0] += int64(len(runs))
	p.rows[1] += int64(len(msgs))
	p.rows[2] += int64(len(calls))
	return nil
}

func (p *partWriter) total() int64 { return p.rows[0] + p.rows[1] + p.rows[2] }

// commit finishes, syncs and renames the part's files, then syncs the
// directory, so that the renames outlive a crash before the manifest names
// the part.
func (p *partWriter) commit() error {
	for i := range p.files {
		tmp := filepath.Join(p.dir, p.names[i]+tmpSuffix)
		err := p.w[i].close()
		if err == nil {
			err = p.files[i].Sync()
		}
		if cerr := p.files[i].Close(); err == nil {
			err = cerr
		}
		p.files[i] = nil
		if err == nil {
			err = os.Rename(tmp, filepath.Join(p.dir, p.names[i]))
		}
		if err != nil {
			p.abort()
			return fmt.Errorf("%w: %s: %w", ErrWrite, p.names[i], err)
		}
	}
	return syncDir(p.dir)
}

// abort closes and removes what is still a temporary file.
func (p *partWriter) abort() {
	for i, f := range p.files {
		if f != nil {
			_ = f.Close()
			_ = os.Remove(filepath.Join(p.dir, p.names[i]+tmpSuffix))
			p.files[i] = nil
		}
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrWrite, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("%w: sync %s: %w", ErrWrite, dir, err)
	}
	return nil
}

type parquetWriter[T any] struct{ w *parquet.GenericWriter[T] }

func (w *parquetWriter[T]) write(rows any) error {
	r := rows.([]T)
	if len(r) == 0 {
		return nil
	}
	_, err := w.w.Write(r)
	return err
}

func (w *parquetWriter[T]) close() error { return w.w.Close() }

type ndjsonWriter struct {
	bw  *bufio.Writer
	buf []byte
}

func (w *ndjsonWriter) write(rows any) error {
	switch r := rows.(type) {
	case []RunRow:
		return writeNDJSON(w, r)
	case []MessageRow:
		return writeNDJSON(w, r)
	case []ToolCallRow:
		return writeNDJSON(w, r)
	}
	return fmt.Errorf("export: rows of type %T", rows)
}

func writeNDJSON[T any](w *ndjsonWriter, rows []T) error {
	for i := range rows {
		w.buf = appendNDJSON(w.buf[:0], rows[i])
		if _, err := w.bw.Write(w.buf); err != nil {
			return err
		}
	}
	return nil
}

func (w *ndjsonWriter) close() error { return w.bw.Flush() }
