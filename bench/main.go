// Command bench runs Threadcast's side-by-side comparisons and prints one
// table per comparison:
//
//	go run ./bench [-oracle DIR] [-only NAME] [-runs N] [-ref-runs N] [-ref-json FILE]
//
// Each comparison lives in its own file and registers itself from an init
// function (see comparison); adding one is adding a file. The comparisons
// against the TypeScript reference consumer need Node 20 and the oracle
// installed with npm ci (the directory holding apply.mjs and node_modules:
// -oracle, or THREADCAST_ORACLE_DIR); the streams come from its sibling
// streamgen, with the exact seeds and options of the reference's bench.mjs,
// so both sides run the same events.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
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

	streams map[string]*workload
}

func main() {
	var e env
	only := flag.String("only", "", "run only the comparison `NAME` ("+strings.Join(names(), ", ")+")")
	flag.StringVar(&e.oracleDir, "oracle", os.Getenv("THREADCAST_ORACLE_DIR"),
		"`DIR` of the installed reference consumer (apply.mjs + node_modules); default $THREADCAST_ORACLE_DIR")
	flag.IntVar(&e.runs, "runs", 5, "runs of each Threadcast measurement (median reported)")
	flag.IntVar(&e.refRuns, "ref-runs", 1, "runs of each reference measurement (median reported); the long thread takes minutes per run")
	flag.StringVar(&e.refJSON, "ref-json", "", "use this saved output of the reference's bench.mjs instead of running it (`FILE`)")
	flag.Parse()
	e.out = os.Stdout
	e.streams = map[string]*workload{}
	if e.oracleDir == "" {
		fmt.Fprintln(os.Stderr, "bench: no reference consumer (-oracle or THREADCAST_ORACLE_DIR): install it with\n"+
			"  d=$(mktemp -d) && cp -r ../shared/tools/. $d && (cd $d/oracle && npm ci) && export THREADCAST_ORACLE_DIR=$d/oracle")
		os.Exit(2)
	}
	e.genPath = findGen(e.oracleDir)
	if e.genPath == "" {
		fmt.Fprintln(os.Stderr, "bench: streamgen/gen.mjs not found beside the oracle nor in ../shared/tools")
		os.Exit(2)
	}
	for _, n := range names() {
		if *only != "" && n != *only {
			continue
		}
		if err := comparisons[n].run(&e); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: %v\n", n, err)
			os.Exit(1)
		}
	}
}

func names() []string {
	ns := make([]string, 0, len(comparisons))
	for n := range comparisons {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}
