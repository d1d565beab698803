package export

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ManifestName is the manifest's file name in the output directory.
const ManifestName = "manifest.json"

// manifestVersion is the version of the manifest's format.
const manifestVersion = 1

// Manifest is the output directory's record of an export: what it exports
// (tenant, stream, format, the window as given and as resolved to stream
// sequences at the first run) and the parts completed so far. It is
// rewritten (temporary file, fsync, rename, directory fsync) after each
// part, so it only ever names files that are whole.
type Manifest struct {
	Version int    `json:"version"`
	Tenant  string `json:"tenant"`
	Stream  string `json:"stream"`
	Format  Format `json:"format"`
	// Since and Until are the window's bounds as given ("" = open).
	Since string `json:"since"`
	Until string `json:"until"`
	// From and To are the window as stream sequences, both inclusive,
	// fixed by the first run: To is never past the stream's last sequence
	// at that time, so a rerun exports the same range however the stream
	// grew. From > To is an empty window.
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
	// Parts are the completed parts, in order.
	Parts []Part `json:"parts"`
	// Complete: every thread of the tenant is in a part.
	Complete bool `json:"complete"`
}

// Part is one completed part: a file per table, holding the rows of the
// threads after the previous part's LastThread up to its own (thread
// tokens in byte order).
type Part struct {
	N          int      `json:"n"`
	LastThread string   `json:"lastThread"` // the thread token of the part's last thread; "" for an empty export
	Threads    int      `json:"threads"`
	Runs       int64    `json:"runs"`
	Messages   int64    `json:"messages"`
	ToolCalls  int64    `json:"toolCalls"`
	Files      []string `json:"files"`
}

// readManifest reads dir's manifest; found is false when there is none.
func readManifest(dir string) (m *Manifest, found bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrOut, err)
	}
	m = new(Manifest)
	if err := json.Unmarshal(b, m); err != nil {
		return nil, true, fmt.Errorf("%w: %s: %w", ErrBadManifest, filepath.Join(dir, ManifestName), err)
	}
	if m.Version != manifestVersion {
		return nil, true, fmt.Errorf("%w: %s: version %d (this threadcast writes %d)", ErrBadManifest, filepath.Join(dir, ManifestName), m.Version, manifestVersion)
	}
	return m, true, nil
}

// writeManifest replaces dir's manifest with m, durably.
func writeManifest(dir string, m *Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("export: manifest: %w", err)
	}
	b = append(b, '\n')
	tmp := filepath.Join(dir, ManifestName+tmpSuffix)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrWrite, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, ManifestName))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("%w: %s: %w", ErrWrite, ManifestName, err)
	}
	return syncDir(dir)
}

// check reports how m differs from the export cfg asks for, as an error
// wrapping ErrManifestMismatch, or nil.
func (m *Manifest) check(cfg *Config) error {
	type field struct{ name, have, want string }
	for _, f := range []field{
		{"tenant", m.Tenant, cfg.Tenant},
		{"stream", m.Stream, cfg.Stream},
		{"format", string(m.Format), string(cfg.Format)},
		{"since", m.Since, cfg.Since.String()},
		{"until", m.Until, cfg.Until.String()},
	} {
		if f.have != f.want {
			return fmt.Errorf("%w: %s is %q there, %q here (export into a new directory, or give the same arguments to resume)",
				ErrManifestMismatch, f.name, f.have, f.want)
		}
	}
	return nil
}
