// Command bench runs Threadcast's side-by-side comparisons and prints one
// table per comparison:
//
//	go run ./bench [-quick] [-oracle DIR] [-only NAME[,NAME]] [-runs N] [-ref-runs N] [-ref-json FILE]
//
// and closes with a summary table: every ratio next to its target. The codec, ingest and fanout comparisons run those packages' own
// side-by-side benchmarks (go test -bench) and read their metrics; -quick
// runs everything shorter (a smoke run: the figures are noisier).
//
// Each comparison lives in its own file and registers itself from an init
// function (see comparison); adding one is adding a file. The comparisons
// against the TypeScript reference consumer need Node 20 and the oracle
// installed with npm ci (the directory holding apply.mjs and node_modules:
// -oracle, else THREADCAST_ORACLE_DIR, else tools/oracle once npm ci ran
// there); the streams come from streamgen (beside the oracle, else
// tools/streamgen), with the exact seeds and options of the reference's
// bench.mjs, so both sides run the same events. Run it from the repository
// root.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sort"
	"strings"

	"github.com/threadcast/threadcast/envflag"
)

// comparison is one side-by-side benchmark.
type comparison struct {
	name    string
	summary string
	run     func(e *env) error
}

// comparisons is filled by init functions before main runs and only read
// afterwards.
var comparisons = map[string]comparison{}

func register(c comparison) { comparisons[c.name] = c }

// env is what every comparison gets: options, where the tools are, and the
// shared stream cache.
type env struct {
	out       io.Writer
	oracleDir string // "" when the reference is not installed
	genPath   string // streamgen's gen.mjs
	runs      int    // runs of our side (median reported)
	refRuns   int    // runs of the reference (median reported)
	refJSON   string // saved bench.mjs output to use instead of running it

	quick bool // shorter runs of everything

	streams map[string]*workload
	summary []summaryRow
}

// needsOracle names the comparisons that need the reference consumer
// (Node and the installed oracle); without it they are skipped, and the
// summary says so.
var needsOracle = map[string]bool{"reducer": true, "compact": true}

func main() {
	var e env
	only := flag.String("only", "", "run only the comparisons `NAME`s, comma-separated ("+strings.Join(names(), ", ")+")")
	flag.BoolVar(&e.quick, "quick", false, "a fast smoke run: fewer and shorter runs of every comparison")
	flag.StringVar(&e.oracleDir, "oracle", defaultOracle(os.Getenv("THREADCAST_ORACLE_DIR")),
		"`DIR` of the installed reference consumer (apply.mjs + node_modules); default $THREADCAST_ORACLE_DIR, else tools/oracle once npm ci ran there")
	flag.IntVar(&e.runs, "runs", 5, "runs of each Threadcast measurement (median reported)")
	flag.IntVar(&e.refRuns, "ref-runs", 3, "runs of each reference measurement (median reported; its first run is slower, still warming its JIT); the long thread takes minutes per run")
	flag.StringVar(&e.refJSON, "ref-json", "", "use this saved output of the reference's bench.mjs instead of running it (`FILE`)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to `FILE` (go tool pprof)")
	flag.CommandLine.Init("bench", flag.ContinueOnError)
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), "usage: go run ./bench [-quick] [-oracle DIR] [-only NAME[,NAME]] [-runs N] [-ref-runs N] [-ref-json FILE]\n\n"+
			"Runs Threadcast's side-by-side comparisons and prints a table for each, then a summary of every ratio\n"+
			"next to its target (bench/README.md). Run it from the repository root.\n\nflags:\n")
		flag.PrintDefaults()
	}
	// --help: the usage on stdout, exit 0; a bad flag: the error and the
	// usage on stderr, exit 2.
	if err := envflag.ParseArgs(flag.CommandLine, os.Args[1:]); err != nil {
		os.Exit(envflag.Report("bench", err, os.Stdout, os.Stderr))
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: -cpuprofile: %v\n", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	e.out = os.Stdout
	e.streams = map[string]*workload{}
	if e.quick && !isSet("runs") {
		e.runs = 1
	}
	selected := map[string]bool{}
	for _, n := range strings.Split(*only, ",") {
		if n = strings.TrimSpace(n); n != "" {
			if _, ok := comparisons[n]; !ok {
				fmt.Fprintf(os.Stderr, "bench: unknown comparison %q (%s)\n", n, strings.Join(names(), ", "))
				os.Exit(2)
			}
			selected[n] = true
		}
	}
	noOracle := ""
	if e.oracleDir == "" {
		noOracle = "no reference consumer (-oracle, THREADCAST_ORACLE_DIR, or npm ci in tools/oracle)"
	} else if e.genPath = findGen(e.oracleDir); e.genPath == "" {
		noOracle = "streamgen/gen.mjs not found beside the oracle nor in tools/"
	}
	failed := false
	for _, n := range names() {
		if len(selected) > 0 && !selected[n] {
			continue
		}
		if needsOracle[n] && noOracle != "" {
			fmt.Fprintf(os.Stderr, "bench: %s skipped: %s; install it with\n"+
				"  (cd tools/oracle && npm ci)\n", n, noOracle)
			e.record(summaryRow{comparison: n, measure: "(all)", value: "not run: " + noOracle, target: "-", met: "-"})
			continue
		}
		before := len(e.summary)
		if err := comparisons[n].run(&e); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: %v\n", n, err)
			e.record(summaryRow{comparison: n, measure: "(all)", value: "failed: see stderr", target: "-", met: "NO"})
			failed = true
		} else if len(e.summary) == before {
			e.record(summaryRow{comparison: n, measure: "see its table above", value: "-", target: "-", met: "-"})
		}
	}
	if err := printSummary(e.out, e.summary); err != nil || failed {
		pprof.StopCPUProfile() // os.Exit runs no deferred call
		os.Exit(1)
	}
}

// isSet reports whether the flag name was given on the command line.
func isSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func names() []string {
	ns := make([]string, 0, len(comparisons))
	for n := range comparisons {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}
