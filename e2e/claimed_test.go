//go:build e2e

package e2e

import (
	"archive/zip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/do-now/function-karpenter/internal/versions"
)

// A claimed cluster is a second control plane on loopback standing for one cluster a tenant
// claims: its own etcd, kube-apiserver (with its own audit log) and kube-controller-manager
// (namespaces and garbage collection), with the CRDs of what the function puts there: Flux's
// Kustomization and Karpenter's NodePool, EC2NodeClass and NodeClaim. The real
// provider-kubernetes applies the function's Objects to it through the kubeconfig Secret its
// ProviderConfig names. What runs in a real claimed cluster and not here is played by
// standIns, named as stand-ins: the kubelet, Flux, Karpenter.
type claimedCluster struct {
	name string
	*controlPlane
}

var (
	kustomizationGVR = schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}
	podGVR           = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

// startClaimedCluster starts the claimed cluster name and installs its CRDs and the namespace
// Flux runs in. Its processes join the suite's, so their logs are listed (under
// logs/claimed-<name>/) and they stop with it at the latest. It returns what it started even
// with an error, for the caller to stop.
func startClaimedCluster(ctx context.Context, name string) (*claimedCluster, error) {
	c := &claimedCluster{name: name, controlPlane: &controlPlane{
		dir: filepath.Join(cp.dir, "claimed-"+name), logDir: filepath.Join(cp.logDir, "claimed-"+name), bins: cp.bins,
	}}
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
	return c, c.ensureNamespace(ctx, "flux-system")
}

// claimedCRDs are the files of the CRDs a claimed cluster holds: Flux's Kustomization from
// kustomize-controller's module (E2E_FLUX_KUSTOMIZE_CRDS), and Karpenter's from the module zip
// of the version the platform installs by default (E2E_KARPENTER_ZIP, E2E_KARPENTER_MODULE:
// read from the zip in place, since that version's go.mod asks for a newer Go than the
// machine's and go mod download will not extract it), written under dir.
func claimedCRDs(dir string) ([]string, error) {
	flux, zipPath, module := os.Getenv("E2E_FLUX_KUSTOMIZE_CRDS"), os.Getenv("E2E_KARPENTER_ZIP"), os.Getenv("E2E_KARPENTER_MODULE")
	if flux == "" || zipPath == "" || module == "" {
		return nil, fmt.Errorf("E2E_FLUX_KUSTOMIZE_CRDS, E2E_KARPENTER_ZIP and E2E_KARPENTER_MODULE must be set: run the suite with `make e2e-test`")
	}
	if newest := slices.MaxFunc(versions.Known(), versions.Compare); !strings.HasSuffix(module, "@v"+newest) {
		return nil, fmt.Errorf("E2E_KARPENTER_MODULE is %s, but the version the platform installs by default is the newest the function knows, %s: bump hack/e2e.mk", module, newest)
	}
	files := []string{filepath.Join(flux, "kustomize.toolkit.fluxcd.io_kustomizations.yaml")}
	z, err := zip.OpenReader(zipPath)
	if err != nil {
		return nil, err
	}
	defer z.Close()
	out := filepath.Join(dir, "karpenter-crds")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	for _, name := range []string{"karpenter.sh_nodepools.yaml", "karpenter.sh_nodeclaims.yaml", "karpenter.k8s.aws_ec2nodeclasses.yaml"} {
		i := slices.IndexFunc(z.File, func(f *zip.File) bool { return f.Name == module+"/pkg/apis/crds/"+name })
		if i < 0 {
			return nil, fmt.Errorf("%s holds no pkg/apis/crds/%s", module, name)
		}
		r, err := z.File[i].Open()
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(r)
		r.Close()
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
// It returns once its health probe answers.
func startProviderKubernetes(ctx context.Context) (*proc, error) {
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
	p, err := startProc(cp.logDir, "provider-kubernetes", []string{"KUBECONFIG=" + cp.kubeconfig, "TLS_SERVER_CERTS_DIR=" + certs}, bin,
		"--debug", fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", ports[0]), "--health-probe-bind-addr="+health,
		fmt.Sprintf("--webhook-port=%d", ports[2]))
	if err != nil {
		return nil, err
	}
	return p, waitFor(ctx, time.Minute, "provider-kubernetes healthy", func() (bool, error) {
		if done, err := p.exited(); done {
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
// nothing more, every 200ms until ctx ends:
//   - the kubelet, for the access check's Pod: it runs and succeeds (status as a kubelet writes
//     it for a finished Pod, podStatus);
//   - Flux's kustomize-controller, for each Kustomization: its finalizer while it lives, its
//     Ready status for the generation it holds (as kustomize-controller reports a revision
//     applied), the finalizer released on deletion. It applies nothing: the claimed cluster
//     holds no NodePool, so the observers find none.
func (c *claimedCluster) standIns(ctx context.Context) {
	for ctx.Err() == nil {
		c.kubelet(ctx)
		c.flux(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *claimedCluster) kubelet(ctx context.Context) {
	pods, err := c.dyn.Resource(podGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if phase, _, _ := unstructured.NestedString(pod.Object, "status", "phase"); pod.GetDeletionTimestamp() != nil || (phase != "" && phase != string(corev1.PodPending)) {
			continue
		}
		created := pod.GetCreationTimestamp().Time
		pod.Object["status"] = podStatus(pod, remotePod{uid: pod.GetUID(), created: created, started: created, finished: time.Now(),
			phase: string(corev1.PodSucceeded), reason: "Completed"})
		_, _ = c.dyn.Resource(podGVR).Namespace(pod.GetNamespace()).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	}
}

func (c *claimedCluster) flux(ctx context.Context) {
	ks, err := c.dyn.Resource(kustomizationGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range ks.Items {
		k := &ks.Items[i]
		r := c.dyn.Resource(kustomizationGVR).Namespace(k.GetNamespace())
		finalizers := k.GetFinalizers()
		switch {
		case k.GetDeletionTimestamp() != nil:
			if slices.Contains(finalizers, fluxFinalizer) {
				k.SetFinalizers(slices.DeleteFunc(finalizers, func(f string) bool { return f == fluxFinalizer }))
				_, _ = r.Update(ctx, k, metav1.UpdateOptions{})
			}
		case !slices.Contains(finalizers, fluxFinalizer):
			k.SetFinalizers(append(finalizers, fluxFinalizer))
			_, _ = r.Update(ctx, k, metav1.UpdateOptions{})
		default:
			if gen, _, _ := unstructured.NestedInt64(k.Object, "status", "observedGeneration"); gen != k.GetGeneration() {
				k.Object["status"] = kustomizationStatus(k.GetGeneration(), ready, "")
				_, _ = r.UpdateStatus(ctx, k, metav1.UpdateOptions{})
			}
		}
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

// TestRealProviderKubernetes walks a request, through each API at once, to Ready and uninstalls
// it with the real provider-kubernetes between the function and a real claimed cluster: the
// claim's for prod-eu (team-a), the namespaced XR's for prod-us (team-b), each its own control
// plane. The e2e's fake still plays provider-aws, and stops playing provider-kubernetes while
// this test runs; the kubelet and Flux are stand-ins in the claimed clusters (standIns). It
// proves that the function's readiness rules hold on what the real provider writes: every step
// goes Ready, each Object's observed manifest is the claimed cluster's object (same UID), and the
// observe-only Objects stay harmless when the claimed cluster holds nothing to observe.
// Uninstalled, the claimed cluster holds nothing of the request.
func TestRealProviderKubernetes(t *testing.T) {
	timed(t)
	ctx := t.Context()
	start := time.Now()
	claimed := map[string]*claimedCluster{}
	for _, name := range []string{"prod-eu", "prod-us"} {
		c, err := startClaimedCluster(ctx, name)
		if c != nil {
			t.Cleanup(c.stop) // last, once everything of the requests is gone from it
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := c.connect(ctx); err != nil {
			t.Fatal(err)
		}
		go c.standIns(ctx)
		claimed[name] = c
	}
	fake.realObjects.Store(true)
	t.Cleanup(func() { fake.realObjects.Store(false) })
	provider, err := startProviderKubernetes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { provider.stop(10 * time.Second) })
	t.Logf("claimed clusters prod-eu and prod-us, and provider-kubernetes %s, up in %.1fs", filepath.Base(os.Getenv("E2E_PROVIDER_KUBERNETES")), time.Since(start).Seconds())

	forEachAPIAtOnce(t, func(t *testing.T, a *api) {
		// One request per cluster: the claim for prod-eu, the namespaced XR for prod-us. (A
		// second request for prod-eu would race the claim for its lease.)
		if a.namespaced {
			testRealProviderKubernetes(t, newKarpenterFrom(t, a, "team-b", "karpenter", onProdUS), claimed["prod-us"])
			return
		}
		testRealProviderKubernetes(t, newKarpenter(t, a, "team-a", "karpenter", "prod-eu"), claimed["prod-eu"])
	})
}

func testRealProviderKubernetes(t *testing.T, c *karpenter, claimed *claimedCluster) {
	ctx := t.Context()
	for i, s := range steps {
		start := time.Now()
		// The real provider re-reads an Object that is not Ready every 30s ± 10%
		// (provider-kubernetes v1.3.1 internal/controller/*/object/object.go, its poll
		// interval hook): a step of Objects can take that long per round.
		composed := c.waitComposed(throughStep(i), 3*time.Minute)
		var aws []string
		for _, n := range stepNames(i) {
			if k, _ := kindOf(composed[n]); k.kind != "Object" {
				aws = append(aws, n)
			}
		}
		c.markReady(aws...)
		c.waitCondition(s.condition, "True", 3*time.Minute)
		t.Logf("step %d (%s): %d resources Ready in %.1fs", i+1, s.condition, len(stepNames(i)), time.Since(start).Seconds())
	}
	c.waitCondition("Ready", "True", 3*time.Minute)

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
	if cond := c.condition(poolsCondition); cond == nil || cond["status"] != "Unknown" {
		t.Errorf("with no NodePool in the claimed cluster, %s must be Unknown, got %v", poolsCondition, cond)
	}

	c.deleteAndWait()
	for _, name := range applied {
		if remote, err := claimed.remote(ctx, resources[name]); err != nil || remote != nil {
			t.Errorf("uninstalled, the claimed cluster %s still holds %s's object (%v)", claimed.name, name, err)
		}
	}
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
