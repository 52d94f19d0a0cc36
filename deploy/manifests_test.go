package deploy

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/wizardmesh/wizard/examples/services/mesh"
	"github.com/wizardmesh/wizard/gateway/config"
)

const (
	manifestDir = "kubernetes"
	overlay     = "kubernetes/overlays/example"
	// gatewayNodeDrain is how long cmd/wizard-gateway gives its node to
	// drain after the gateway's own grace (server.shutdown_grace): its
	// shutdown takes at most their sum.
	gatewayNodeDrain = 5 * time.Second
)

// objects are the decoded manifests of a build, by kind.
type objects struct {
	deployments []*appsv1.Deployment
	services    []*corev1.Service
	pdbs        []*policyv1.PodDisruptionBudget
	configMaps  []*corev1.ConfigMap
	secrets     []*corev1.Secret
	namespaces  []*corev1.Namespace
}

// kinds maps each kind the manifests may hold to its apiVersion and to
// a strict decoder that files the object in o.
var kinds = map[string]struct {
	apiVersion string
	decode     func(o *objects, doc []byte) error
}{
	"Deployment":          {"apps/v1", decodeInto(func(o *objects) *[]*appsv1.Deployment { return &o.deployments })},
	"Service":             {"v1", decodeInto(func(o *objects) *[]*corev1.Service { return &o.services })},
	"PodDisruptionBudget": {"policy/v1", decodeInto(func(o *objects) *[]*policyv1.PodDisruptionBudget { return &o.pdbs })},
	"ConfigMap":           {"v1", decodeInto(func(o *objects) *[]*corev1.ConfigMap { return &o.configMaps })},
	"Secret":              {"v1", decodeInto(func(o *objects) *[]*corev1.Secret { return &o.secrets })},
	"Namespace":           {"v1", decodeInto(func(o *objects) *[]*corev1.Namespace { return &o.namespaces })},
}

func decodeInto[T any](list func(*objects) *[]*T) func(*objects, []byte) error {
	return func(o *objects, doc []byte) error {
		v := new(T)
		if err := yaml.UnmarshalStrict(doc, v); err != nil {
			return err
		}
		*list(o) = append(*list(o), v)
		return nil
	}
}

// decode decodes every document of a YAML stream strictly (an unknown
// or duplicate field is an error) into the type its kind names.
func (o *objects) decode(name string, stream []byte) error {
	for i, doc := range splitDocuments(stream) {
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return fmt.Errorf("%s, document %d: %w", name, i+1, err)
		}
		k, ok := kinds[tm.Kind]
		switch {
		case !ok:
			return fmt.Errorf("%s, document %d: kind %q is not one the test knows", name, i+1, tm.Kind)
		case tm.APIVersion != k.apiVersion:
			return fmt.Errorf("%s, document %d: %s has apiVersion %q, want %q", name, i+1, tm.Kind, tm.APIVersion, k.apiVersion)
		}
		if err := k.decode(o, doc); err != nil {
			return fmt.Errorf("%s, document %d (%s): %w", name, i+1, tm.Kind, err)
		}
	}
	return nil
}

// splitDocuments splits a YAML stream at its "---" lines, dropping
// documents that hold only comments.
func splitDocuments(stream []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		if hasContent(cur.Bytes()) {
			docs = append(docs, bytes.Clone(cur.Bytes()))
		}
		cur.Reset()
	}
	for line := range bytes.Lines(stream) {
		if string(bytes.TrimRight(line, " \r\n")) == "---" {
			flush()
			continue
		}
		cur.Write(line)
	}
	flush()
	return docs
}

func hasContent(doc []byte) bool {
	for line := range bytes.Lines(doc) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			return true
		}
	}
	return false
}

// readKustomization decodes dir's kustomization.yaml strictly.
func readKustomization(t *testing.T, dir string) *kusttypes.Kustomization {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kusttypes.Kustomization
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatalf("%s/kustomization.yaml: %v", dir, err)
	}
	return &k
}

// TestFilesDecodeStrictly: every YAML file under kubernetes/ is a
// kustomization, a resource one lists (each document decoded strictly
// into its Kubernetes type), or a generator's file one lists (the
// gateway's configuration, loaded by the gateway's parser, which refuses
// unknown keys too); none is left out.
func TestFilesDecodeStrictly(t *testing.T) {
	roles := map[string]string{} // file -> "kustomization", "resource", "configmap", "secret"
	err := filepath.WalkDir(manifestDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "kustomization.yaml" {
			return err
		}
		dir := filepath.Dir(p)
		roles[p] = "kustomization"
		k := readKustomization(t, dir)
		for _, r := range k.Resources {
			if fi, err := os.Stat(filepath.Join(dir, r)); err == nil && !fi.IsDir() {
				roles[filepath.Join(dir, r)] = "resource"
			} else if err != nil {
				t.Errorf("%s: resource %s: %v", p, r, err)
			}
		}
		for _, g := range k.ConfigMapGenerator {
			for _, f := range g.FileSources {
				roles[filepath.Join(dir, generatorFile(f))] = "configmap"
			}
		}
		for _, g := range k.SecretGenerator {
			for _, f := range g.FileSources {
				roles[filepath.Join(dir, generatorFile(f))] = "secret"
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(manifestDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch roles[p] {
		case "kustomization", "secret":
		case "resource":
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			var o objects
			if err := o.decode(p, b); err != nil {
				t.Error(err)
			}
		case "configmap":
			if _, err := config.Load(p); err != nil {
				t.Errorf("%s, the gateway's configuration: %v", p, err)
			}
		default:
			t.Errorf("%s is in no kustomization's resources or generators", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// generatorFile is the file of a generator's source, "key=file" or
// "file".
func generatorFile(src string) string {
	if _, f, ok := strings.Cut(src, "="); ok {
		return f
	}
	return src
}

// build runs kustomize (its library, the kustomize command's engine) on
// dir and decodes the result strictly.
func build(t *testing.T, dir string) *objects {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	var o objects
	if err := o.decode("kustomize build "+dir, out); err != nil {
		t.Fatal(err)
	}
	return &o
}

// TestOverlay builds the example overlay and checks that its objects
// agree: probes on the containers' ports, selectors on the Deployments'
// labels, Secrets and ConfigMaps that exist, files in the volumes that
// hold them, and a grace period that covers preStop and the drain.
func TestOverlay(t *testing.T) {
	o := build(t, overlay)
	if len(o.deployments) == 0 {
		t.Fatal("no Deployment")
	}
	for _, d := range o.deployments {
		t.Run(d.Name, func(t *testing.T) {
			checkPodSpec(t, o, d)
			checkSelected(t, d)
		})
	}
	for _, s := range o.services {
		t.Run("Service "+s.Name, func(t *testing.T) { checkService(t, o, s) })
	}
	for _, p := range o.pdbs {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil {
			t.Errorf("PodDisruptionBudget %s: %v", p.Name, err)
			continue
		}
		if got := selected(o, sel); len(got) != 1 {
			t.Errorf("PodDisruptionBudget %s selects %d Deployments' pods (%v), want 1", p.Name, len(got), got)
		}
	}
	for _, d := range o.deployments {
		if !slices.ContainsFunc(o.pdbs, func(p *policyv1.PodDisruptionBudget) bool {
			sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
			return err == nil && sel.Matches(labels.Set(d.Spec.Template.Labels))
		}) {
			t.Errorf("Deployment %s has no PodDisruptionBudget", d.Name)
		}
	}
}

// TestBaseSecretsFromOverlay: the Secrets the base's Deployments mount
// are the ones the overlay generates, by name, before kustomize suffixes
// them.
func TestBaseSecretsFromOverlay(t *testing.T) {
	base := build(t, "kubernetes/base")
	var generated []string
	for _, g := range readKustomization(t, overlay).SecretGenerator {
		generated = append(generated, g.Name)
	}
	for _, d := range base.deployments {
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Secret != nil && !slices.Contains(generated, v.Secret.SecretName) {
				t.Errorf("Deployment %s mounts Secret %s, which the overlay does not generate (it generates %v)", d.Name, v.Secret.SecretName, generated)
			}
		}
	}
}

// checkSelected: the Deployment's selector matches its pods' labels.
func checkSelected(t *testing.T, d *appsv1.Deployment) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("selector %v does not match the pods' labels %v", sel, d.Spec.Template.Labels)
	}
	if s := d.Spec.Strategy.RollingUpdate; s == nil || s.MaxUnavailable == nil || s.MaxUnavailable.IntValue() != 0 {
		t.Errorf("rolling update %+v, want maxUnavailable 0 (a new pod ready before an old one goes)", s)
	}
}

func checkPodSpec(t *testing.T, o *objects, d *appsv1.Deployment) {
	spec := d.Spec.Template.Spec
	if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("the pod does not run as non-root (securityContext.runAsNonRoot)")
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("the container's root file system is writable, or it may escalate privileges")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Error("no cpu or memory request")
	}
	for name, p := range map[string]*corev1.Probe{"readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("no HTTP %s", name)
			continue
		}
		if _, ok := containerPort(c, p.HTTPGet.Port, corev1.ProtocolTCP); !ok {
			t.Errorf("%s on port %s, which the container does not declare (TCP)", name, p.HTTPGet.Port.String())
		}
	}
	if p := c.ReadinessProbe; p != nil && p.HTTPGet != nil && p.HTTPGet.Path != "/readyz" {
		t.Errorf("readinessProbe on %s, want /readyz", p.HTTPGet.Path)
	}
	if p := c.LivenessProbe; p != nil && p.HTTPGet != nil && p.HTTPGet.Path != "/healthz" {
		t.Errorf("livenessProbe on %s, want /healthz", p.HTTPGet.Path)
	}
	volumes := mountedFiles(t, o, spec, c)
	image := imageName(c.Image)
	if _, err := os.Stat(filepath.Join("images", image+".Dockerfile")); err != nil {
		t.Errorf("image %s: no images/%s.Dockerfile", c.Image, image)
	}
	var drain time.Duration
	switch image {
	case "wizard-gateway":
		cfg := gatewayConfig(t, o, c, volumes)
		drain = cfg.Server.ShutdownGrace + gatewayNodeDrain
		for _, f := range []string{cfg.Mesh.GossipKeyFile, cfg.Mesh.TLS.CertFile, cfg.Mesh.TLS.KeyFile, cfg.Mesh.TLS.CAFile} {
			checkFile(t, volumes, "the gateway's configuration", f)
		}
		checkDNSSeeds(t, o, cfg.Mesh.DNS)
		if !fromPodIP(c, "WIZARD_GATEWAY_GOSSIP_ADVERTISE") {
			t.Error("the gateway does not advertise its pod's IP for gossip (WIZARD_GATEWAY_GOSSIP_ADVERTISE from status.podIP)")
		}
	case "mathserver", "usersserver":
		drain = mesh.DrainTimeout
		args := flagArgs(c.Args)
		for _, f := range []string{"gossip-key-file", "tls-cert", "tls-key", "tls-ca"} {
			checkFile(t, volumes, "-"+f, args[f])
		}
		checkDNSSeeds(t, o, strings.Split(args["dns"], ","))
		if v, ok := strings.CutPrefix(args["gossip-advertise"], "$("); !ok || !fromPodIP(c, strings.TrimSuffix(v, ")")) {
			t.Errorf("-gossip-advertise=%s is not the pod's IP (a variable from status.podIP)", args["gossip-advertise"])
		}
		if p := c.ReadinessProbe; p != nil && p.HTTPGet != nil {
			port, _ := containerPort(c, p.HTTPGet.Port, corev1.ProtocolTCP)
			if want := fmt.Sprintf(":%d", port); args["health-addr"] != want {
				t.Errorf("-health-addr=%s, but the probes go to port %d", args["health-addr"], port)
			}
		}
	default:
		t.Fatalf("image %q: the test knows no drain time of it", image)
	}
	var preStop time.Duration
	if l := c.Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Sleep != nil {
		preStop = time.Duration(l.PreStop.Sleep.Seconds) * time.Second
	} else {
		t.Error("no preStop sleep")
	}
	grace := time.Duration(0)
	if spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	}
	if preStop+drain > grace {
		t.Errorf("terminationGracePeriodSeconds %v is shorter than the preStop sleep %v and the drain %v", grace, preStop, drain)
	}
}

// fromPodIP reports whether the container's environment variable name
// is the pod's IP, from the downward API.
func fromPodIP(c corev1.Container, name string) bool {
	return slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP"
	})
}

// flagArgs maps a container's "-name=value" arguments by name.
func flagArgs(args []string) map[string]string {
	m := map[string]string{}
	for _, a := range args {
		if name, value, ok := strings.Cut(strings.TrimLeft(a, "-"), "="); ok {
			m[name] = value
		}
	}
	return m
}

// imageName is an image reference's last path element, without tag.
func imageName(image string) string {
	name := path.Base(image)
	name, _, _ = strings.Cut(name, "@")
	name, _, _ = strings.Cut(name, ":")
	return name
}

// containerPort resolves a probe's or Service's port, by name or number,
// to one the container declares with protocol proto.
func containerPort(c corev1.Container, port intstr.IntOrString, proto corev1.Protocol) (int32, bool) {
	for _, p := range c.Ports {
		if p.Protocol != proto && !(p.Protocol == "" && proto == corev1.ProtocolTCP) {
			continue
		}
		if port.Type == intstr.String && p.Name == port.StrVal || port.Type == intstr.Int && p.ContainerPort == port.IntVal {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

// mountedFiles lists the files the container sees from its Secret and
// ConfigMap volumes (mount path + key), each with its content; a volume
// whose Secret or ConfigMap does not exist is an error.
func mountedFiles(t *testing.T, o *objects, spec corev1.PodSpec, c corev1.Container) map[string]string {
	files := map[string]string{}
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 {
			t.Errorf("volume mount %s: no such volume", m.Name)
			continue
		}
		var data map[string]string
		switch v := spec.Volumes[i]; {
		case v.Secret != nil:
			j := slices.IndexFunc(o.secrets, func(s *corev1.Secret) bool { return s.Name == v.Secret.SecretName })
			if j < 0 {
				t.Errorf("volume %s: no Secret %s in the build", v.Name, v.Secret.SecretName)
				continue
			}
			data = map[string]string{}
			for k, b := range o.secrets[j].Data {
				data[k] = string(b)
			}
		case v.ConfigMap != nil:
			j := slices.IndexFunc(o.configMaps, func(cm *corev1.ConfigMap) bool { return cm.Name == v.ConfigMap.Name })
			if j < 0 {
				t.Errorf("volume %s: no ConfigMap %s in the build", v.Name, v.ConfigMap.Name)
				continue
			}
			data = o.configMaps[j].Data
		}
		for k, v := range data {
			files[path.Join(m.MountPath, k)] = v
		}
	}
	return files
}

func checkFile(t *testing.T, files map[string]string, what, file string) {
	t.Helper()
	if _, ok := files[file]; !ok {
		t.Errorf("%s names %q, which no Secret or ConfigMap volume holds", what, file)
	}
}

// gatewayConfig loads the gateway's configuration from the file its -c
// argument names in its ConfigMap volume.
func gatewayConfig(t *testing.T, o *objects, c corev1.Container, files map[string]string) *config.Config {
	t.Helper()
	file := flagArgs(c.Args)["c"]
	text, ok := files[file]
	if !ok {
		t.Fatalf("-c %q: no ConfigMap volume holds it", file)
	}
	cfg, err := config.Parse(path.Base(file), []byte(text))
	if err != nil {
		t.Fatalf("the gateway's configuration: %v", err)
	}
	return cfg
}

// checkDNSSeeds: the DNS seeds name a headless Service of the build
// whose pods include every Deployment's (the whole mesh), with the
// gossip ports.
func checkDNSSeeds(t *testing.T, o *objects, names []string) {
	t.Helper()
	if len(names) == 0 || names[0] == "" {
		t.Error("no DNS seeds")
		return
	}
	for _, n := range names {
		host, _, _ := strings.Cut(n, ":")
		i := slices.IndexFunc(o.services, func(s *corev1.Service) bool { return s.Name == host })
		if i < 0 {
			t.Errorf("DNS seed %q names no Service of the build", n)
			continue
		}
		s := o.services[i]
		if s.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("DNS seed %q: Service %s is not headless (clusterIP: None): its name resolves to one virtual IP, not to the members", n, s.Name)
		}
		sel := labels.SelectorFromSet(s.Spec.Selector)
		for _, d := range o.deployments {
			if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				t.Errorf("DNS seed %q: Service %s does not select Deployment %s's pods", n, s.Name, d.Name)
			}
		}
	}
}

// checkService: the Service selects the pods of at least one Deployment,
// and each of its target ports is one those pods declare.
func checkService(t *testing.T, o *objects, s *corev1.Service) {
	sel := labels.SelectorFromSet(s.Spec.Selector)
	got := selected(o, sel)
	if len(got) == 0 {
		t.Fatalf("selector %v matches no Deployment's pods", s.Spec.Selector)
	}
	for _, d := range o.deployments {
		if !slices.Contains(got, d.Name) {
			continue
		}
		for _, p := range s.Spec.Ports {
			if _, ok := containerPort(d.Spec.Template.Spec.Containers[0], p.TargetPort, cmpProto(p.Protocol)); !ok {
				t.Errorf("port %s: target port %s (%s) is not one Deployment %s declares", p.Name, p.TargetPort.String(), cmpProto(p.Protocol), d.Name)
			}
		}
	}
}

func cmpProto(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

// selected names the Deployments whose pods sel matches.
func selected(o *objects, sel labels.Selector) []string {
	var out []string
	for _, d := range o.deployments {
		if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			out = append(out, d.Name)
		}
	}
	return out
}
