package cmd

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/threadcast/threadcast/internal/testsupport"
)

// goList runs go list with args at the module root and returns the lines
// it prints.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	root, err := testsupport.Root()
	if err != nil {
		t.Fatal(err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	list := exec.Command(goBin, append([]string{"list"}, args...)...)
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list %v: %v\n%s", args, err, msg)
	}
	return strings.Fields(string(out))
}

// TestFanoutLinksNoIngest: the fanout command speaks to ingest only through
// the wire contract, so its binary links none of the ingest side: no
// nats-server, no pipeline, no agent SDK. It links the reducer through
// package history alone, which folds a thread's stored events read-only
// for ?at= (the view at an earlier seq).
func TestFanoutLinksNoIngest(t *testing.T) {
	forbidden := []string{
		"github.com/nats-io/nats-server",
		testsupport.Module + "/pipeline",
		testsupport.Module + "/bridge",
		testsupport.Module + "/agent",
		testsupport.Module + "/natsembed",
	}
	deps := goList(t, "-deps", testsupport.Module+"/cmd/fanout")
	if len(deps) == 0 {
		t.Fatal("go list -deps ./cmd/fanout listed nothing")
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("cmd/fanout depends on %s", d)
			}
		}
	}
}

// TestWireIsLeaf: package wire, the contract every process shares, imports
// the standard library and the NATS client only (nats.go and nuid, which
// nats.go itself links).
func TestWireIsLeaf(t *testing.T) {
	imports := goList(t, "-f", `{{join .Imports "\n"}}`, testsupport.Module+"/wire")
	if len(imports) == 0 {
		t.Fatal("go list found no imports of wire")
	}
	for _, imp := range imports {
		std := !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".")
		client := imp == "github.com/nats-io/nats.go" || strings.HasPrefix(imp, "github.com/nats-io/nats.go/") ||
			imp == "github.com/nats-io/nuid"
		if !std && !client {
			t.Errorf("wire imports %s", imp)
		}
	}
}
