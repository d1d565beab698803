//go:build helm

package helmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// serviceMonitor is the subset of monitoring.coreos.com/v1 ServiceMonitor the
// chart uses. The Prometheus Operator types are not in k8s.io/api; decoding
// into this struct strictly still catches a misspelt field among these.
type serviceMonitor struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// newObject returns the typed object for a manifest's apiVersion and kind.
func newObject(apiVersion, kind string) (any, bool) {
	switch apiVersion + "/" + kind {
	case "v1/Service":
		return &corev1.Service{}, true
	case "v1/Secret":
		return &corev1.Secret{}, true
	case "v1/ServiceAccount":
		return &corev1.ServiceAccount{}, true
	case "apps/v1/StatefulSet":
		return &appsv1.StatefulSet{}, true
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}, true
	case "autoscaling/v2/HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}, true
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, true
	case "monitoring.coreos.com/v1/ServiceMonitor":
		return &serviceMonitor{}, true
	}
	return nil, false
}

func helmBin() string {
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	return "helm"
}

// stageChart copies the chart into a temporary directory with a stub chart
// standing in for the NATS dependency: helm template refuses a chart whose
// dependency is missing from charts/ even when its condition is false, and
// the real one can't be downloaded here (check.sh does the same).
func stageChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "threadcast")
	if err := os.CopyFS(dir, os.DirFS("threadcast")); err != nil {
		t.Fatal(err)
	}
	meta, err := os.ReadFile("threadcast/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)- name: nats\n\s+version: (\S+)`).FindSubmatch(meta)
	if m == nil {
		t.Fatal("Chart.yaml has no pinned nats dependency")
	}
	stub := "apiVersion: v2\nname: nats\nversion: " + string(m[1]) + "\n"
	if err := os.MkdirAll(filepath.Join(dir, "charts", "nats"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "charts", "nats", "Chart.yaml"), []byte(stub), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func render(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(helmBin(), append([]string{"template", "tc", stageChart(t), "--kube-version", "1.30.0", "--namespace", "threadcast", "--set", "nats.enabled=false"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

// decodeStrict converts one YAML document to JSON and decodes it into its
// Kubernetes type, refusing unknown fields.
func decodeStrict(doc []byte) (any, string, error) {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, "", fmt.Errorf("yaml: %w", err)
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(js, &head); err != nil {
		return nil, "", err
	}
	obj, ok := newObject(head.APIVersion, head.Kind)
	if !ok {
		return nil, head.Kind, fmt.Errorf("no type for %s %s: add it to newObject", head.APIVersion, head.Kind)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(obj); err != nil {
		return nil, head.Kind, fmt.Errorf("%s: %w", head.Kind, err)
	}
	return obj, head.Kind, nil
}

// splitDocs splits a multi-document YAML stream, dropping empty documents.
func splitDocs(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytes.Split(b, []byte("\n---")) {
		d = bytes.TrimPrefix(bytes.TrimSpace(d), []byte("---"))
		if len(bytes.TrimSpace(stripComments(d))) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}

func stripComments(b []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return out
}

func decodeAll(t *testing.T, out []byte) map[string][]any {
	t.Helper()
	objs := map[string][]any{}
	for _, doc := range splitDocs(out) {
		obj, kind, err := decodeStrict(doc)
		if err != nil {
			t.Fatalf("%v\n--- manifest ---\n%s", err, doc)
		}
		objs[kind] = append(objs[kind], obj)
	}
	return objs
}

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

func TestRenderDefault(t *testing.T) {
	objs := decodeAll(t, render(t))
	for kind, n := range map[string]int{"StatefulSet": 1, "Deployment": 1, "Service": 3, "Secret": 1,
		"ServiceAccount": 1, "HorizontalPodAutoscaler": 1, "PodDisruptionBudget": 2} {
		if len(objs[kind]) != n {
			t.Errorf("%s: got %d, want %d", kind, len(objs[kind]), n)
		}
	}
	if len(objs["ServiceMonitor"]) != 0 {
		t.Errorf("ServiceMonitor rendered while metrics.serviceMonitor.enabled=false")
	}
	sts := objs["StatefulSet"][0].(*appsv1.StatefulSet)
	c := sts.Spec.Template.Spec.Containers[0]
	env := envOf(c)
	for name, want := range map[string]string{
		"THREADCAST_PARTITION_MODE": "lease", "THREADCAST_LEASE_TTL": "10s", "THREADCAST_DRAIN": "20s",
		"THREADCAST_NATS_URL": "nats://nats:4222", "THREADCAST_REPLICAS": "3", "THREADCAST_PARTITIONS": "16",
	} {
		if got := env[name].Value; got != want {
			t.Errorf("ingest env %s = %q, want %q", name, got, want)
		}
	}
	if env["THREADCAST_LEASE_HOLDER"].ValueFrom == nil || env["THREADCAST_LEASE_HOLDER"].ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("lease holder is not the pod name: %+v", env["THREADCAST_LEASE_HOLDER"])
	}
	if _, ok := env["THREADCAST_INSTANCE"]; ok {
		t.Errorf("lease mode sets THREADCAST_INSTANCE")
	}
	if got := *sts.Spec.Template.Spec.TerminationGracePeriodSeconds; got != 30 {
		t.Errorf("ingest terminationGracePeriodSeconds = %d, want drain 20 + 10", got)
	}
	checkContainer(t, "ingest", c, "/ingest")
	dep := objs["Deployment"][0].(*appsv1.Deployment)
	if dep.Spec.Replicas != nil {
		t.Errorf("fanout replicas set while the HPA owns them")
	}
	checkContainer(t, "fanout", dep.Spec.Template.Spec.Containers[0], "/fanout")
	sec := objs["Secret"][0].(*corev1.Secret)
	if len(sec.Data["auth-key"]) < 16 {
		t.Errorf("generated auth key %d bytes, want >= 16", len(sec.Data["auth-key"]))
	}
}

func TestRenderProduction(t *testing.T) {
	objs := decodeAll(t, render(t, "-f", "threadcast/ci/prod-values.yaml"))
	if len(objs["Secret"]) != 0 {
		t.Errorf("a Secret is rendered although auth.existingSecret is set")
	}
	if len(objs["ServiceMonitor"]) != 1 {
		t.Fatalf("ServiceMonitor: got %d, want 1", len(objs["ServiceMonitor"]))
	}
	sts := objs["StatefulSet"][0].(*appsv1.StatefulSet)
	c := sts.Spec.Template.Spec.Containers[0]
	env := envOf(c)
	inst := env["THREADCAST_INSTANCE"]
	if inst.ValueFrom == nil || inst.ValueFrom.FieldRef == nil ||
		inst.ValueFrom.FieldRef.FieldPath != "metadata.labels['apps.kubernetes.io/pod-index']" {
		t.Errorf("static mode: instance not from the pod ordinal: %+v", inst)
	}
	if env["THREADCAST_INSTANCES"].Value != "4" || *sts.Spec.Replicas != 4 {
		t.Errorf("instances %q, replicas %d, want 4 and 4", env["THREADCAST_INSTANCES"].Value, *sts.Spec.Replicas)
	}
	if env["THREADCAST_JS_DOMAIN"].Value != "hub" || env["THREADCAST_NATS_CREDS"].Value != "/etc/threadcast/nats/nats.creds" {
		t.Errorf("domain/creds env: %+v %+v", env["THREADCAST_JS_DOMAIN"], env["THREADCAST_NATS_CREDS"])
	}
	if ref := env["THREADCAST_AUTH_KEY"].ValueFrom.SecretKeyRef; ref.Name != "threadcast-auth" || ref.Key != "key" {
		t.Errorf("auth key from %s/%s, want threadcast-auth/key", ref.Name, ref.Key)
	}
	if !strings.Contains(env["THREADCAST_NATS_URL"].Value, "nats-2.nats:4222") {
		t.Errorf("nats urls %q", env["THREADCAST_NATS_URL"].Value)
	}
	if got := *sts.Spec.Template.Spec.TerminationGracePeriodSeconds; got != 40 {
		t.Errorf("terminationGracePeriodSeconds = %d, want 40", got)
	}
	hpa := objs["HorizontalPodAutoscaler"][0].(*autoscalingv2.HorizontalPodAutoscaler)
	if *hpa.Spec.MinReplicas != 3 || hpa.Spec.MaxReplicas != 30 {
		t.Errorf("hpa %d-%d", *hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas)
	}
	for _, o := range objs["Service"] {
		svc := o.(*corev1.Service)
		if svc.Name == "tc-threadcast" && svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			t.Errorf("public service type %s", svc.Spec.Type)
		}
	}
}

// checkContainer asserts what every Threadcast container must have.
func checkContainer(t *testing.T, name string, c corev1.Container, cmd string) {
	t.Helper()
	if len(c.Command) != 1 || c.Command[0] != cmd {
		t.Errorf("%s command %v", name, c.Command)
	}
	if strings.HasSuffix(c.Image, ":latest") || !strings.Contains(c.Image, ":") {
		t.Errorf("%s image %q is not pinned", name, c.Image)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/livez" ||
		c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("%s probes %+v %+v", name, c.LivenessProbe, c.ReadinessProbe)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s securityContext %+v", name, sc)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("%s resources %+v", name, c.Resources)
	}
}

// TestStrictDecodeRefusesTypos proves the decoder is strict: a misspelt
// field, as a template typo would produce, is an error.
func TestStrictDecodeRefusesTypos(t *testing.T) {
	tests := []struct {
		give    string
		wantErr string
	}{
		{give: "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: 80}]}\n"},
		{give: "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {prots: [{port: 80}]}\n", wantErr: `unknown field "prots"`},
		{give: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec: {template: {spec: {containers: [{name: c, imagePullPolice: Always}]}}}\n", wantErr: `unknown field "imagePullPolice"`},
		{give: "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: eighty}]}\n", wantErr: "cannot unmarshal string"},
		{give: "apiVersion: v9\nkind: Nothing\n", wantErr: "no type for v9 Nothing"},
		{give: "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nspec: {endpoint: []}\n", wantErr: `unknown field "endpoint"`},
	}
	for _, tt := range tests {
		_, _, err := decodeStrict([]byte(tt.give))
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("%q: %v", tt.give, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%q: err %v, want %q", tt.give, err, tt.wantErr)
		}
	}
}

// TestRenderBusAuth: with busAuth, ingest and fanout connect with the
// service nkey seed and ingest runs the auth callout, both read from the
// mounted Secret; without the bridge (whose key the callout needs) the
// chart refuses to render.
func TestRenderBusAuth(t *testing.T) {
	objs := decodeAll(t, render(t, "--set", "busAuth.existingSecret=tc-bus"))
	sts := objs["StatefulSet"][0].(*appsv1.StatefulSet)
	dep := objs["Deployment"][0].(*appsv1.Deployment)
	for _, c := range []struct {
		name string
		pod  corev1.PodSpec
		env  map[string]string
	}{
		{"ingest", sts.Spec.Template.Spec, map[string]string{
			"THREADCAST_NATS_NKEY": "/etc/threadcast/bus/service.nk", "THREADCAST_NATS_CALLOUT_SEED": "/etc/threadcast/bus/callout.nk"}},
		{"fanout", dep.Spec.Template.Spec, map[string]string{"THREADCAST_NATS_NKEY": "/etc/threadcast/bus/service.nk"}},
	} {
		env := envOf(c.pod.Containers[0])
		for k, want := range c.env {
			if env[k].Value != want {
				t.Errorf("%s env %s = %q, want %q", c.name, k, env[k].Value, want)
			}
		}
		if c.name == "fanout" {
			if _, ok := env["THREADCAST_NATS_CALLOUT_SEED"]; ok {
				t.Error("fanout runs the callout too")
			}
		}
		mounted := false
		for _, m := range c.pod.Containers[0].VolumeMounts {
			mounted = mounted || m.Name == "bus-auth" && m.MountPath == "/etc/threadcast/bus" && m.ReadOnly
		}
		secret := false
		for _, v := range c.pod.Volumes {
			secret = secret || v.Name == "bus-auth" && v.Secret != nil && v.Secret.SecretName == "tc-bus"
		}
		if !mounted || !secret {
			t.Errorf("%s: bus-auth secret mounted %v, volume %v", c.name, mounted, secret)
		}
	}

	cmd := exec.Command(helmBin(), "template", "tc", stageChart(t), "--kube-version", "1.30.0", "--set", "nats.enabled=false",
		"--set", "busAuth.existingSecret=tc-bus", "--set", "ingest.bridge=false")
	if out, err := cmd.CombinedOutput(); err == nil || !bytes.Contains(out, []byte("busAuth needs ingest.bridge")) {
		t.Errorf("busAuth without the bridge: %v %s", err, out)
	}
}
