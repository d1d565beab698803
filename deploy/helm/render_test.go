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
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}, true
	case "v1/Pod":
		return &corev1.Pod{}, true
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

// chartDir is the chart to render: CHART_DIR (check.sh passes its staging
// copy, whose charts/ holds the NATS dependency) or ./threadcast, whose
// charts/ holds the vendored NATS chart.
func chartDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CHART_DIR")
	if dir == "" {
		dir = "threadcast"
	}
	meta, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)- name: nats\n\s+version: (\S+)`).FindSubmatch(meta)
	if m == nil {
		t.Fatal("Chart.yaml has no pinned nats dependency")
	}
	if _, err := os.Stat(filepath.Join(dir, "charts", "nats-"+string(m[1])+".tgz")); err != nil {
		t.Fatalf("the NATS chart %s is not in %s/charts (deploy/helm/check.sh runs helm dependency build): %v", m[1], dir, err)
	}
	return dir
}

// render runs helm template for release tc in namespace threadcast.
func render(t *testing.T, args ...string) []byte {
	t.Helper()
	return renderRelease(t, "tc", args...)
}

func renderRelease(t *testing.T, release string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(helmBin(), append([]string{"template", release, chartDir(t), "--kube-version", "1.30.0", "--namespace", "threadcast"}, args...)...)
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

func (m *serviceMonitor) GetLabels() map[string]string { return m.Metadata.Labels }

// decodeCharts decodes every manifest strictly and groups them by the chart
// that rendered them (label helm.sh/chart: threadcast-<version> or
// nats-<version>), then by kind.
func decodeCharts(t *testing.T, out []byte) map[string]map[string][]any {
	t.Helper()
	charts := map[string]map[string][]any{}
	for _, doc := range splitDocs(out) {
		obj, kind, err := decodeStrict(doc)
		if err != nil {
			t.Fatalf("%v\n--- manifest ---\n%s", err, doc)
		}
		l, ok := obj.(interface{ GetLabels() map[string]string })
		if !ok {
			t.Fatalf("%s: no labels", kind)
		}
		chart, _, _ := strings.Cut(l.GetLabels()["helm.sh/chart"], "-")
		if charts[chart] == nil {
			charts[chart] = map[string][]any{}
		}
		charts[chart][kind] = append(charts[chart][kind], obj)
	}
	for chart := range charts {
		if chart != "threadcast" && chart != "nats" {
			t.Errorf("manifests of an unknown chart %q", chart)
		}
	}
	return charts
}

// decodeAll decodes every manifest strictly and returns Threadcast's own by
// kind.
func decodeAll(t *testing.T, out []byte) map[string][]any {
	t.Helper()
	return decodeCharts(t, out)["threadcast"]
}

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

// TestRenderDefault: the default values but for an external NATS cluster
// at externalNats.urls (TestRenderBundledNATS renders the bundled one).
func TestRenderDefault(t *testing.T) {
	charts := decodeCharts(t, render(t, "--set", "nats.enabled=false"))
	if len(charts["nats"]) != 0 {
		t.Errorf("NATS chart rendered with nats.enabled=false: %v", charts["nats"])
	}
	objs := charts["threadcast"]
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
	charts := decodeCharts(t, render(t, "-f", filepath.Join(chartDir(t), "ci/prod-values.yaml")))
	if len(charts["nats"]) != 0 {
		t.Errorf("NATS chart rendered with an external cluster: %v", charts["nats"])
	}
	objs := charts["threadcast"]
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
	objs := decodeAll(t, render(t, "--set", "nats.enabled=false", "--set", "busAuth.existingSecret=tc-bus"))
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

	cmd := exec.Command(helmBin(), "template", "tc", chartDir(t), "--kube-version", "1.30.0", "--set", "nats.enabled=false",
		"--set", "busAuth.existingSecret=tc-bus", "--set", "ingest.bridge=false")
	if out, err := cmd.CombinedOutput(); err == nil || !bytes.Contains(out, []byte("busAuth needs ingest.bridge")) {
		t.Errorf("busAuth without the bridge: %v %s", err, out)
	}
}

// natsServer is what the rendered NATS chart gives Threadcast to connect to
// and to keep its data on.
type natsServer struct {
	sts     *appsv1.StatefulSet
	client  *corev1.Service // the client Service (not the headless one)
	port    int32           // its client port
	conf    map[string]any  // nats.conf, decoded
	pdb     *policyv1.PodDisruptionBudget
	headSvc *corev1.Service
}

// rawValue matches a member of the NATS chart's nats.conf (JSON but for the
// values it writes raw: $SERVER_NAME, 10Gi).
var rawValue = regexp.MustCompile(`(?m)^(\s*"[^"]*":\s*)(.+?)(,?)$`)

// confJSON quotes nats.conf's raw values so that it decodes as JSON.
func confJSON(conf string) []byte {
	return []byte(rawValue.ReplaceAllStringFunc(conf, func(line string) string {
		m := rawValue.FindStringSubmatch(line)
		v := m[2]
		if v == "{" || v == "[" || json.Valid([]byte(v)) {
			return line
		}
		q, _ := json.Marshal(v)
		return m[1] + string(q) + m[3]
	}))
}

func natsOf(t *testing.T, objs map[string][]any) natsServer {
	t.Helper()
	var n natsServer
	if len(objs["StatefulSet"]) != 1 {
		t.Fatalf("NATS StatefulSets: %d, want 1", len(objs["StatefulSet"]))
	}
	n.sts = objs["StatefulSet"][0].(*appsv1.StatefulSet)
	for _, o := range objs["Service"] {
		svc := o.(*corev1.Service)
		if svc.Spec.ClusterIP == corev1.ClusterIPNone {
			n.headSvc = svc
			continue
		}
		for _, p := range svc.Spec.Ports {
			if p.Name == "nats" {
				if n.client != nil {
					t.Fatalf("two NATS client Services: %s and %s", n.client.Name, svc.Name)
				}
				n.client, n.port = svc, p.Port
			}
		}
	}
	if n.client == nil || n.headSvc == nil {
		t.Fatalf("NATS Services: client %v, headless %v", n.client, n.headSvc)
	}
	for _, o := range objs["ConfigMap"] {
		cm := o.(*corev1.ConfigMap)
		if raw, ok := cm.Data["nats.conf"]; ok {
			if err := json.Unmarshal(confJSON(raw), &n.conf); err != nil {
				t.Fatalf("nats.conf: %v\n%s", err, raw)
			}
			checkConf(t, raw)
		}
	}
	if n.conf == nil {
		t.Fatal("no nats.conf rendered")
	}
	for _, o := range objs["PodDisruptionBudget"] {
		n.pdb = o.(*policyv1.PodDisruptionBudget)
	}
	return n
}

// checkConf has the NATS server named by THREADCAST_NATS_SERVER (check.sh
// builds the one go.mod pins) parse and validate the rendered nats.conf
// (nats-server -t), as each server of the StatefulSet would read it.
func checkConf(t *testing.T, raw string) {
	t.Helper()
	bin := os.Getenv("THREADCAST_NATS_SERVER")
	if bin == "" {
		t.Log("nats.conf not validated: THREADCAST_NATS_SERVER is not set")
		return
	}
	path := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(path, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-t", "-c", path)
	cmd.Env = append(os.Environ(), "SERVER_NAME=tc-nats-0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("nats-server -t refuses the rendered nats.conf: %v\n%s\n%s", err, out, raw)
	}
}

// get walks nested maps of a decoded nats.conf.
func get(m map[string]any, path ...string) any {
	var v any = m
	for _, k := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

// checkPointsAt asserts that a Threadcast container's NATS URL is the NATS
// chart's client Service and port.
func checkPointsAt(t *testing.T, who string, c corev1.Container, n natsServer) {
	t.Helper()
	want := fmt.Sprintf("nats://%s:%d", n.client.Name, n.port)
	if got := envOf(c)["THREADCAST_NATS_URL"].Value; got != want {
		t.Errorf("%s THREADCAST_NATS_URL = %q, want the NATS chart's Service %q", who, got, want)
	}
}

// TestRenderBundledNATS: the default values deploy the official NATS chart
// as a JetStream cluster that survives a node loss (three servers, file
// storage on a volume each, one server per node, at most one down at a
// time), and the Threadcast pods connect to the Service that chart creates,
// whatever the release is called and however the NATS chart's names are
// overridden.
func TestRenderBundledNATS(t *testing.T) {
	for _, tt := range []struct {
		release string
		args    []string
	}{
		{release: "tc"},
		{release: "my-nats"}, // the NATS chart's fullname is then the release name
		{release: "tc", args: []string{"--set", "nats.fullnameOverride=bus"}},
		{release: "tc", args: []string{"--set", "nats.nameOverride=msg"}},
		{release: "tc", args: []string{"--set", "nats.service.name=tc-bus", "--set", "nats.config.nats.port=4333"}},
	} {
		t.Run(tt.release+strings.Join(tt.args, ""), func(t *testing.T) {
			charts := decodeCharts(t, renderRelease(t, tt.release, tt.args...))
			n := natsOf(t, charts["nats"])
			tc := charts["threadcast"]
			checkPointsAt(t, "ingest", tc["StatefulSet"][0].(*appsv1.StatefulSet).Spec.Template.Spec.Containers[0], n)
			checkPointsAt(t, "fanout", tc["Deployment"][0].(*appsv1.Deployment).Spec.Template.Spec.Containers[0], n)
			if tt.args != nil {
				return
			}

			if *n.sts.Spec.Replicas != 3 {
				t.Errorf("NATS servers: %d, want 3", *n.sts.Spec.Replicas)
			}
			if routes, _ := get(n.conf, "cluster", "routes").([]any); len(routes) != 3 {
				t.Errorf("cluster routes %v, want 3", get(n.conf, "cluster", "routes"))
			}
			// JetStream on files, on a PersistentVolumeClaim per server.
			dir, _ := get(n.conf, "jetstream", "store_dir").(string)
			if dir == "" || get(n.conf, "jetstream", "max_memory_store") != float64(0) {
				t.Errorf("jetstream %v: want file storage only", get(n.conf, "jetstream"))
			}
			if len(n.sts.Spec.VolumeClaimTemplates) != 1 {
				t.Fatalf("NATS volume claims: %d, want 1", len(n.sts.Spec.VolumeClaimTemplates))
			}
			pvc := n.sts.Spec.VolumeClaimTemplates[0]
			if q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "10Gi" {
				t.Errorf("JetStream volume %s, want 10Gi", q.String())
			}
			mounted := false
			for _, c := range n.sts.Spec.Template.Spec.Containers {
				for _, m := range c.VolumeMounts {
					mounted = mounted || m.Name == pvc.Name && m.MountPath == dir
				}
			}
			if !mounted {
				t.Errorf("volume %s not mounted at the store dir %s", pvc.Name, dir)
			}
			// One server per node: required anti-affinity on the host name,
			// selecting the servers' own pods.
			aff := n.sts.Spec.Template.Spec.Affinity
			if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
				t.Fatalf("NATS affinity %+v: want one required anti-affinity term", aff)
			}
			term := aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0]
			sel := term.LabelSelector.MatchLabels
			if term.TopologyKey != "kubernetes.io/hostname" || len(sel) == 0 {
				t.Errorf("anti-affinity term %+v", term)
			}
			for k, v := range sel {
				if n.sts.Spec.Template.Labels[k] != v || n.sts.Spec.Selector.MatchLabels[k] != v {
					t.Errorf("anti-affinity selects %s=%s, which the servers' pods do not carry", k, v)
				}
			}
			if n.pdb == nil || n.pdb.Spec.MaxUnavailable == nil || n.pdb.Spec.MaxUnavailable.IntValue() != 1 {
				t.Errorf("NATS PodDisruptionBudget %+v: want maxUnavailable 1", n.pdb)
			}
			if got := envOf(tc["StatefulSet"][0].(*appsv1.StatefulSet).Spec.Template.Spec.Containers[0])["THREADCAST_REPLICAS"].Value; got != "3" {
				t.Errorf("stream replicas %s, want 3 (one per server)", got)
			}
		})
	}
}

// TestRenderBundledNATSLocked: ci/bus-values.yaml locks the bundled NATS
// cluster down as docs/production.md says (the service nkey the only user,
// every other connection decided by the auth callout, authenticated routes),
// and the Threadcast pods connect with that nkey and run that callout.
func TestRenderBundledNATSLocked(t *testing.T) {
	charts := decodeCharts(t, render(t, "-f", filepath.Join(chartDir(t), "ci/bus-values.yaml")))
	n := natsOf(t, charts["nats"])
	tc := charts["threadcast"]
	ingest := tc["StatefulSet"][0].(*appsv1.StatefulSet).Spec.Template.Spec
	fanout := tc["Deployment"][0].(*appsv1.Deployment).Spec.Template.Spec
	checkPointsAt(t, "ingest", ingest.Containers[0], n)
	checkPointsAt(t, "fanout", fanout.Containers[0], n)

	users, _ := get(n.conf, "accounts", "THREADCAST", "users").([]any)
	if len(users) != 1 {
		t.Fatalf("THREADCAST users %v, want the service nkey alone", users)
	}
	service, _ := get(users[0].(map[string]any), "nkey").(string)
	if !strings.HasPrefix(service, "U") {
		t.Errorf("service user %v is not an nkey", users[0])
	}
	callout, _ := get(n.conf, "authorization", "auth_callout").(map[string]any)
	if callout == nil {
		t.Fatalf("no auth_callout in %v", get(n.conf, "authorization"))
	}
	if issuer, _ := callout["issuer"].(string); !strings.HasPrefix(issuer, "A") || callout["account"] != "THREADCAST" {
		t.Errorf("auth_callout %v", callout)
	}
	if au, _ := callout["auth_users"].([]any); len(au) != 1 || au[0] != service {
		t.Errorf("auth_callout auth_users %v, want [%s]", callout["auth_users"], service)
	}
	if get(n.conf, "accounts", "THREADCAST", "jetstream") != "enabled" || get(n.conf, "accounts", "AGENTS") == nil {
		t.Errorf("accounts %v", get(n.conf, "accounts"))
	}
	if get(n.conf, "cluster", "authorization", "user") == nil {
		t.Errorf("routes unauthenticated: %v", get(n.conf, "cluster"))
	}
	for _, c := range []struct {
		name string
		pod  corev1.PodSpec
	}{{"ingest", ingest}, {"fanout", fanout}} {
		env := envOf(c.pod.Containers[0])
		if env["THREADCAST_NATS_NKEY"].Value != "/etc/threadcast/bus/service.nk" {
			t.Errorf("%s connects without the service nkey: %+v", c.name, env["THREADCAST_NATS_NKEY"])
		}
		secret := false
		for _, v := range c.pod.Volumes {
			secret = secret || v.Secret != nil && v.Secret.SecretName == "threadcast-bus"
		}
		if !secret {
			t.Errorf("%s: Secret threadcast-bus not mounted", c.name)
		}
	}
	if envOf(ingest.Containers[0])["THREADCAST_NATS_CALLOUT_SEED"].Value != "/etc/threadcast/bus/callout.nk" {
		t.Error("ingest does not run the auth callout")
	}
	if len(charts["nats"]["Deployment"]) != 0 {
		t.Error("nats-box deployed: it has no credentials the callout accepts")
	}
}
