package main

// Comparisons whose measurement already lives in a package's
// *_bench_test.go (codec, pipeline, fanout) run that benchmark with
// `go test -bench` and read its reported metrics, so that the number in the
// table is the one the package's own benchmark defines — same fixtures, same
// baseline, same pairing — and the code exists once.

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
)

// benchLine is one result line of `go test -bench`: its name (without the
// -GOMAXPROCS suffix) and every value by unit ("ns/op", "events/s", ...).
type benchLine struct {
	name    string
	metrics map[string]float64
}

// goBench runs the benchmarks of pkg matching pattern and returns their
// result lines, in output order (count runs each).
func goBench(pkg, pattern, benchtime string, count int, timeout string) ([]benchLine, error) {
	args := []string{"test", "-run", "^$", "-bench", pattern, "-benchtime", benchtime,
		"-count", strconv.Itoa(count), "-timeout", timeout, pkg}
	fmt.Fprintf(os.Stderr, "bench: go %s\n", strings.Join(args, " "))
	cmd := exec.Command("go", args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go test %s: %w\n%s", pkg, err, lastLines(out, 20))
	}
	lines := parseBench(out)
	if len(lines) == 0 {
		return nil, fmt.Errorf("go test %s -bench %s: no benchmark results\n%s", pkg, pattern, lastLines(out, 20))
	}
	return lines, nil
}

// parseBench reads the result lines of `go test -bench` output:
//
//	BenchmarkX/sub=1-2   	 100	  123 ns/op	  4.5 events/s	  0 B/op
func parseBench(out []byte) []benchLine {
	var res []benchLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
			continue // a log line that starts with a benchmark's name
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		l := benchLine{name: name, metrics: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			l.metrics[f[i+1]] = v
		}
		res = append(res, l)
	}
	return res
}

// medianOf returns the median of metric over the lines named name, and how
// many there were.
func medianOf(lines []benchLine, name, metric string) (float64, int) {
	var vs []float64
	for _, l := range lines {
		if v, ok := l.metrics[metric]; ok && l.name == name {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return 0, 0
	}
	sort.Float64s(vs)
	return vs[len(vs)/2], len(vs)
}

func lastLines(b []byte, n int) string {
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}
