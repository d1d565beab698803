package main

// Threadcast's fanout against a real peer, Centrifugo v6, each server in a
// process of its own, as fanout/peer_bench_test.go measures it
// (BenchmarkFanoutPeer): SSE and WebSocket, 100, 1,000 and 5,000
// subscribers of one busy channel; the sustained maximum (every frame
// delivered to everyone, the best over the closed loop's windows, and at
// the narrowest window alone), each server's CPU time per delivery, and
// p50/p99 at a fixed light load and at 90% of Centrifugo's maximum, each
// pooled over two runs of each server.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// centrifugoModule is the peer's pinned release, installed from the Go
// module proxy when no binary is given.
const centrifugoModule = "github.com/centrifugal/centrifugo/v6@v6.9.1"

func init() {
	register(comparison{
		name:    "peer",
		summary: "fanout vs Centrifugo v6 (uni_sse, uni_websocket), fanout's own benchmark",
		run:     runPeer,
	})
}

func runPeer(e *env) error {
	bin, err := centrifugoBin()
	if err != nil {
		return err
	}
	os.Setenv("THREADCAST_CENTRIFUGO", bin)
	n := "300x"
	if e.quick {
		n = "40x"
	}
	lines, err := goBench("./fanout", "^BenchmarkFanoutPeer$", n, 1, "60m")
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out, "\nFanout vs Centrifugo %s (fanout benchmark, %s·5000 deliveries of 256-byte events per run, best of 2 rounds at windows of 8, 32 and 128 frames; latencies pooled over 2 runs of each server, taking turns)\n",
		strings.TrimPrefix(centrifugoModule, "github.com/centrifugal/centrifugo/v6@"), n)
	tw := tabwriter.NewWriter(e.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "subs\ttransport\tthreadcast deliv/s (window)\tcentrifugo deliv/s (window)\tratio\tratio at window 8\tserver CPU ns/deliv: tc\tcf\tp50/p99 ms light: tc\tcf\tp50/p99 ms at 90% cf max: tc\tcf\t")
	for _, subs := range []string{"100", "1000", "5000"} {
		for _, tr := range []string{"sse", "ws"} {
			name := "BenchmarkFanoutPeer/subs=" + subs + "/" + tr
			var m map[string]float64
			for _, l := range lines {
				if l.name == name {
					m = l.metrics
				}
			}
			what := fmt.Sprintf("deliveries/s vs Centrifugo, %s subs, %s", subs, tr)
			if len(m) == 0 {
				fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t\n", subs, tr)
				e.record(summaryRow{"peer", what, "not reported", "≥2x", "-"})
				continue
			}
			ms := func(k string) string { return fmt.Sprintf("%.1f", m[k]/1000) }
			fmt.Fprintf(tw, "%s\t%s\t%.0f (%.0f)\t%.0f (%.0f)\t%.2f\t%.2f\t%.0f\t%.0f\t%s/%s\t%s/%s\t%s/%s\t%s/%s\t\n", subs, tr,
				m["tc_deliv/s"], m["tc_window"], m["cf_deliv/s"], m["cf_window"], m["ratio"], m["narrow_ratio"],
				m["tc_server_cpu_ns/deliv"], m["cf_server_cpu_ns/deliv"],
				ms("light_tc_p50_µs"), ms("light_tc_p99_µs"), ms("light_cf_p50_µs"), ms("light_cf_p99_µs"),
				ms("peer_tc_p50_µs"), ms("peer_tc_p99_µs"), ms("peer_cf_p50_µs"), ms("peer_cf_p99_µs"))
			e.record(summaryRow{"peer", what, fmt.Sprintf("%.2fx", m["ratio"]), "≥2x", verdict(m["ratio"], 2)})
			for _, at := range []struct{ what, key string }{
				{"at 90% of Centrifugo's maximum", "peer"},
				{"at the light load", "light"},
			} {
				tc, cf := at.key+"_tc_p99_µs", at.key+"_cf_p99_µs"
				met := "yes"
				if m[tc] > m[cf] {
					met = "NO"
				}
				e.record(summaryRow{"peer", fmt.Sprintf("p99 %s, %s subs, %s", at.what, subs, tr),
					fmt.Sprintf("%s ms (cf %s ms)", ms(tc), ms(cf)), "≤ Centrifugo's", met})
			}
		}
	}
	return tw.Flush()
}

// centrifugoBin returns $THREADCAST_CENTRIFUGO, else GOPATH's bin/centrifugo,
// installing the pinned release there when it is missing.
func centrifugoBin() (string, error) {
	if bin := os.Getenv("THREADCAST_CENTRIFUGO"); bin != "" {
		return bin, nil
	}
	gopath, err := exec.Command("go", "env", "GOPATH").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOPATH: %w", err)
	}
	bin := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "centrifugo")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	fmt.Fprintf(os.Stderr, "bench: go install %s\n", centrifugoModule)
	cmd := exec.Command("go", "install", centrifugoModule)
	cmd.Env = append(os.Environ(), "GOBIN="+filepath.Dir(bin))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("installing Centrifugo: %w", err)
	}
	return bin, nil
}
