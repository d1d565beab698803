// Package memlimit sets the Go runtime's soft memory limit from the memory
// limit of the process's cgroup (a container's), so that the collector works
// harder as the heap nears the limit instead of the kernel killing the
// process. Go sizes GOMAXPROCS from the cgroup's CPU limit by itself; it does
// nothing of the kind for memory.
//
// Limit reads the limit (cgroup v2 memory.max, or v1
// memory.limit_in_bytes, the smallest over the mounts that show the
// process's cgroup and the cgroup's ancestors) from a file system rooted at
// "/": the caller passes os.DirFS("/") in production
// and an fstest.MapFS in tests. Apply sets ratio × that limit with
// debug.SetMemoryLimit, unless GOMEMLIMIT is set (the runtime has applied it
// already, and an operator's explicit value wins).
//
// The package never reads the process environment itself: Apply takes a
// getenv function, as envflag does (STYLE.md).
package memlimit

import (
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

// unlimitedV1: a cgroup v1 value at or above it is "no limit". The kernel
// reports no limit as PAGE_COUNTER_MAX pages (9223372036854771712 bytes on
// 4 KiB pages, other values on other page sizes) or, on old kernels, as
// ULLONG_MAX; anything this large limits nothing a process can allocate.
const unlimitedV1 = 1 << 62

// minGoLimit is the smallest soft limit Apply sets: below it the collector
// would run without pause for a heap that any service needs (a cgroup
// limit of 0, or a tiny ratio).
const minGoLimit = 16 << 20

// Limit returns the memory limit in bytes that applies to the process's
// cgroup, the file it came from, and ok == false when there is none (no
// cgroup memory controller mounted where the process's cgroup is visible,
// or no limit set along the way). An error means the cgroup files exist but
// could not be understood.
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
	v1, v2 := cgroupPaths(groups)
	ms, err := memoryMounts(mounts, v1, v2)
	if err != nil {
		return 0, "", false, err
	}
	var low lowest
	for _, m := range ms {
		if err := m.limits(fsys, &low); err != nil {
			return 0, "", false, err
		}
	}
	return low.limit, low.file, low.ok, nil
}

// lowest is the smallest limit seen so far, and where it was read.
type lowest struct {
	limit int64
	file  string
	ok    bool
}

func (l *lowest) offer(v int64, file string) {
	if !l.ok || v < l.limit {
		*l = lowest{v, file, true}
	}
}

// limits offers low every limit set on m's cgroup and its ancestors up to
// the mount point.
func (m mount) limits(fsys fs.FS, low *lowest) error {
	name := "memory.max"
	if !m.v2 {
		name = "memory.limit_in_bytes"
	}
	// The cgroup's directory: its path relative to the mount's root, under
	// the mount point (memoryMounts kept only mounts whose root holds it).
	rel := m.cgroup
	if m.root != "/" {
		rel = strings.TrimPrefix(m.cgroup, m.root)
	}
	dir := path.Join(m.point, rel)
	if dir != m.point && !strings.HasPrefix(dir, strings.TrimSuffix(m.point, "/")+"/") {
		return nil // a path that climbs out of the mount
	}
	for {
		f := path.Join(dir, name)
		b, err := fs.ReadFile(fsys, strings.TrimPrefix(f, "/"))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return err
		default:
			v, set, err := parseLimit(b, m.v2)
			if err != nil {
				return fmt.Errorf("memlimit: %s: %w", f, err)
			}
			if set {
				low.offer(v, f)
			}
		}
		if dir == m.point || dir == "/" || dir == "." {
			return nil
		}
		dir = path.Dir(dir)
	}
}

// mount is the cgroup file system that holds the memory controller, and
// the process's cgroup in it.
type mount struct {
	root, point string // the mount's root within the hierarchy, and where it is mounted
	cgroup      string // the process's cgroup path in that hierarchy
	v2          bool
}

// memoryMounts returns the memory controller's mounts in
// /proc/self/mountinfo (proc(5)) that show the process's cgroup: the cgroup
// (v1) mounts whose super options name memory and whose root is a prefix
// of v1, or, when there is none, the cgroup2 mounts whose root is a prefix
// of v2 (every controller of v2 is on it). A mount of another part of the
// hierarchy (a sibling's) does not show the process's cgroup and is passed
// over; a mount that shows it under another root (the host's hierarchy
// bind-mounted into a container with its own cgroup namespace) may name
// the wrong cgroup, which is why Limit takes the smallest limit of them
// all. An empty v1 or v2 means the process is in no such cgroup.
func memoryMounts(mountinfo []byte, v1, v2 string) ([]mount, error) {
	var mv1, mv2 []mount
	for line := range strings.SplitSeq(string(mountinfo), "\n") {
		if line == "" {
			continue
		}
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			return nil, fmt.Errorf("memlimit: mountinfo line %q has no separator", line)
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 1 {
			return nil, fmt.Errorf("memlimit: mountinfo line %q is too short", line)
		}
		m := mount{root: unescape(f[3]), point: unescape(f[4])}
		switch g[0] {
		case "cgroup2":
			if visible(v2, m.root) {
				m.cgroup, m.v2 = v2, true
				mv2 = append(mv2, m)
			}
		case "cgroup":
			if len(g) >= 3 && hasOption(g[2], "memory") && visible(v1, m.root) {
				m.cgroup = v1
				mv1 = append(mv1, m)
			}
		}
	}
	if len(mv1) > 0 {
		return mv1, nil
	}
	return mv2, nil
}

// visible reports whether cgroup path p is inside a mount of root: "/" holds
// every path; "/a" holds "/a" and "/a/b", not "/ab". A path outside the
// process's cgroup namespace ("/../x", cgroup_namespaces(7)) is in no mount.
func visible(p, root string) bool {
	switch {
	case p == "" || p[0] != '/' || p == "/.." || strings.HasPrefix(p, "/../"):
		return false
	case root == "/" || p == root:
		return true
	}
	return strings.HasPrefix(p, root+"/")
}

// cgroupPaths returns the process's cgroup paths from /proc/self/cgroup:
// v1, of the v1 line whose controllers include memory, and v2, of the line
// "0::path"; "" for either that is absent.
func cgroupPaths(groups []byte) (v1, v2 string) {
	for line := range strings.SplitSeq(string(groups), "\n") {
		id, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		ctrls, p, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		switch {
		case id == "0" && ctrls == "":
			v2 = p
		case hasOption(ctrls, "memory") && v1 == "":
			v1 = p
		}
	}
	return v1, v2
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
// ratio is 0 (disabled), when no cgroup limit applies, or when the result
// would be under 16 MiB; Result.Reason then says which. The rest of the
// process's memory (stacks and the runtime's own aside, C libraries, page
// cache charged to the cgroup) must fit in the remaining 1 − ratio.
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
	r := Result{Cgroup: limit, File: file}
	set := int64(float64(limit) * ratio)
	if set < minGoLimit {
		r.Reason = fmt.Sprintf("%v of the cgroup limit of %d bytes is under %d MiB", ratio, limit, minGoLimit>>20)
		return r, nil
	}
	r.Set = set
	debug.SetMemoryLimit(set)
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
