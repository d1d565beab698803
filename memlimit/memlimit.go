// Package memlimit sets the Go runtime's soft memory limit from the memory
// limit of the process's cgroup (a container's), so that the collector works
// harder as the heap nears the limit instead of the kernel killing the
// process. Go sizes GOMAXPROCS from the cgroup's CPU limit by itself; it does
// nothing of the kind for memory.
//
// Limit reads the limit (cgroup v2 memory.max, or v1
// memory.limit_in_bytes, the smallest along the cgroup's ancestors) from a
// file system rooted at "/": the caller passes os.DirFS("/") in production
// and an fstest.MapFS in tests. Apply sets ratio × that limit with
// debug.SetMemoryLimit, unless GOMEMLIMIT is set (the runtime has applied it
// already, and an operator's explicit value wins).
//
// The package never reads the process environment itself: Apply takes a
// getenv function, as envflag does (STYLE.md).
package memlimit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"path"
	"runtime/debug"
	"strconv"
	"strings"
)

// unlimitedV1 is the smallest value cgroup v1 reports for "no limit" (the
// largest int64 rounded down to a page, 9223372036854771712, on 4 KiB
// pages; anything this large limits nothing a process can allocate).
const unlimitedV1 = 1 << 62

// Limit returns the memory limit in bytes that applies to the process's
// cgroup, the file it came from, and ok == false when there is none (no
// cgroup memory controller mounted, or no limit set along the way). An
// error means the cgroup files exist but could not be understood.
func Limit(fsys fs.FS) (limit int64, file string, ok bool, err error) {
	mounts, err := fs.ReadFile(fsys, "proc/self/mountinfo")
	if errors.Is(err, fs.ErrNotExist) {
		return 0, "", false, nil // not Linux, or no /proc: nothing to read
	}
	if err != nil {
		return 0, "", false, err
	}
	groups, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return 0, "", false, err
	}
	m, found, err := memoryMount(mounts)
	if err != nil || !found {
		return 0, "", false, err
	}
	cg, found := cgroupPath(groups, m.v2)
	if !found {
		return 0, "", false, nil
	}
	name := "memory.max"
	if !m.v2 {
		name = "memory.limit_in_bytes"
	}
	// The cgroup's directory under the mount: its path relative to the
	// mount's root. A path outside that root (a cgroup namespace that does
	// not match the mount) falls back to the mount point itself.
	dir := m.point
	if rel, inside := strings.CutPrefix(cg, m.root); inside && (m.root == "/" || rel == "" || rel[0] == '/') {
		dir = path.Join(m.point, rel)
	}
	// Walk up to the mount point: an ancestor's limit applies too.
	for {
		f := path.Join(dir, name)
		b, err := fs.ReadFile(fsys, strings.TrimPrefix(f, "/"))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return 0, "", false, err
		default:
			v, set, err := parseLimit(b, m.v2)
			if err != nil {
				return 0, "", false, fmt.Errorf("memlimit: %s: %w", f, err)
			}
			if set && (!ok || v < limit) {
				limit, file, ok = v, f, true
			}
		}
		if dir == m.point || dir == "/" || dir == "." {
			return limit, file, ok, nil
		}
		dir = path.Dir(dir)
	}
}

// mount is the cgroup file system that holds the memory controller.
type mount struct {
	root, point string // the mount's root within the hierarchy, and where it is mounted
	v2          bool
}

// memoryMount finds the memory controller's mount in /proc/self/mountinfo
// (proc(5)): a cgroup (v1) mount whose super options name memory, else the
// cgroup2 mount (every controller of v2 is on it).
func memoryMount(mountinfo []byte) (mount, bool, error) {
	var v2 mount
	haveV2 := false
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		line := sc.Text()
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			return mount{}, false, fmt.Errorf("memlimit: mountinfo line %q has no separator", line)
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 1 {
			return mount{}, false, fmt.Errorf("memlimit: mountinfo line %q is too short", line)
		}
		m := mount{root: unescape(f[3]), point: unescape(f[4])}
		switch g[0] {
		case "cgroup2":
			if !haveV2 {
				m.v2 = true
				v2, haveV2 = m, true
			}
		case "cgroup":
			if len(g) >= 3 && hasOption(g[2], "memory") {
				return m, true, nil
			}
		}
	}
	if err := sc.Err(); err != nil {
		return mount{}, false, err
	}
	return v2, haveV2, nil
}

// cgroupPath returns the process's cgroup in the memory hierarchy from
// /proc/self/cgroup: the v1 line whose controllers include memory, or the
// v2 line "0::path".
func cgroupPath(groups []byte, v2 bool) (string, bool) {
	for line := range strings.SplitSeq(string(groups), "\n") {
		id, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		ctrls, p, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		if v2 && id == "0" && ctrls == "" || !v2 && hasOption(ctrls, "memory") {
			return p, true
		}
	}
	return "", false
}

// parseLimit reads a limit file: "max" (v2) or a value at or above
// unlimitedV1 (v1) is no limit.
func parseLimit(b []byte, v2 bool) (int64, bool, error) {
	s := strings.TrimSpace(string(b))
	if v2 && s == "max" {
		return 0, false, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("limit %q is not a number of bytes", s)
	}
	if v >= unlimitedV1 {
		return 0, false, nil
	}
	return int64(v), true, nil
}

func hasOption(list, name string) bool {
	for o := range strings.SplitSeq(list, ",") {
		if o == name {
			return true
		}
	}
	return false
}

// unescape undoes mountinfo's octal escapes (\040 for a space, \011, \012,
// \134).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Result says what Apply did, for the start-up log.
type Result struct {
	Cgroup int64  // the cgroup's limit in bytes; 0 if none was found
	File   string // where Cgroup was read
	Set    int64  // the soft limit set; 0 if Apply set none
	Reason string // why nothing was set, when Set == 0
}

// Apply sets the runtime's soft memory limit to ratio × the cgroup limit
// (0 < ratio ≤ 1). It sets nothing when GOMEMLIMIT is set (getenv), when
// ratio is 0 (disabled), or when no cgroup limit applies; Result.Reason then
// says which. The rest of the process's memory (stacks and the runtime's
// own aside, C libraries, page cache charged to the cgroup) must fit in the
// remaining 1 − ratio.
func Apply(ratio float64, getenv func(string) string, fsys fs.FS) (Result, error) {
	if err := CheckRatio(ratio); err != nil {
		return Result{}, err
	}
	if v := getenv("GOMEMLIMIT"); v != "" {
		return Result{Reason: "GOMEMLIMIT=" + v + " is set"}, nil
	}
	if ratio == 0 {
		return Result{Reason: "disabled (ratio 0)"}, nil
	}
	limit, file, ok, err := Limit(fsys)
	if err != nil {
		return Result{}, err
	}
	if !ok {
		return Result{Reason: "no cgroup memory limit"}, nil
	}
	r := Result{Cgroup: limit, File: file, Set: int64(float64(limit) * ratio)}
	debug.SetMemoryLimit(r.Set)
	return r, nil
}

// DefaultRatio is the commands' --memory-limit-ratio: a tenth of the
// cgroup's limit is left to what the Go limit does not count.
const DefaultRatio = 0.9

// FlagUsage is the help text of the commands' --memory-limit-ratio.
const FlagUsage = "soft memory limit of the Go runtime as a fraction of the cgroup (container) memory limit, 0 < r <= 1; 0: none; GOMEMLIMIT, when set, wins"

// CheckRatio reports a ratio outside [0, 1] (a start-up error of the
// commands' --memory-limit-ratio).
func CheckRatio(ratio float64) error {
	if ratio < 0 || ratio > 1 || math.IsNaN(ratio) {
		return fmt.Errorf("memlimit: ratio %v is not between 0 and 1", ratio)
	}
	return nil
}

// Configure is Apply with its outcome logged, for the commands' start-up:
// the limit set, or why none was. Cgroup files that cannot be understood
// are a warning, not a failure: the service runs, without the limit.
func Configure(log *slog.Logger, ratio float64, getenv func(string) string, fsys fs.FS) Result {
	r, err := Apply(ratio, getenv, fsys)
	switch {
	case err != nil:
		log.Warn("memory limit not set", "err", err)
	case r.Set > 0:
		log.Info("memory limit", "go_limit_bytes", r.Set, "cgroup_limit_bytes", r.Cgroup, "cgroup_file", r.File, "ratio", ratio)
	default:
		log.Info("memory limit not set", "reason", r.Reason)
	}
	return r
}
