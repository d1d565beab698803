//go:build image

package imagetest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// maxImageBytes bounds the image: three static binaries and a CA bundle.
const maxImageBytes = 120 << 20

type podman struct {
	t       *testing.T
	tool    string
	runtime string
}

func (p podman) cmd(args ...string) *exec.Cmd {
	// --runtime is a global option of podman; docker has none.
	if p.runtime != "" {
		args = append([]string{"--runtime", p.runtime}, args...)
	}
	return exec.Command(p.tool, args...)
}

// run runs the tool and returns its stdout, failing the test on an error.
func (p podman) run(args ...string) string {
	p.t.Helper()
	cmd := p.cmd(args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		p.t.Fatalf("%s %s: %v\n%s", p.tool, strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

func (p podman) logs(name string) string {
	out, _ := p.cmd("logs", name).CombinedOutput()
	return string(out)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func randomName(prefix string) string {
	b := make([]byte, 4)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

var devToken = regexp.MustCompile(`(?m)^dev token:\s+(\S+)\s+(\S+)$`)

// start runs the image in a new container on the volume and waits until
// /readyz answers 200; it returns the container's name, the base URL and the
// first development token with its tenant.
func start(t *testing.T, p podman, image, volume string) (name, base, tenant, token string) {
	t.Helper()
	name = randomName("tc-imagetest-")
	port := freePort(t)
	// The host network: the sandboxes that run this test can't always set
	// up container networking (netavark, iptables). The HTTP and the
	// embedded NATS server listen on loopback ports picked here.
	p.run("run", "-d", "--name", name, "--network", "host", "-v", volume+":/data", image,
		"--http", fmt.Sprintf("127.0.0.1:%d", port), "--nats-listen", "127.0.0.1:0", "--demo=false")
	t.Cleanup(func() { p.cmd("rm", "-f", "-t", "0", name).Run() })
	base = fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz not 200 within 60s (last: %v)\n%s", err, p.logs(name))
		}
		time.Sleep(200 * time.Millisecond)
	}
	m := devToken.FindStringSubmatch(p.logs(name))
	if m == nil {
		t.Fatalf("no dev token in the banner:\n%s", p.logs(name))
	}
	return name, base, m[1], m[2]
}

func do(t *testing.T, method, url, token string, body io.Reader) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-ndjson")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// stop sends SIGTERM (podman stop) and asserts a clean exit: status 0 and
// the shutdown's last log line.
func stop(t *testing.T, p podman, name string) {
	t.Helper()
	p.run("stop", "-t", "60", name)
	if code := p.run("inspect", "--format", "{{.State.ExitCode}}", name); code != "0" {
		t.Fatalf("exit status after SIGTERM: %s\n%s", code, p.logs(name))
	}
	logs := p.logs(name)
	if !strings.Contains(logs, "shutting down") || !strings.Contains(logs, "stopped cleanly") {
		t.Fatalf("no clean shutdown in the log:\n%s", logs)
	}
}

func TestImage(t *testing.T) {
	image := os.Getenv("THREADCAST_IMAGE")
	tool := os.Getenv("IMAGE_TOOL")
	if tool == "" {
		tool = "podman"
	}
	if image == "" {
		if os.Getenv("THREADCAST_REQUIRE_IMAGE") == "1" {
			t.Fatal("THREADCAST_IMAGE is not set (build it with scripts/image.sh test)")
		}
		t.Skip("THREADCAST_IMAGE is not set: run scripts/image.sh test")
	}
	p := podman{t: t, tool: tool, runtime: os.Getenv("IMAGE_RUNTIME")}

	size, err := strconv.ParseInt(p.run("image", "inspect", "--format", "{{.Size}}", image), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image %s: %d bytes (%.1f MiB)", image, size, float64(size)/(1<<20))
	if size > maxImageBytes {
		t.Errorf("image is %d bytes, more than %d", size, maxImageBytes)
	}
	if ep := p.run("image", "inspect", "--format", "{{json .Config.Entrypoint}}", image); ep != `["threadcast"]` {
		t.Errorf("entrypoint %s, want [\"threadcast\"]", ep)
	}
	if u := p.run("image", "inspect", "--format", "{{.Config.User}}", image); u == "" || strings.HasPrefix(u, "0") || strings.HasPrefix(u, "root") {
		t.Errorf("image user %q is root", u)
	}

	volume := randomName("tc-imagetest-")
	p.run("volume", "create", volume)
	t.Cleanup(func() { p.cmd("volume", "rm", "-f", volume).Run() })

	name, base, tenant, token := start(t, p, image, volume)
	if code, body := do(t, "GET", base+"/", "", nil); code != http.StatusOK || !bytes.Contains(body, []byte("<title>Threadcast</title>")) {
		t.Fatalf("GET /: %d, dashboard page missing:\n%.300s", code, body)
	}

	thread := randomName("image-")
	events := fmt.Sprintf(`{"type":"RUN_STARTED","threadId":%[1]q,"runId":"r1"}
{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}
{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"persisted across a restart"}
{"type":"TEXT_MESSAGE_END","messageId":"m1"}
{"type":"RUN_FINISHED","threadId":%[1]q,"runId":"r1"}
`, thread)
	if code, body := do(t, "POST", base+"/v1/ingest/"+tenant+"/"+thread, token, strings.NewReader(events)); code/100 != 2 {
		t.Fatalf("bridge: %d %s", code, body)
	}
	view := waitView(t, base, thread, token)

	stop(t, p, name)

	// A new container on the same volume: the event log, the checkpoints and
	// the signing key come back from it.
	_, base2, _, token2 := start(t, p, image, volume)
	if token2 == "" {
		t.Fatal("no token after the restart")
	}
	// The old token still verifies: the key was kept in the volume.
	code, after := do(t, "GET", base2+"/v1/threads/"+thread, token, nil)
	if code != http.StatusOK {
		t.Fatalf("after the restart GET thread: %d %s", code, after)
	}
	if !bytes.Equal(after, view) {
		t.Fatalf("view after the restart differs:\nbefore %s\nafter  %s", view, after)
	}
}

// waitView polls the REST view until the thread's run has finished with the
// message in it, and returns the view.
func waitView(t *testing.T, base, thread, token string) []byte {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := do(t, "GET", base+"/v1/threads/"+thread, token, nil)
		if code == http.StatusOK && bytes.Contains(body, []byte("persisted across a restart")) &&
			bytes.Contains(body, []byte(`"finished"`)) {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread view not there within 30s: %d %s", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
