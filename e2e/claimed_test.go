//go:build e2e

package e2e

import (
	"archive/zip"
	"cmp"
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// A claimed cluster is a second control plane on loopback standing for one cluster a tenant
// claims: its own etcd, kube-apiserver (with its own audit log), kube-controller-manager
// (namespaces, garbage collection, Deployments) and kube-scheduler, with the CRDs of what runs
// there before the function: Flux's and prometheus-operator's. Its nodes are kwok's
// (sigs.k8s.io/kwok): the scheduler binds pods to them and kwok plays their kubelet
// (startNodes). Its Flux is the real one (startFlux), which installs Karpenter's chart, CRDs
// included. The real provider-kubernetes applies the function's Objects to it through the
// kubeconfig Secret its ProviderConfig names. What runs in a real claimed cluster and cannot run
// here is played by standIns, named as stand-ins: Karpenter's cloud side, the kubelet running the
// final check's script, and the kubelet running the access check's script against a stand-in AWS
// and EKS Pod Identity.
type claimedCluster struct {
	name string
	*controlPlane
	// finalChecks are the final check's Pods' processes (finalCheckKubelet), by Pod;
	// accessChecks the access check's (accessCheckKubelet): standIns' own.
	finalChecks  map[types.UID]*proc
	accessChecks map[types.UID]*accessCheckRun
	// admittedEarly, if set, tells which access check Pods EKS admitted before the Pod Identity
	// association had propagated (podIdentityEnv). Set before standIns starts; only standIns
	// calls it.
	admittedEarly func(*corev1.Pod) bool
	// refusal is how the cluster's AWS answers otherwise than a healthy account, for the access
	// check Pods started from when it is set (refuse).
	refusal atomic.Pointer[awsRefusal]
	// checksHeld: the access check Pods that are Running stay so, their script not started, as a
	// slow check would keep them (TestWalkToReady).
	checksHeld atomic.Bool
	// pools is what Karpenter reports of each NodePool's nodes and resources (karpenter): an
	// empty pool when it holds none for the pool's name.
	pools sync.Map // pool name → poolReport
	// realKarpenter: Karpenter's real controller works on its objects (startKarpenter), so the
	// stand-in does not. Set before standIns starts.
	realKarpenter bool
	// karpenterLog is the log of the Karpenter controller last started for it (startKarpenter).
	karpenterLog string
	// poll is how often the provider-kubernetes that applies to it re-reads a Ready Object
	// (claimedOptions.poll, or its default).
	poll time.Duration
}

var podGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// startClaimedCluster starts the claimed cluster name, installs its CRDs and the namespace
// Flux runs in, and starts its Flux on base. Its processes join the suite's, so their logs are listed (under
// logs/claimed-<name>/, or claimed-<name>-<n>/ for the nth of that name) and they stop with it at the latest. It returns what it started even
// with an error, for the caller to stop.
func startClaimedCluster(ctx context.Context, name string, base *gitOpsBase) (*claimedCluster, error) {
	// A cluster of the same name started before, by another test of this process, keeps its
	// folders: its etcd's data must not become this one's.
	folder := "claimed-" + name
	for n := 2; ; n++ {
		if _, err := os.Stat(filepath.Join(cp.dir, folder)); os.IsNotExist(err) {
			break
		}
		folder = fmt.Sprintf("claimed-%s-%d", name, n)
	}
	c := &claimedCluster{name: name, controlPlane: &controlPlane{
		dir: filepath.Join(cp.dir, folder), logDir: filepath.Join(cp.logDir, folder), bins: cp.bins,
		nodes: true,
	}, finalChecks: map[types.UID]*proc{}, accessChecks: map[types.UID]*accessCheckRun{}}
	if err := os.MkdirAll(c.logDir, 0o755); err != nil {
		return nil, err
	}
	err := c.startKubernetes(ctx)
	cp.procs = append(cp.procs, c.procs...)
	if err != nil {
		return c, err
	}
	crds, err := claimedCRDs(c.dir)
	if err != nil {
		return c, err
	}
	if err := c.installCRDs(ctx, crds...); err != nil {
		return c, err
	}
	if err := c.ensureNamespace(ctx, "flux-system"); err != nil {
		return c, err
	}
	started := len(c.procs)
	err = c.startNodes(ctx)
	if err == nil {
		err = c.startFlux(ctx, base)
	}
	cp.procs = append(cp.procs, c.procs[started:]...)
	return c, err
}

// startNodes starts the claimed cluster's kube-scheduler and kwok (E2E_KWOK), which plays the
// kubelet of every node of the cluster (it has no real one), and adds two system nodes in two
// zones: labelled and tainted as the platform's function input says its system nodes are
// (controller's nodeSelector and tolerations), which is where the access check and the
// controller run (its two replicas on two nodes: the chart's anti-affinity).
//
// kwok changes pods and nodes through Stages (kwok v0.8.0, kwok.x-k8s.io/v1alpha1): its
// binary holds none, so the suite gives it kwok's own, read in place from its module
// (E2E_KWOK_STAGES, kustomize/stage): a node initialised Ready; a pod bound to it Running and
// Ready; a pod deleted, confirmed; and one of the suite's own, podReadyAgain. The access check's
// Pod then ends as its script does, run by accessCheckKubelet.
func (c *claimedCluster) startNodes(ctx context.Context) error {
	bin, stages := os.Getenv("E2E_KWOK"), os.Getenv("E2E_KWOK_STAGES")
	if bin == "" || stages == "" {
		return fmt.Errorf("E2E_KWOK and E2E_KWOK_STAGES must be set: run the suite with `make e2e-test`")
	}
	scheduler, err := startProc(c.logDir, "kube-scheduler", nil, c.bins.scheduler,
		"--kubeconfig="+c.kubeconfig, "--leader-elect=false", "--secure-port=0")
	if err != nil {
		return err
	}
	c.procs = append(c.procs, scheduler.asKubelet())
	var config []string
	for _, f := range []string{"node/fast/node-initialize.yaml", "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
		"pod/fast/pod-ready.yaml", "pod/fast/pod-delete.yaml"} {
		b, err := os.ReadFile(filepath.Join(stages, f))
		if err != nil {
			return err
		}
		config = append(config, string(b))
	}
	config = append(config, podReadyAgain)
	path := filepath.Join(c.dir, "kwok.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(config, "\n---\n")), 0o644); err != nil {
		return err
	}
	// Its nodes renew their Lease, as a kubelet does, so the node lifecycle controller keeps
	// them Ready (kube-controller-manager's default grace period is 50s).
	kwok, err := startProc(c.logDir, "kwok", nil, bin, "--kubeconfig="+c.kubeconfig, "--config="+path, "--manage-all-nodes=true",
		"--node-lease-duration-seconds=40")
	if err != nil {
		return err
	}
	c.procs = append(c.procs, kwok.asKubelet())
	declared, err := c.declared()
	if err != nil {
		return err
	}
	region, _ := declared["region"].(string)
	for i, zone := range systemZones {
		if err := c.addSystemNode(ctx, fmt.Sprintf("system-%d", i), region+zone); err != nil {
			return err
		}
	}
	return nil
}

// podReadyAgain is the suite's own kwok Stage, part of its stand-in for the kubelet: a running
// Pod whose Ready condition someone else set False is Ready again. When a node's Lease goes
// stale (its API server down a minute, or kwok starved of CPU under the suite's four shards),
// kube-controller-manager marks each of its Pods not Ready (v1.35.4
// pkg/controller/util/node/controller_utils.go, MarkPodsNotReady: the Ready condition alone).
// A kubelet that is still there puts it back within its status sync (pkg/kubelet/status/
// status_manager.go: needsReconcile, "kubelet should be the source of truth of pod status",
// syncPeriod 10s); kwok's own Stages ready a Pod only while it is Pending, so the controller's
// Deployment stayed unavailable for good in one CI run.
const podReadyAgain = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready-again
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Running'
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values:
      - 'True'
  delay:
    durationMilliseconds: 10000
  next:
    statusTemplate: |
      conditions:
      - lastTransitionTime: {{ Now | Quote }}
        status: "True"
        type: Ready
`

// declared is the claimed cluster as the claim API's shipped function input declares it in its
// tenancy.
func (c *claimedCluster) declared() (map[string]any, error) {
	input, err := shippedInput(claimAPI)
	if err != nil {
		return nil, err
	}
	clusters, _, _ := unstructured.NestedSlice(input, "tenancy", "clusters")
	i := slices.IndexFunc(clusters, func(cl any) bool { return cl.(map[string]any)["name"] == c.name })
	if i < 0 {
		return nil, fmt.Errorf("the tenancy declares no cluster %q", c.name)
	}
	return clusters[i].(map[string]any), nil
}

// systemZones are the zones, in the cluster's region, of the claimed cluster's system nodes: one
// node each.
var systemZones = []string{"a", "b"}

// addSystemNode adds a node kwok manages in zone, labelled with the platform's controller
// nodeSelector and tainted with a NoSchedule taint for each of its controller tolerations (the
// claim API's shipped Composition), with the labels a kubelet and EKS give every node (hostname,
// OS, architecture, zone: k8s.io/api core/v1 well_known_labels.go), and waits until kwok has it
// Ready and the node lifecycle controller has lifted the not-ready taint the API server put on it.
func (c *claimedCluster) addSystemNode(ctx context.Context, name, zone string) error {
	input, err := shippedInput(claimAPI)
	if err != nil {
		return err
	}
	selector, _, _ := unstructured.NestedStringMap(input, "controller", "nodeSelector")
	tolerations, _, _ := unstructured.NestedSlice(input, "controller", "tolerations")
	labels := map[string]string{corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
		corev1.LabelTopologyZone: zone}
	maps.Copy(labels, selector)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels,
		Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}}}
	for _, tol := range tolerations {
		m := tol.(map[string]any)
		key, _ := m["key"].(string)
		value, _ := m["value"].(string)
		effect, _ := m["effect"].(string)
		if effect == "" {
			effect = string(corev1.TaintEffectNoSchedule)
		}
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)})
	}
	if _, err := c.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return err
	}
	return waitFor(ctx, time.Minute, "kwok's node "+name+" Ready and schedulable", func() (bool, error) {
		n, err := c.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady }) {
			return false, nil
		}
		return slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		}), nil
	})
}

// claimedCRDs are the files of the CRDs a claimed cluster holds before the function puts
// anything there: the three Flux controllers' (fluxCRDs) and prometheus-operator's PodMonitor and
// PrometheusRule, which the monitoring base applies, from the zip of the prometheus-operator
// test/flux validates that base against (prometheusOperatorModule), written under dir.
// Karpenter's come with its chart.
func claimedCRDs(dir string) ([]string, error) {
	files, err := fluxCRDs()
	if err != nil {
		return nil, err
	}
	module, err := prometheusOperatorModule()
	if err != nil {
		return nil, err
	}
	zipPath, err := moduleZip(module)
	if err != nil {
		return nil, err
	}
	z, err := zip.OpenReader(zipPath)
	if err != nil {
		return nil, err
	}
	defer z.Close()
	out := filepath.Join(dir, "prometheus-operator-crds")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	for _, name := range []string{"monitoring.coreos.com_podmonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml"} {
		i := slices.IndexFunc(z.File, func(f *zip.File) bool { return f.Name == module+"/example/prometheus-operator-crd/"+name })
		if i < 0 {
			return nil, fmt.Errorf("%s holds no example/prometheus-operator-crd/%s", module, name)
		}
		b, err := readZipFile(z.File[i])
		if err != nil {
			return nil, err
		}
		path := filepath.Join(out, name)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return nil, err
		}
		files = append(files, path)
	}
	return files, nil
}

// prometheusOperatorModule is the prometheus-operator (path@version) test/flux validates the
// monitoring base against, read from where test/flux names it (monitoring_test.go).
func prometheusOperatorModule() (string, error) {
	const file = "../test/flux/monitoring_test.go"
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`prometheusOperator = module\{"([^"]+)", "([^"]+)"`).FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("%s names no prometheusOperator module", file)
	}
	return string(m[1]) + "@" + string(m[2]), nil
}

// connect writes the claimed cluster's admin kubeconfig into the Secret the hub's provider
// configs for it name (installDelivery).
func (c *claimedCluster) connect(ctx context.Context) error {
	secret, ok := cp.kubeconfigSecrets[c.name]
	if !ok {
		return fmt.Errorf("the tenancy declares no cluster %q", c.name)
	}
	b, err := os.ReadFile(c.kubeconfig)
	if err != nil {
		return err
	}
	return cp.apply(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": secret, "namespace": "crossplane-system"},
		"stringData": map[string]any{"kubeconfig": string(b)},
	}})
}

// startProviderKubernetes runs the real provider-kubernetes (E2E_PROVIDER_KUBERNETES) against
// the hub, out of cluster. v1.3.1 always serves its Object conversion webhook (cmd/provider,
// certificates from TLS_SERVER_CERTS_DIR): it gets a loopback certificate from the suite's CA,
// and no CRD points at it (the suite serves the Object CRDs at their storage versions alone).
// args are more of its flags. It returns once its health probe answers.
func startProviderKubernetes(ctx context.Context, args ...string) (*proc, error) {
	bin := os.Getenv("E2E_PROVIDER_KUBERNETES")
	if bin == "" {
		return nil, fmt.Errorf("E2E_PROVIDER_KUBERNETES is not set: run the suite with `make e2e-test`")
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	serving, err := cp.ca.issue("provider-kubernetes", nil, []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		return nil, err
	}
	certs := filepath.Join(cp.dir, "provider-kubernetes-tls")
	if err := os.MkdirAll(certs, 0o700); err != nil {
		return nil, err
	}
	for name, b := range map[string][]byte{"tls.crt": serving.certPEM, "tls.key": serving.keyPEM} {
		if err := os.WriteFile(filepath.Join(certs, name), b, 0o600); err != nil {
			return nil, err
		}
	}
	health := fmt.Sprintf("127.0.0.1:%d", ports[1])
	flags := append([]string{"--debug", fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", ports[0]), "--health-probe-bind-addr=" + health,
		fmt.Sprintf("--webhook-port=%d", ports[2])}, args...)
	p, err := startProc(cp.logDir, "provider-kubernetes", []string{"KUBECONFIG=" + cp.kubeconfig, "TLS_SERVER_CERTS_DIR=" + certs}, bin, flags...)
	if err != nil {
		return nil, err
	}
	return p.asKubelet(), providerHealthy(ctx, p)
}

// providerHealthy returns once provider-kubernetes' health probe, at the address it was started
// with, answers.
func providerHealthy(ctx context.Context, p *proc) error {
	var health string
	for _, a := range p.args {
		if v, ok := strings.CutPrefix(a, "--health-probe-bind-addr="); ok {
			health = v
		}
	}
	return waitFor(ctx, time.Minute, "provider-kubernetes healthy", func() (bool, error) {
		if done, err := p.gone(); done {
			return false, fmt.Errorf("provider-kubernetes exited: %v", err)
		}
		resp, err := http.Get("http://" + health + "/healthz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// standIns plays, in the claimed cluster, the parts of a real one that cannot run here, and
// nothing more, every 500ms until ctx ends: Karpenter's work on its objects (karpenter), unless
// its real controller runs (realKarpenter), and the kubelet's running of the final check's and
// the access check's containers (finalCheckKubelet, accessCheckKubelet).
func (c *claimedCluster) standIns(ctx context.Context) {
	for ctx.Err() == nil {
		if !c.realKarpenter {
			c.karpenter(ctx)
		}
		c.finalCheckKubelet(ctx)
		c.accessCheckKubelet(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	for _, run := range c.finalChecks {
		run.stop(time.Second)
	}
	for _, run := range c.accessChecks {
		run.stop(time.Second)
	}
}

// remote is what the claimed cluster holds of an Object's manifest: nil when it holds nothing.
func (c *claimedCluster) remote(ctx context.Context, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	manifest, _, _ := unstructured.NestedMap(o.Object, "spec", "forProvider", "manifest")
	m := &unstructured.Unstructured{Object: manifest}
	gvr, namespaced, err := c.gvr(m)
	if err != nil {
		return nil, err
	}
	r := c.dyn.Resource(gvr)
	var got *unstructured.Unstructured
	if namespaced {
		got, err = r.Namespace(m.GetNamespace()).Get(ctx, m.GetName(), metav1.GetOptions{})
	} else {
		got, err = r.Get(ctx, m.GetName(), metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return got, err
}

// claimedOptions say how realClaimedClusters starts what it starts.
type claimedOptions struct {
	// prepare, if not nil, is called on each cluster before its stand-ins start.
	prepare func(*claimedCluster)
	// poll is provider-kubernetes' --poll, how often it re-reads a Ready Object: its default
	// (defaultProviderPoll) when zero.
	poll time.Duration
}

// defaultProviderPoll is provider-kubernetes v1.3.1's --poll by default (cmd/provider/main.go).
const defaultProviderPoll = 10 * time.Minute

// realClaimedFailing is for the tests in which what provider-kubernetes observed of a Ready
// Object changes in the claimed cluster (a Kustomization failing, a pool's use): the provider
// re-reads it every 20 s, where its default, 10 minutes (--poll, cmd/provider/main.go), would
// have the request learn it up to 11 minutes later. A platform that wants to hear of it sooner
// sets --poll so too (docs/operating.md).
var realClaimedFailing = claimedOptions{poll: 20 * time.Second}

// realClaimedClusters starts, for t, the claimed clusters named (each its own control plane with
// its real Flux on one GitOps base, connected to the hub through the provider configs the
// tenancy declares for it, with its stand-ins), then the real provider-kubernetes, and has the
// fake stop playing provider-kubernetes meanwhile: from then on, the function's Objects are
// applied and observed by the real provider in real clusters. Everything stops when t ends,
// after the requests t created are gone (their cleanups were registered later, so run first).
func realClaimedClusters(t *testing.T, o claimedOptions, names ...string) (map[string]*claimedCluster, *proc, *gitOpsBase) {
	t.Helper()
	// Not t.Context(), which ends before t's cleanups run: the stand-ins must go on playing
	// Karpenter and the kubelets while the requests t created are deleted by theirs.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // registered first, so run last
	start := time.Now()
	base, err := serveGitOpsBase(t.TempDir())
	t.Cleanup(base.close)
	if err != nil {
		t.Fatal(err)
	}
	claimed := map[string]*claimedCluster{}
	for _, name := range names {
		c, err := startClaimedCluster(ctx, name, base)
		if c != nil {
			t.Cleanup(c.stop) // last, once everything of the requests is gone from it
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := c.connect(ctx); err != nil {
			t.Fatal(err)
		}
		if o.prepare != nil {
			o.prepare(c)
		}
		// With its --poll-jitter-percentage by default, 10 (cmd/provider/main.go), on top.
		c.poll = cmp.Or(o.poll, defaultProviderPoll) * 110 / 100
		go c.standIns(ctx)
		claimed[name] = c
	}
	fake.realObjects.Store(true)
	t.Cleanup(func() { fake.realObjects.Store(false) })
	var args []string
	if o.poll != 0 {
		args = append(args, "--poll="+o.poll.String())
	}
	provider, err := startProviderKubernetes(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { provider.stop(10 * time.Second) })
	t.Logf("claimed clusters %s with their Flux (the base at %s, Karpenter's chart at %s), and provider-kubernetes %s, up in %.1fs",
		strings.Join(names, " and "), base.repoURL, base.chartRef, filepath.Base(os.Getenv("E2E_PROVIDER_KUBERNETES")), time.Since(start).Seconds())
	return claimed, provider, base
}

// TestRealProviderKubernetes walks a request, through each API at once, to Ready and uninstalls
// it with the real provider-kubernetes between the function and a real claimed cluster: the
// claim's for prod-eu (team-a), the namespaced XR's for prod-us (team-b), each its own control
// plane with its real Flux. The e2e's fake still plays provider-aws, and stops playing
// provider-kubernetes while this test runs; kwok plays the claimed clusters' kubelets, and a
// stand-in Karpenter's cloud side (standIns). It proves that the function's readiness rules hold
// on what the real provider and the real Flux write: every step goes Ready, each Object's
// observed manifest is the claimed cluster's object (same UID), helm-controller installed the
// chart (its controller Available on the system nodes), kustomize-controller applied the pools,
// which Karpenter's CRDs admitted and the observe-only Objects read back. The namespaced XR
// first meets prod-us without its Flux source, then with a base whose HelmRelease is not the one
// its patches target, which kustomize-controller reports and the XR shows until the base is
// right (brokenSource); once installed, it is upgraded a minor, helm-controller upgrading the
// chart before the pools move; the downgrade back across the minor is refused, and a rollback
// within the new minor completes in the same order (upgradedByFlux). Uninstalled, the claimed
// cluster holds nothing of the request. The claim's walk goes through
// the faults of claimedFaults: prod-eu's API server unreachable for a minute, provider-kubernetes
// and Flux's controllers killed, mid-walk (helm-controller mid-install), once Ready and
// mid-uninstall. The namespaced XR's first access check Pod gets no credentials, and the function
// retries it (accessCheckRetried).
func TestRealProviderKubernetes(t *testing.T) {
	timed(t)
	claimed, provider, base := realClaimedClusters(t, claimedOptions{prepare: func(c *claimedCluster) {
		if c.name == "prod-us" {
			// The namespaced XR's first access check Pod is admitted before EKS propagated
			// the Pod Identity association (accessCheckRetried).
			c.admittedEarly = firstPodOnly()
		}
	}}, "prod-eu", "prod-us")

	forEachAPIAtOnce(t, func(t *testing.T, a *api) {
		// One request per cluster: the claim for prod-eu, the namespaced XR for prod-us. (A
		// second request for prod-eu would race the claim for its lease.)
		if a.namespaced {
			// The namespaced XR starts a minor behind and is upgraded once installed (upgradedByFlux).
			from, _ := upgradeVersions()
			c := newKarpenterFrom(t, a, "team-b", "karpenter", func(u *unstructured.Unstructured) {
				onProdUS(u)
				_ = unstructured.SetNestedField(u.Object, from, "spec", "version")
			})
			testRealProviderKubernetes(t, c, claimed["prod-us"], nil, brokenSource(t, c, claimed["prod-us"], base))
			return
		}
		testRealProviderKubernetes(t, newKarpenter(t, a, "team-a", "karpenter", "prod-eu"), claimed["prod-eu"],
			&claimedFaults{provider: provider, claimed: claimed["prod-eu"]}, nil)
	})
}

// testRealProviderKubernetes walks c to Ready through faults, or with atController (if not nil)
// called once the controller's Kustomization is composed, and uninstalls it.
func testRealProviderKubernetes(t *testing.T, c *karpenter, claimed *claimedCluster, faults *claimedFaults, atController func()) {
	ctx := t.Context()
	// retried is the access check's Pod that failed without credentials, if any.
	retried, failedPod := "", (*corev1.Pod)(nil)
	for i, s := range steps {
		start := time.Now()
		back := faults.beforeComposed(t, c, i)
		// The real provider re-reads an Object that is not Ready every 30s ± 10%
		// (provider-kubernetes v1.3.1 internal/controller/*/object/object.go, its poll
		// interval hook): a step of Objects can take that long per round.
		// Step one round by round: its policy is composed once the observed EKS cluster, which
		// the fake provider reports, is Ready. The other steps' later rounds are Objects the
		// real provider-kubernetes makes Ready: they come by themselves, awaited whole.
		rounds := [][]string{stepNames(i)}
		if i == 0 {
			rounds = s.rounds
		}
		for r := range rounds {
			want := throughStep(i)
			if i == 0 {
				want = throughRound(i, r)
			}
			composed := c.waitComposed(want, 3*time.Minute)
			if s.condition == "ControllerReady" && atController != nil {
				atController()
			}
			var aws []string
			for _, n := range rounds[r] {
				if k, _ := kindOf(composed[n]); k.kind != "Object" {
					aws = append(aws, n)
				}
			}
			if r == 0 {
				if b := faults.beforeReady(t, c, i); !b.IsZero() {
					back = b
				}
			}
			c.markReady(aws...)
		}
		if s.condition == steps[2].condition && claimed.admittedEarly != nil {
			retried, failedPod = accessCheckRetried(t, c, claimed)
		}
		timeout := 3 * time.Minute
		if !back.IsZero() {
			// After a minute of refused watches, kube-controller-manager's and kube-scheduler's
			// informers each wait 30–60 s before they list again (client-go v0.35.4
			// tools/cache/reflector.go), then the provider's 30 s poll: the final check's
			// Deployment got its Pod and was seen available 155–190 s after the restart.
			timeout = 5 * time.Minute
		}
		c.waitCondition(s.condition, "True", timeout)
		t.Logf("step %d (%s): %d resources Ready in %.1fs", i+1, s.condition, len(stepNames(i)), time.Since(start).Seconds())
		if !back.IsZero() {
			fmt.Printf("e2e: %-40s a fault mid-walk: %s True %.0fs after the part came back\n", t.Name(), s.condition, time.Since(back).Seconds())
		}
	}
	c.waitCondition("Ready", "True", 3*time.Minute)
	faults.atReady(t, c)

	resources, _ := c.composed()
	applied := appliedObjects(resources)
	for _, name := range applied {
		o := resources[name]
		remote, err := claimed.remote(ctx, o)
		if err != nil || remote == nil {
			t.Errorf("%s: the claimed cluster %s holds no %s (%v)", name, claimed.name, o.GetName(), err)
			continue
		}
		uid, _, _ := unstructured.NestedString(o.Object, "status", "atProvider", "manifest", "metadata", "uid")
		if uid != string(remote.GetUID()) {
			t.Errorf("%s: status.atProvider.manifest is not the claimed cluster's object: uid %q, the cluster's %q", name, uid, remote.GetUID())
		}
	}
	t.Logf("Ready; applied to %s by provider-kubernetes and observed back: %s", claimed.name, strings.Join(applied, ", "))
	// The access check ran where the platform's system nodes are: kube-scheduler bound its Pod
	// to a system node (nodeSelector, tolerations, not on Karpenter's nodes), and kwok ran it;
	// the final check's Pod, of its Deployment, and the controller's run there.
	pods, err := claimed.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) < 4 {
		t.Errorf("the claimed cluster %s holds %d Pods, want the access check's, the final check's and the controller's two (%v)", claimed.name, len(pods.Items), err)
	}
	// The Pod that failed went with its Object; as the Object observed it, the kubelet ended it
	// for no credentials.
	if failedPod != nil {
		assertFailedWithoutCredentials(t, failedPod)
	} else if retried != "" {
		t.Logf("the first access check Pod %s was superseded before the test saw it observed Failed", retried)
	}
	for _, p := range pods.Items {
		want := corev1.PodRunning
		if p.Spec.RestartPolicy == corev1.RestartPolicyNever {
			want = corev1.PodSucceeded // the access check's
			if p.Name == retried {
				t.Errorf("%s/%s: the access check Pod that failed is still in the claimed cluster: its Object was superseded", p.Namespace, p.Name)
			}
		}
		if !strings.HasPrefix(p.Spec.NodeName, "system-") || p.Status.Phase != want {
			t.Errorf("%s/%s: on node %q, %s; want bound to a system node and %s", p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase, want)
		}
	}
	installedByFlux(t, c, claimed)

	wait := func() {}
	if faults == nil {
		_, to := upgradeVersions()
		upgradedByFlux(t, c, claimed, to)
		wait = holdByNodeClaim(t, c, claimed, 20*time.Second)
	}
	var outages []claimedOutage
	if faults != nil {
		outages = faults.outages(t)
	}
	uninstallPastAnInstance(t, c, claimed, outages)
	wait()
	for _, name := range applied {
		if remote, err := claimed.remote(ctx, resources[name]); err != nil || remote != nil {
			t.Errorf("uninstalled, the claimed cluster %s still holds %s's object (%v)", claimed.name, name, err)
		}
	}
	uninstalledByFlux(t, claimed)
}

// appliedObjects are the names, sorted, of the Objects among resources that apply their manifest
// to the claimed cluster (not the observe-only ones).
func appliedObjects(resources map[string]*unstructured.Unstructured) []string {
	var names []string
	for name, o := range resources {
		if k, _ := kindOf(o); k.kind == "Object" && !observeOnly(o) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// waitUninstalled waits until the claimed cluster holds nothing of an uninstalled request: nothing
// its Flux installs (installedLeft), nor ns, the namespace the platform's input puts the
// controller in, which the namespace controller empties and removes after its Object is gone.
// Flux's own finalizers (helm-controller uninstalling the release) may outlast the request's
// Objects in Crossplane's cluster by a little.
func (c *claimedCluster) waitUninstalled(t *testing.T, ns string) {
	t.Helper()
	ctx := t.Context()
	var left []string
	err := waitFor(ctx, 3*time.Minute, "the claimed cluster "+c.name+" holding nothing of an uninstalled request", func() (bool, error) {
		l, err := installedLeft(ctx, c)
		if err != nil {
			left = []string{err.Error()}
			return false, nil
		}
		if _, err := c.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			l = append(l, "Namespace "+ns)
		}
		left = l
		return len(left) == 0, nil
	})
	if err != nil {
		t.Fatalf("%v; it holds %s", err, strings.Join(left, ", "))
	}
}

// deny has the claimed cluster's API server refuse to create the objects of resource (in group)
// named name (every one, when name is ""), as an organisation's admission policy would: a ValidatingAdmissionPolicy (admission
// registration v1) and its binding, both named after what they deny. It returns what lifts the
// refusal. The API server takes a policy in a second or so; deny returns once it refuses a dry
// run of such an object, when probe (a valid object of the kind) is given.
func (c *claimedCluster) deny(t *testing.T, group, resource, name, message string, probe *unstructured.Unstructured) (lift func()) {
	t.Helper()
	return c.denyOn(t, "CREATE", group, resource, name, message, probe)
}

// denyUpdates is deny for the changes to an object that exists, existing (its kind's resource in
// group): its dry-run update is the probe.
func (c *claimedCluster) denyUpdates(t *testing.T, group, resource, message string, existing *unstructured.Unstructured) (lift func()) {
	t.Helper()
	return c.denyOn(t, "UPDATE", group, resource, existing.GetName(), message, existing)
}

// denyOn is deny and denyUpdates: a policy refusing operation (CREATE or UPDATE).
func (c *claimedCluster) denyOn(t *testing.T, operation, group, resource, name, message string, probe *unstructured.Unstructured) (lift func()) {
	t.Helper()
	ctx := t.Context()
	policyName, expression := "e2e-deny-"+strings.ToLower(operation)+"-"+resource, "false"
	if name != "" {
		policyName, expression = policyName+"-"+name, fmt.Sprintf("object.metadata.name != %q", name)
	}
	policy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
		"metadata": map[string]any{"name": policyName},
		"spec": map[string]any{
			"failurePolicy": "Fail",
			"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
				"apiGroups": []any{group}, "apiVersions": []any{"*"}, "operations": []any{operation}, "resources": []any{resource}}}},
			"validations": []any{map[string]any{"expression": expression, "message": message}},
		},
	}}
	binding := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
		"metadata": map[string]any{"name": policyName},
		"spec":     map[string]any{"policyName": policyName, "validationActions": []any{"Deny"}},
	}}
	for _, o := range []*unstructured.Unstructured{policy, binding} {
		if err := c.apply(ctx, o); err != nil {
			t.Fatalf("cannot deny %s %s in %s: %v", resource, name, c.name, err)
		}
	}
	bindings := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"}
	lift = func() {
		if err := c.dyn.Resource(bindings).Delete(context.Background(), policyName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cannot lift the refusal of %s %s in %s: %v", resource, name, c.name, err)
		}
	}
	t.Cleanup(lift)
	if probe != nil {
		gvr := schema.GroupVersionResource{Group: group, Version: probe.GroupVersionKind().Version, Resource: resource}
		if err := waitFor(ctx, time.Minute, "the claimed cluster refusing "+resource+" "+name, func() (bool, error) {
			objects := c.dyn.Resource(gvr).Namespace(probe.GetNamespace())
			if operation == "UPDATE" {
				// A change the API server must see as one, to the object as it is now: an
				// annotation of the probe's own.
				current, err := objects.Get(ctx, probe.GetName(), metav1.GetOptions{})
				if err != nil {
					return false, nil
				}
				current.SetAnnotations(map[string]string{"e2e.function-karpenter/probe": time.Now().String()})
				_, err = objects.Update(ctx, current, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
				return err != nil && strings.Contains(err.Error(), message), nil
			}
			_, err := objects.Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err != nil && strings.Contains(err.Error(), message), nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return lift
}
