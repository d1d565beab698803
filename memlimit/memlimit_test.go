package memlimit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
)

// Mount lines as the kernel writes them (proc(5)).
const (
	v2Mount = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
	v1Mount = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" +
		"32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n" +
		"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
	v1Unlimited = "9223372036854771712\n"
)

func files(kv ...string) fstest.MapFS {
	m := fstest.MapFS{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = &fstest.MapFile{Data: []byte(kv[i+1])}
	}
	return m
}

func TestLimit(t *testing.T) {
	for _, c := range []struct {
		name   string
		fsys   fstest.MapFS
		limit  int64
		file   string
		noneOK bool // want ok == false
	}{
		{
			name: "v2, own cgroup namespace",
			fsys: files("proc/self/mountinfo", v2Mount, "proc/self/cgroup", "0::/\n",
				"sys/fs/cgroup/memory.max", "536870912\n"),
			limit: 512 << 20, file: "/sys/fs/cgroup/memory.max",
		},
		{
			name: "v2, the pod's limit above the container's max",
			fsys: files("proc/self/mountinfo", v2Mount, "proc/self/cgroup", "0::/kubepods/pod1/ctr\n",
				"sys/fs/cgroup/kubepods/pod1/ctr/memory.max", "max\n",
				"sys/fs/cgroup/kubepods/pod1/memory.max", "1073741824\n",
				"sys/fs/cgroup/kubepods/memory.max", "max\n"),
			limit: 1 << 30, file: "/sys/fs/cgroup/kubepods/pod1/memory.max",
		},
		{
			name: "v2, the smaller of two nested limits",
			fsys: files("proc/self/mountinfo", v2Mount, "proc/self/cgroup", "0::/a/b\n",
				"sys/fs/cgroup/a/b/memory.max", "2147483648\n",
				"sys/fs/cgroup/a/memory.max", "1073741824\n"),
			limit: 1 << 30, file: "/sys/fs/cgroup/a/memory.max",
		},
		{
			name: "v2, no limit anywhere",
			fsys: files("proc/self/mountinfo", v2Mount, "proc/self/cgroup", "0::/user.slice\n",
				"sys/fs/cgroup/user.slice/memory.max", "max\n"),
			noneOK: true,
		},
		{
			name: "v1, unlimited (this machine's kind)",
			fsys: files("proc/self/mountinfo", v1Mount,
				"proc/self/cgroup", "9:name=systemd:/\n4:memory:/process_api/x\n1:cpu:/\n0::/\n",
				"sys/fs/cgroup/memory/process_api/x/memory.limit_in_bytes", v1Unlimited,
				"sys/fs/cgroup/memory/process_api/memory.limit_in_bytes", v1Unlimited,
				"sys/fs/cgroup/memory/memory.limit_in_bytes", v1Unlimited),
			noneOK: true,
		},
		{
			name: "v1, a limit on the process's cgroup",
			fsys: files("proc/self/mountinfo", v1Mount,
				"proc/self/cgroup", "4:memory:/process_api/x\n",
				"sys/fs/cgroup/memory/process_api/x/memory.limit_in_bytes", "268435456\n",
				"sys/fs/cgroup/memory/memory.limit_in_bytes", v1Unlimited),
			limit: 256 << 20, file: "/sys/fs/cgroup/memory/process_api/x/memory.limit_in_bytes",
		},
		{
			name: "v1, the mount's root is the process's cgroup (a container without cgroupns)",
			fsys: files("proc/self/mountinfo", "35 31 0:32 /docker/abc /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n",
				"proc/self/cgroup", "4:memory:/docker/abc\n",
				"sys/fs/cgroup/memory/memory.limit_in_bytes", "104857600\n"),
			limit: 100 << 20, file: "/sys/fs/cgroup/memory/memory.limit_in_bytes",
		},
		{
			name: "v1, a mount whose root does not hold the process's cgroup shows none of its limits",
			fsys: files("proc/self/mountinfo", "35 31 0:32 /docker/abc /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n",
				"proc/self/cgroup", "4:memory:/elsewhere\n",
				"sys/fs/cgroup/memory/memory.limit_in_bytes", "104857600\n"),
			noneOK: true,
		},
		{
			name: "v2, another cgroup's mount listed first is passed over",
			fsys: files("proc/self/mountinfo", "40 23 0:26 /other /mnt/other rw - cgroup2 cgroup2 rw\n"+v2Mount,
				"proc/self/cgroup", "0::/\n",
				"mnt/other/memory.max", "1048576\n",
				"sys/fs/cgroup/memory.max", "268435456\n"),
			limit: 256 << 20, file: "/sys/fs/cgroup/memory.max",
		},
		{
			name: "v2, the host's hierarchy bind-mounted first is passed over",
			fsys: files("proc/self/mountinfo", "41 23 0:26 /kubepods /host/cgroup rw - cgroup2 cgroup2 rw\n"+
				"30 23 0:26 /kubepods/pod1/ctr /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
				"proc/self/cgroup", "0::/kubepods/pod1/ctr\n",
				"sys/fs/cgroup/memory.max", "268435456\n"),
			limit: 256 << 20, file: "/sys/fs/cgroup/memory.max",
		},
		{
			name: "v2 in its own namespace, the host's root bind-mounted first shows no limit of its own",
			fsys: files("proc/self/mountinfo", "41 23 0:26 / /host/cgroup rw - cgroup2 cgroup2 rw\n"+v2Mount,
				"proc/self/cgroup", "0::/\n",
				"host/cgroup/cgroup.controllers", "memory\n",
				"sys/fs/cgroup/memory.max", "268435456\n"),
			limit: 256 << 20, file: "/sys/fs/cgroup/memory.max",
		},
		{
			name: "v2, a prefix that is not a path prefix does not count",
			fsys: files("proc/self/mountinfo", "30 23 0:26 /a /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
				"proc/self/cgroup", "0::/ab\n", "sys/fs/cgroup/memory.max", "4096\n"),
			noneOK: true,
		},
		{
			name: "v2, a cgroup outside the namespace (/..) is read nowhere",
			fsys: files("proc/self/mountinfo", v2Mount, "proc/self/cgroup", "0::/../sibling\n",
				"sys/fs/sibling/memory.max", "4096\n", "sys/fs/cgroup/memory.max", "4096\n"),
			noneOK: true,
		},
		{
			name:  "v2, a limit of 0 is reported as it is",
			fsys:  files("proc/self/mountinfo", v2Mount, "proc/self/cgroup", "0::/\n", "sys/fs/cgroup/memory.max", "0\n"),
			limit: 0, file: "/sys/fs/cgroup/memory.max",
		},
		{
			name: "a mountinfo line longer than a scanner's 64 KiB",
			fsys: files("proc/self/mountinfo", "20 1 0:20 / / rw - overlay overlay rw,lowerdir="+strings.Repeat("/l", 40000)+"\n"+v2Mount,
				"proc/self/cgroup", "0::/\n", "sys/fs/cgroup/memory.max", "536870912\n"),
			limit: 512 << 20, file: "/sys/fs/cgroup/memory.max",
		},
		{
			name: "v1 memory controller preferred over a cgroup2 mount (hybrid)",
			fsys: files("proc/self/mountinfo", "29 23 0:25 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"+v1Mount,
				"proc/self/cgroup", "4:memory:/\n0::/\n",
				"sys/fs/cgroup/memory/memory.limit_in_bytes", "134217728\n",
				"sys/fs/cgroup/unified/memory.max", "1\n"),
			limit: 128 << 20, file: "/sys/fs/cgroup/memory/memory.limit_in_bytes",
		},
		{
			name: "an escaped mount point",
			fsys: files("proc/self/mountinfo", `30 23 0:26 / /my\040cgroup rw - cgroup2 cgroup2 rw`+"\n",
				"proc/self/cgroup", "0::/\n", "my cgroup/memory.max", "4096\n"),
			limit: 4096, file: "/my cgroup/memory.max",
		},
		{name: "no /proc (not Linux)", fsys: fstest.MapFS{}, noneOK: true},
		{
			name:   "no memory controller mounted",
			fsys:   files("proc/self/mountinfo", "31 23 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n", "proc/self/cgroup", "1:cpu:/\n"),
			noneOK: true,
		},
		{
			name:   "the process is in no memory cgroup",
			fsys:   files("proc/self/mountinfo", v1Mount, "proc/self/cgroup", "1:cpu:/\n"),
			noneOK: true,
		},
		{
			name:   "no limit file at all",
			fsys:   files("proc/self/mountinfo", v2Mount, "proc/self/cgroup", "0::/x\n"),
			noneOK: true,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			limit, file, ok, err := Limit(c.fsys)
			if err != nil {
				t.Fatal(err)
			}
			if c.noneOK {
				if ok {
					t.Fatalf("limit %d from %s, want none", limit, file)
				}
				return
			}
			if !ok || limit != c.limit || file != c.file {
				t.Fatalf("got %d from %q (ok %v), want %d from %q", limit, file, ok, c.limit, c.file)
			}
		})
	}
}

// TestLimitErrors: cgroup files that exist but cannot be understood are an
// error naming what was wrong, never a silent "no limit".
func TestLimitErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		fsys fstest.MapFS
		want string
	}{
		{
			name: "limit not a number",
			fsys: files("proc/self/mountinfo", v2Mount, "proc/self/cgroup", "0::/\n", "sys/fs/cgroup/memory.max", "lots\n"),
			want: `/sys/fs/cgroup/memory.max: limit "lots" is not a number of bytes`,
		},
		{
			name: "negative limit",
			fsys: files("proc/self/mountinfo", v1Mount, "proc/self/cgroup", "4:memory:/\n", "sys/fs/cgroup/memory/memory.limit_in_bytes", "-1\n"),
			want: `limit "-1" is not a number of bytes`,
		},
		{
			name: "mountinfo line without separator",
			fsys: files("proc/self/mountinfo", "30 23 0:26 / /sys/fs/cgroup rw cgroup2\n", "proc/self/cgroup", "0::/\n"),
			want: "has no separator",
		},
		{
			name: "mountinfo line too short",
			fsys: files("proc/self/mountinfo", "30 23 - cgroup2\n", "proc/self/cgroup", "0::/\n"),
			want: "is too short",
		},
		{
			name: "mountinfo without /proc/self/cgroup",
			fsys: files("proc/self/mountinfo", v2Mount),
			want: "proc/self/cgroup",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, ok, err := Limit(c.fsys)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ok %v, error %v, want one containing %q", ok, err, c.want)
			}
		})
	}
}

// TestLimitOnThisMachine reads the real /proc and /sys of the machine the
// test runs on: whatever the limit, the files must parse.
func TestLimitOnThisMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("cgroups are Linux's")
	}
	limit, file, ok, err := Limit(os.DirFS("/"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("limit %d from %q (found %v)", limit, file, ok)
}

func TestApply(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	limited := files("proc/self/mountinfo", v2Mount, "proc/self/cgroup", "0::/\n", "sys/fs/cgroup/memory.max", "1000000000\n")
	noEnv := func(string) string { return "" }

	r, err := Apply(0.9, noEnv, limited)
	if err != nil {
		t.Fatal(err)
	}
	if r.Cgroup != 1e9 || r.Set != 9e8 || r.File != "/sys/fs/cgroup/memory.max" {
		t.Fatalf("result %+v, want 9e8 of 1e9", r)
	}
	if got := debug.SetMemoryLimit(-1); got != 9e8 {
		t.Fatalf("runtime limit %d, want 9e8", got)
	}

	debug.SetMemoryLimit(prev)
	for _, c := range []struct {
		name   string
		ratio  float64
		env    string
		fsys   fstest.MapFS
		reason string
	}{
		{"GOMEMLIMIT wins", 0.9, "2GiB", limited, "GOMEMLIMIT=2GiB is set"},
		{"disabled", 0, "", limited, "disabled (ratio 0)"},
		{"no limit", 0.9, "", files("proc/self/mountinfo", v2Mount, "proc/self/cgroup", "0::/\n", "sys/fs/cgroup/memory.max", "max\n"), "no cgroup memory limit"},
		{"a limit of 0", 0.9, "", files("proc/self/mountinfo", v2Mount, "proc/self/cgroup", "0::/\n", "sys/fs/cgroup/memory.max", "0\n"),
			"0.9 of the cgroup limit of 0 bytes is under 16 MiB"},
		{"a ratio too small", 0.01, "", limited, "0.01 of the cgroup limit of 1000000000 bytes is under 16 MiB"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := Apply(c.ratio, func(k string) string {
				if k == "GOMEMLIMIT" {
					return c.env
				}
				return ""
			}, c.fsys)
			if err != nil {
				t.Fatal(err)
			}
			if r.Set != 0 || r.Reason != c.reason {
				t.Fatalf("result %+v, want nothing set because %q", r, c.reason)
			}
			if got := debug.SetMemoryLimit(-1); got != prev {
				t.Fatalf("runtime limit changed to %d", got)
			}
		})
	}
	for _, bad := range []float64{-0.1, 1.5} {
		if _, err := Apply(bad, noEnv, limited); err == nil || !strings.Contains(err.Error(), "not between 0 and 1") {
			t.Errorf("ratio %v: error %v", bad, err)
		}
	}
	if _, err := Apply(0.9, noEnv, files("proc/self/mountinfo", v2Mount, "proc/self/cgroup", "0::/\n", "sys/fs/cgroup/memory.max", "x\n")); err == nil {
		t.Error("an unreadable limit applied without error")
	}
}

// FuzzLimit: no input files make Limit panic, and a limit it reports is
// not negative.
func FuzzLimit(f *testing.F) {
	f.Add(v2Mount, "0::/\n", "536870912\n")
	f.Add(v1Mount, "4:memory:/a\n", v1Unlimited)
	f.Add(v2Mount, "0::/../x\n", "0")
	f.Add(`1 2 0:3 /x\040y /m\134n rw - cgroup cgroup memory`, "4:memory:/x y/z", "1")
	f.Fuzz(func(t *testing.T, mountinfo, cgroup, value string) {
		fsys := files("proc/self/mountinfo", mountinfo, "proc/self/cgroup", cgroup,
			"sys/fs/cgroup/memory.max", value, "sys/fs/cgroup/memory/memory.limit_in_bytes", value,
			"sys/fs/cgroup/memory/a/memory.limit_in_bytes", value)
		limit, _, ok, err := Limit(fsys)
		if ok && (err != nil || limit < 0) {
			t.Fatalf("limit %d ok with error %v", limit, err)
		}
	})
}

// TestLimitInRealCgroup runs a child process of this test binary in a new
// cgroup with a 256 MiB memory limit and has it Apply a ratio of 0.5 from
// the real /proc and /sys. It needs root and a writable cgroup file system:
// CI's machines (cgroup v1, as root) have both. Under cgroup v2 the test's
// own cgroup usually holds processes, so it cannot give a child cgroup the
// memory controller, and the test skips, saying why; TestLimit covers v2 on
// synthetic trees.
func TestLimitInRealCgroup(t *testing.T) {
	if dir := os.Getenv("MEMLIMIT_TEST_CGROUP"); dir != "" {
		return // the child's half is TestCgroupChild
	}
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("needs Linux and root to make a cgroup")
	}
	parent, limitFile, v2 := ownMemoryCgroup(t)
	dir, err := os.MkdirTemp(parent, "memlimit-test-")
	if err != nil {
		t.Skipf("cannot make a cgroup under %s: %v", parent, err)
	}
	t.Cleanup(func() { _ = os.Remove(dir) }) // a cgroup directory is removed with rmdir, once empty
	const limit = 256 << 20
	if err := os.WriteFile(filepath.Join(dir, limitFile), []byte(strconv.Itoa(limit)), 0o644); err != nil {
		t.Skipf("cannot set a limit in %s: %v", dir, err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCgroupChild$", "-test.v")
	cmd.Env = append(os.Environ(), "MEMLIMIT_TEST_CGROUP="+dir, "GOMEMLIMIT=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	want := fmt.Sprintf("child result: cgroup %d set %d file %s", limit, limit/2, filepath.Join(dir, limitFile))
	if !strings.Contains(string(out), want) {
		t.Fatalf("child said:\n%s\nwant a line %q (cgroup v2: %v)", out, want, v2)
	}
}

// TestCgroupChild is the child of TestLimitInRealCgroup: it moves itself
// into the cgroup it is given and reports what Apply did.
func TestCgroupChild(t *testing.T) {
	dir := os.Getenv("MEMLIMIT_TEST_CGROUP")
	if dir == "" {
		t.Skip("run by TestLimitInRealCgroup")
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	prev := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(prev)
	r, err := Apply(0.5, func(string) string { return "" }, os.DirFS("/"))
	if err != nil {
		t.Fatal(err)
	}
	if got := debug.SetMemoryLimit(-1); got != r.Set {
		t.Fatalf("runtime limit %d, Apply reported %d", got, r.Set)
	}
	fmt.Printf("child result: cgroup %d set %d file %s\n", r.Cgroup, r.Set, r.File)
}

// ownMemoryCgroup finds this process's memory cgroup directory at the usual
// mount points, independently of the code under test: /sys/fs/cgroup/memory
// (v1) or /sys/fs/cgroup (v2).
func ownMemoryCgroup(t *testing.T) (dir, limitFile string, v2 bool) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				if d := filepath.Join("/sys/fs/cgroup/memory", parts[2]); isDir(d) {
					return d, "memory.limit_in_bytes", false
				}
			}
		}
		if parts[0] == "0" && parts[1] == "" {
			if d := filepath.Join("/sys/fs/cgroup", parts[2]); isDir(d) && isFile(filepath.Join(d, "cgroup.controllers")) {
				dir, limitFile, v2 = d, "memory.max", true
			}
		}
	}
	if dir == "" {
		t.Skip("no memory cgroup found at /sys/fs/cgroup")
	}
	return dir, limitFile, v2
}

func isDir(p string) bool  { fi, err := os.Stat(p); return err == nil && fi.IsDir() }
func isFile(p string) bool { fi, err := os.Stat(p); return err == nil && !fi.IsDir() }
