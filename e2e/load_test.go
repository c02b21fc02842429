//go:build e2e

package e2e

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestLoad creates N claims together on the one control plane (E2E_LOAD_CLAIMS, 10 in
// `make test`; `make load N=…` for more), each for a cluster of its own that the tenancy
// declares, with the fake providers answering at once; claims of the claim API, or namespaced
// XRs with E2E_LOAD_API=namespaced (they are all "claims" here). Every claim must get Ready, compose
// nothing another claim composes, and be deleted completely. It prints how long the claims took
// to get Ready, what the function and Crossplane core spent (CPU per reconcile, memory), how
// often Crossplane's watch circuit breaker opened, and the same once the claims have stood
// settled for E2E_LOAD_SETTLE (after settling), when most of the function's answers must come
// from its cache; then how long deleting them all took. Its last line is the
// settled figures, in the form docs/performance.md quotes.
//
// The fake providers are the suite's stand-in for provider-aws and provider-kubernetes: the
// figures are the function's and Crossplane's, not a real provider's.
func TestLoad(t *testing.T) {
	timed(t)
	n := envInt(t, "E2E_LOAD_CLAIMS", 10)
	settle := envDuration(t, "E2E_LOAD_SETTLE", 20*time.Second)
	a := loadAPI(t)
	clusters := declareLoadClusters(t, a, n)
	fake.readyByDefault.Store(true)
	t.Cleanup(func() { fake.readyByDefault.Store(false) })
	fn, core := cp.process(t, "function"), cp.process(t, "crossplane")
	flags, kcm := cmp.Or(os.Getenv("E2E_CROSSPLANE_FLAGS"), "none (its defaults)"), cmp.Or(os.Getenv("E2E_KCM_FLAGS"), "none")
	fmt.Printf("load: %d claims (the %s API); flags beyond the suite's: Crossplane core's %s, the hub's kube-controller-manager's %s\n", n, a.name, flags, kcm)

	before := scrapeCrossplane(t)
	fnCPU, coreCPU := fn.cpu(t), core.cpu(t)
	shares := cpuShares(t)
	start := time.Now()
	ks := make([]*karpenter, n)
	for i, cl := range clusters {
		ks[i] = createKarpenter(t, a, cl, "karpenter", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, cl, "spec", "cluster", "name")
		})
	}
	// Should the test stop early, every claim is deleted at once before each claim's own cleanup
	// waits for its uninstall: one after the other, ten uninstalls took 17 minutes.
	t.Cleanup(func() {
		for _, k := range ks {
			if k.exists() {
				k.delete()
			}
		}
	})
	for _, k := range ks {
		k.xr = k.waitBound()
	}

	// Ready: each claim's time from its creation until the poll that saw it Ready.
	ready, created, readyAt := make([]time.Duration, n), make([]time.Time, n), make([]time.Time, n)
	err := wait.PollUntilContextTimeout(t.Context(), time.Second, loadTimeout(n), true, func(context.Context) (bool, error) {
		all := true
		for i, k := range ks {
			if ready[i] != 0 {
				continue
			}
			u, err := cp.dyn.Resource(k.api.tenant).Namespace(k.ns).Get(k.ctx, k.name, metav1.GetOptions{})
			if err == nil && conditionStatus(u, "Ready") == "True" {
				created[i], readyAt[i] = u.GetCreationTimestamp().Time, time.Now()
				ready[i] = readyAt[i].Sub(created[i])
			}
			all = all && ready[i] != 0
		}
		return all, nil
	})
	walked := time.Since(start)
	// Where the CPU went, printed whether or not every claim got Ready.
	fmt.Printf("load: walk: %s\n", shares.since(t))
	walk := scrapeCrossplane(t)
	walkFn, walkCore := fn.cpu(t)-fnCPU, core.cpu(t)-coreCPU
	if err != nil {
		var waiting []string
		for i, k := range ks {
			if ready[i] == 0 {
				waiting = append(waiting, k.String()+": "+conditionsText(k.get()))
			}
		}
		t.Fatalf("%d of %d claims not Ready after %s:\n%s", len(waiting), n, loadTimeout(n), strings.Join(waiting, "\n"))
	}
	p50, p95, most := percentile(ready, 50), percentile(ready, 95), percentile(ready, 100)
	fmt.Printf("load: %d claims Ready %.0fs after the first was created; each from its creation: p50 %.0fs p95 %.0fs max %.0fs\n",
		n, walked.Seconds(), p50.Seconds(), p95.Seconds(), most.Seconds())
	fmt.Printf("load: walk: %s\n", figures(a, walk.since(before), walkFn, walkCore, fn, core, t))
	printWrites(t, "walk", start, start.Add(walked))
	printPasses(t, a, ks, created, readyAt, start)

	assertNothingShared(t, ks)

	// Settled: every claim Ready and nothing changing, so the function answers from its cache.
	// The reconciles after Ready still find changes (the last step's Usages, the in-use labels
	// Crossplane's Usage controller puts on what they protect), later on a loaded control plane:
	// the window opens once nothing has changed for one requeue (untilQuiet).
	fmt.Printf("load: settled: the claims' last change seen %.0fs after the last got Ready, then none for %s\n",
		untilQuiet(t, ks, start.Add(walked)).Seconds(), settling)
	fnCPU, coreCPU = fn.cpu(t), core.cpu(t)
	quiet, quietFn := scrapeCrossplane(t), scrape(t, cp.functionMetrics)
	shares = cpuShares(t)
	time.Sleep(settle)
	fmt.Printf("load: settled: %s\n", shares.since(t))
	printWrites(t, "settled", shares.at, shares.at.Add(settle))
	settled := scrapeCrossplane(t).since(quiet)
	settledFn, settledCore := fn.cpu(t)-fnCPU, core.cpu(t)-coreCPU
	answers := scrape(t, cp.functionMetrics).since(quietFn)
	cached, composed := answers.sum(answersMetric, `from="cache"`), answers.sum(answersMetric, `from="composed"`)
	fmt.Printf("load: settled %s: %s; fn %.2f%% of one core; function answers: %.0f from the cache, %.0f composed\n",
		settle, figures(a, settled, settledFn, settledCore, fn, core, t), 100*settledFn.Seconds()/settle.Seconds(), cached, composed)
	if cached == 0 || composed > cached {
		t.Errorf("settled claims' requests must be answered from the cache: %.0f from the cache, %.0f composed (%s)", cached, composed, answersMetric)
	}

	// Deleted: every claim at once, until each, its XR and all it composed are gone.
	start, shares = time.Now(), cpuShares(t)
	for _, k := range ks {
		k.delete()
	}
	err = wait.PollUntilContextTimeout(t.Context(), 2*time.Second, loadTimeout(n), true, func(context.Context) (bool, error) {
		for _, k := range ks {
			if k.exists() {
				return false, nil
			}
			if _, err := k.xrResource().Get(k.ctx, k.xr.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
			if all, err := composedOf(k.ctx, cp, k.xr); err != nil || len(all) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the %d claims were not all gone after %s", n, loadTimeout(n))
	}
	gone := scrapeCrossplane(t)
	fmt.Printf("load: %d claims deleted: everything gone in %.0fs\n", n, time.Since(start).Seconds())
	fmt.Printf("load: deletion: %s\n", shares.since(t))
	printWrites(t, "deletion", start, time.Now())

	errs := gone.errors() - before.errors()
	if errs > 0 {
		t.Errorf("the function answered %v times with an error or a Fatal result", errs)
	}
	per := settled.perReconcile(a, settledFn)
	fmt.Printf("load: %d claims, ready p50 %.0fs p95 %.0fs max %.0fs, errors %.0f, fn cpu-ms/reconcile %.2f, fn rss %.0f MiB\n",
		n, p50.Seconds(), p95.Seconds(), most.Seconds(), errs, per, fn.rss(t, "VmRSS"))
}

// printWrites prints the writes the hub's API server received in a phase of the test, from the
// audit log: who sent how many of what.
func printWrites(t *testing.T, phase string, from, to time.Time) {
	t.Helper()
	w, err := cp.writes(from, to)
	if err == nil && len(w) == 0 {
		err = fmt.Errorf("no write read from %s*.log in %s", auditLog, cp.logDir)
	}
	if err != nil {
		t.Errorf("the hub's writes in the %s: %v", phase, err)
		return
	}
	fmt.Printf("load: %s: the hub's API server received %s\n", phase, w)
}

// declareLoadClusters adds n clusters, load-000 and on, to the tenancy of a's Composition as the
// suite installed it, each claimable from a namespace of its own name and reached through
// provider-kubernetes configs of its own (both scopes'); it returns their names. They
// share prod-eu's account and region, so the input scopes subnets to their cluster
// (nodes.subnetClusterTag), as the function requires of a platform. The Composition is put back
// as it was when the test ends.
func declareLoadClusters(t *testing.T, a *api, n int) []string {
	t.Helper()
	ctx := t.Context()
	var names []string
	for i := range n {
		name := fmt.Sprintf("load-%03d", i)
		names = append(names, name)
		// In AWS, what the platform's prerequisites hold for it: its EKS cluster, which the
		// claim's observe-only Cluster reads, and its nodes' role.
		if err := cp.aws.seed(ctx, declaredCluster{name: name, account: testAccount, region: "eu-west-3",
			nodeRoleARN: "arn:aws:iam::" + testAccount + ":role/" + name + "-nodes", instanceProfile: name + "-nodes"}); err != nil {
			t.Fatal(err)
		}
		// Both scopes' configs, as the suite's install makes them for its clusters: the claim's
		// XR composes cluster-scoped Objects, the namespaced XR namespaced ones.
		spec := map[string]any{"credentials": map[string]any{"source": "Secret",
			"secretRef": map[string]any{"namespace": "crossplane-system", "name": name + "-cluster", "key": "kubeconfig"}}}
		for _, c := range []struct{ group, kind string }{
			{"kubernetes.crossplane.io", "ProviderConfig"}, {"kubernetes.m.crossplane.io", "ClusterProviderConfig"},
		} {
			pc := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": c.group + "/v1alpha1", "kind": c.kind, "metadata": map[string]any{"name": name}, "spec": spec,
			}}
			if err := cp.apply(ctx, pc); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = cp.dyn.Resource(gvr(c.group, "v1alpha1", strings.ToLower(c.kind)+"s")).Delete(context.Background(), name, metav1.DeleteOptions{})
			})
		}
	}
	changeInput(t, a, func(input map[string]any) {
		declared, _, _ := unstructured.NestedSlice(input, "tenancy", "clusters")
		for _, name := range names {
			declared = append(declared, map[string]any{
				"name": name, "account": testAccount, "region": "eu-west-3", "namespaces": []any{name},
				"nodeIdentity": map[string]any{"roleArn": "arn:aws:iam::" + testAccount + ":role/" + name + "-nodes", "instanceProfile": name + "-nodes"},
			})
		}
		_ = unstructured.SetNestedSlice(input, declared, "tenancy", "clusters")
		_ = unstructured.SetNestedMap(input, map[string]any{"key": "kubernetes.io/cluster/{cluster}", "value": "*"}, "nodes", "subnetClusterTag")
	})
	return names
}

// inputsChanged holds, per test and Composition, that changeInput will put it back.
var inputsChanged sync.Map

// changeInput changes, as a platform engineer would, the function input of a's Composition as
// the suite installed it, and returns once Crossplane has the CompositionRevision that holds the
// change: the API's XRs move to it on their next reconcile, as both XRDs set
// defaultCompositionUpdatePolicy: Automatic (apis/definition*.yaml). The Composition is put back as it was
// before the first change when the test ends.
func changeInput(t *testing.T, a *api, change func(input map[string]any)) {
	t.Helper()
	ctx := t.Context()
	_, shipped, err := a.read("..")
	if err != nil {
		t.Fatal(err)
	}
	compositions := gvr("apiextensions.crossplane.io", "v1", "compositions")
	revisions := gvr("apiextensions.crossplane.io", "v1", "compositionrevisions")
	live, err := cp.dyn.Resource(compositions).Get(ctx, shipped.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// One restore per test and Composition, registered at its first change: a later change's
	// would run before the cleanups registered in between (a request's deletion), and move the
	// request back while it goes.
	if _, registered := inputsChanged.LoadOrStore(t.Name()+" "+shipped.GetName(), true); !registered {
		spec, _, _ := unstructured.NestedMap(live.DeepCopy().Object, "spec")
		t.Cleanup(func() {
			inputsChanged.Delete(t.Name() + " " + shipped.GetName())
			u, err := cp.dyn.Resource(compositions).Get(context.Background(), shipped.GetName(), metav1.GetOptions{})
			if err == nil {
				u.Object["spec"] = spec
				_, err = cp.dyn.Resource(compositions).Update(context.Background(), u, metav1.UpdateOptions{})
			}
			if err != nil {
				t.Errorf("cannot put the Composition back: %v", err)
			}
		})
	}

	pipeline, _, _ := unstructured.NestedSlice(live.Object, "spec", "pipeline")
	input, _, _ := unstructured.NestedMap(pipeline[0].(map[string]any), "input")
	change(input)
	_ = unstructured.SetNestedMap(pipeline[0].(map[string]any), input, "input")
	_ = unstructured.SetNestedSlice(live.Object, pipeline, "spec", "pipeline")

	// crossplane/apis v2.4.0 apiextensions/v1 composition_revision_types.go, LabelCompositionName.
	selector := metav1.ListOptions{LabelSelector: "crossplane.io/composition-name=" + shipped.GetName()}
	had, err := cp.dyn.Resource(revisions).List(ctx, selector)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.dyn.Resource(compositions).Update(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("the API server refused the Composition's changed input: %v", err)
	}
	// A claim created before Crossplane has the new revision would start on the old one.
	if err := waitFor(ctx, time.Minute, "a CompositionRevision of the changed input", func() (bool, error) {
		l, err := cp.dyn.Resource(revisions).List(ctx, selector)
		return err == nil && len(l.Items) > len(had.Items), nil
	}); err != nil {
		t.Fatal(err)
	}
}

// assertNothingShared checks that every claim composed every resource, each controlled by its
// own XR, and that no object and no AWS identifier is composed by two claims.
func assertNothingShared(t *testing.T, ks []*karpenter) {
	t.Helper()
	objects, ids := map[string]string{}, map[string]string{}
	for _, k := range ks {
		resources, usages := k.composed()
		if !equalSets(sortedKeys(resources), allNames()) {
			t.Errorf("%s: want every resource composed, got %v", k, sortedKeys(resources))
		}
		xrUID := string(k.getXR().GetUID())
		for _, set := range []map[string]*unstructured.Unstructured{resources, usages} {
			for _, name := range sortedKeys(set) {
				u := set[name]
				id := fmt.Sprintf("%s %s %s/%s", u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName())
				if other, clash := objects[id]; clash {
					t.Errorf("%s is composed by both %s and %s", id, other, k)
				}
				objects[id] = k.String()
				if ref := controllerOf(u); ref != xrUID {
					t.Errorf("%s (%s of %s) is controlled by %q, not by its XR %s", id, name, k, ref, xrUID)
				}
			}
		}
		for id := range awsIdentities(t, resources) {
			if other, clash := ids[id]; clash {
				t.Errorf("AWS identifier %q is used by both %s and %s", id, other, k)
			}
			ids[id] = k.String()
		}
	}
	fmt.Printf("load: %d claims composed %d objects and %d AWS identifiers, none shared\n", len(ks), len(objects), len(ids))
}

// loadAPI is the API TestLoad's tenants use: E2E_LOAD_API (make load LOAD_API=…), the claim API
// unless it names the namespaced one.
func loadAPI(t *testing.T) *api {
	name := cmp.Or(os.Getenv("E2E_LOAD_API"), claimAPI.name)
	for _, a := range apis {
		if a.name == name {
			return a
		}
	}
	t.Fatalf("E2E_LOAD_API=%q: want %q or %q", name, claimAPI.name, namespacedAPI.name)
	return nil
}

// loadTimeout is how long n claims may take to get Ready, or to go: generous, since it is the
// figures that tell how long it really took. In make test the suite's four shards share two
// cores: ten claims took 317 s to get Ready in one warm run (2026-12-04), and more than the
// 360 s this allowed before in CI on the same day.
func loadTimeout(n int) time.Duration { return 15*time.Minute + time.Duration(n)*6*time.Second }

// percentile is the nearest-rank percentile p of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	return s[max(0, int(math.Ceil(p/100*float64(len(s))))-1)]
}

func figures(a *api, m metrics, fnCPU, coreCPU time.Duration, fn, core *proc, t *testing.T) string {
	return fmt.Sprintf("%.0f reconciles, %.0f function calls; fn cpu-ms/reconcile %.2f, fn rss %.0f MiB (peak %.0f); core cpu-ms/reconcile %.2f, core rss %.0f MiB; circuit breaker opened %.0f times",
		m.reconciles(a), m.calls(), m.perReconcile(a, fnCPU), fn.rss(t, "VmRSS"), fn.rss(t, "VmHWM"), m.perReconcile(a, coreCPU), core.rss(t, "VmRSS"), m.opens())
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

// process is the suite's process of that name.
func (c *controlPlane) process(t *testing.T, name string) *proc {
	t.Helper()
	for _, p := range c.procs {
		if p.name == name {
			return p
		}
	}
	t.Fatalf("the suite runs no process %q", name)
	return nil
}

// cpu is the process's user and system CPU so far, from /proc/<pid>/stat (clock ticks of 10ms).
func (p *proc) cpu(t *testing.T) time.Duration { t.Helper(); return pidCPU(t, p.pid()) }

// busiest are the processes whose CPU the load test reports (cpuShares): the control plane's,
// Crossplane's and the function's; the test process itself is where the fake providers run.
var busiest = []string{"kube-apiserver", "etcd", "kube-controller-manager", "crossplane", "function"}

// cpuSnapshot is the CPU each of busiest, and the test process, had used at one moment.
type cpuSnapshot struct {
	at  time.Time
	cpu map[string]time.Duration
}

// testProcess names, in cpuShares, this test process: the fake providers and the test's polling.
const testProcess = "the test process (fake providers)"

func cpuShares(t *testing.T) cpuSnapshot {
	t.Helper()
	s := cpuSnapshot{at: time.Now(), cpu: map[string]time.Duration{testProcess: pidCPU(t, os.Getpid())}}
	for _, name := range busiest {
		s.cpu[name] = cp.process(t, name).cpu(t)
	}
	return s
}

// since says where the CPU went from s until now: each process's CPU seconds and share of the
// machine's cores, the busiest first.
func (s cpuSnapshot) since(t *testing.T) string {
	t.Helper()
	now := cpuShares(t)
	wall := now.at.Sub(s.at).Seconds()
	used := func(n string) time.Duration { return now.cpu[n] - s.cpu[n] }
	names := slices.Collect(maps.Keys(now.cpu))
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(used(b), used(a)), strings.Compare(a, b)) })
	cores := float64(runtime.NumCPU())
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.0fs (%.0f%%)", n, used(n).Seconds(), 100*used(n).Seconds()/wall/cores))
	}
	return fmt.Sprintf("CPU over %.0fs on %.0f cores: %s", wall, cores, strings.Join(parts, ", "))
}

// pidCPU is a process's user and system CPU so far, from /proc/<pid>/stat (clock ticks of 10ms).
func pidCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command's closing parenthesis: utime and stime are the 14th and 15th.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// rss is a memory figure of /proc/<pid>/status, in MiB: VmRSS (now) or VmHWM (peak).
func (p *proc) rss(t *testing.T, field string) float64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.pid()))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for s := bufio.NewScanner(f); s.Scan(); {
		if v, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, p.pid())
	return 0
}

// settling is how long after its last change an XR is reconciled again: one requeue, the
// function's TTL for a settled XR (requeue.Settled, 1m; Crossplane's --poll-interval is 1m too),
// jittered ±10% (crossplane v2.4.2 internal/controller/apiextensions/composite reconciler.go,
// jitter), and a margin.
const settling = 75 * time.Second

// untilQuiet waits until none of ks's XRs, nor anything they compose, has changed
// (resourceVersion, read every 10 s) for settling. From then on each XR's reconcile sends the
// function the request it answered at its last reconcile: Crossplane tags a request with a hash
// of all of it, the observed XR and composed resources whole (crossplane v2.4.2
// internal/controller/apiextensions/composite/composition_functions.go, Tag). The claims
// themselves are not part of the request. It returns how long after since it saw the last change.
// A control plane on which the claims never stop changing fails the test, naming what changed.
func untilQuiet(t *testing.T, ks []*karpenter, since time.Time) time.Duration {
	t.Helper()
	ctx := t.Context()
	xrs := map[string]bool{}
	for _, k := range ks {
		xrs[k.xr.name] = true
	}
	// versions are the resourceVersions of the XRs and of what they compose, by kind and name.
	versions := func() (map[string]string, error) {
		out := map[string]string{}
		for _, k := range ks {
			xr, err := k.xrResource().Get(ctx, k.xr.name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			out["XR "+k.xr.String()] = xr.GetResourceVersion()
		}
		for _, kind := range composedKinds {
			l, err := cp.dyn.Resource(kind.gvr).List(ctx, metav1.ListOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			for _, u := range l.Items {
				if xrs[u.GetLabels()[compositeLabel]] {
					out[kind.kind+" "+u.GetNamespace()+"/"+u.GetName()] = u.GetResourceVersion()
				}
			}
		}
		return out, nil
	}
	last := time.Now()
	var was map[string]string
	var changed []string
	timeout := loadTimeout(len(ks))
	err := wait.PollUntilContextTimeout(ctx, 10*time.Second, timeout, true, func(context.Context) (bool, error) {
		now, err := versions()
		if err != nil {
			return false, nil // the next poll reads them all again
		}
		if diff := changedKeys(was, now); was == nil || len(diff) > 0 {
			was, changed, last = now, diff, time.Now()
			return false, nil
		}
		return time.Since(last) >= settling, nil
	})
	if err != nil {
		t.Fatalf("the %d claims did not stop changing for %s within %s; the last change: %s", len(ks), settling, timeout, strings.Join(changed, ", "))
	}
	return last.Sub(since)
}

// changedKeys are the keys, sorted, whose values differ between a and b, or that only one holds.
func changedKeys(a, b map[string]string) []string {
	var out []string
	for k, v := range b {
		if w, ok := a[k]; !ok || w != v {
			out = append(out, k)
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// answersMetric counts the function's answers by how each was made (fn/fn.go, answersMetric).
const answersMetric = "function_karpenter_answers_total"

// metrics are the samples of a Prometheus endpoint, by metric name and labels.
type metrics map[string]float64

// scrapeCrossplane reads Crossplane core's metrics (crossplane v2.4.2: controller-runtime's
// controller_runtime_reconcile_total, internal/xfn function_run_function_request_total and
// _response_total, internal/circuit circuit_breaker_opens_total).
func scrapeCrossplane(t *testing.T) metrics {
	t.Helper()
	return scrape(t, cp.crossplaneMetrics)
}

// scrape reads the Prometheus endpoint at url, in its text format.
func scrape(t *testing.T, url string) metrics {
	t.Helper()
	rsp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer rsp.Body.Close()
	m := metrics{}
	for s := bufio.NewScanner(rsp.Body); s.Scan(); {
		line := s.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[line[:i]] = v
	}
	return m
}

// since is m less what earlier had.
func (m metrics) since(earlier metrics) metrics {
	out := metrics{}
	for k, v := range m {
		out[k] = v - earlier[k]
	}
	return out
}

// sum adds the samples of a metric whose labels contain every one of labels.
func (m metrics) sum(name string, labels ...string) float64 {
	var total float64
	for k, v := range m {
		if k != name && !strings.HasPrefix(k, name+"{") {
			continue
		}
		if slices.ContainsFunc(labels, func(l string) bool { return !strings.Contains(k, l) }) {
			continue
		}
		total += v
	}
	return total
}

// reconciles are the XRs' reconciles of a's tenants: Crossplane's composite controller of a's
// XRD, named "composite/" and the XRD's name, its plural and group (Crossplane v2.4.2
// internal/controller/apiextensions/composite/reconciler.go, ControllerName).
func (m metrics) reconciles(a *api) float64 {
	xr := a.xrResource()
	return m.sum("controller_runtime_reconcile_total", `controller="composite/`+xr.Resource+"."+xr.Group+`"`)
}

func (m metrics) calls() float64 { return m.sum("function_run_function_request_total") }

func (m metrics) opens() float64 { return m.sum("circuit_breaker_opens_total") }

// errors are the function's answers that were an error or carried a Fatal result.
func (m metrics) errors() float64 {
	return m.sum("function_run_function_response_total") - m.sum("function_run_function_response_total", `grpc_code="OK"`) +
		m.sum("function_run_function_response_total", `grpc_code="OK"`, `result_severity="Fatal"`)
}

// perReconcile is cpu spread over m's reconciles, in milliseconds.
func (m metrics) perReconcile(a *api, cpu time.Duration) float64 {
	if r := m.reconciles(a); r > 0 {
		return float64(cpu.Milliseconds()) / r
	}
	return math.NaN()
}
