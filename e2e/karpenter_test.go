//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/function-sdk-go/resource"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/do-now/function-karpenter/internal/cluster"
)

// The two APIs a tenant may ask for Karpenter with, installed side by side.
var (
	// claimAPI is the v1 API: a claim in the tenant's namespace, bound to a cluster-scoped
	// XKarpenter that composes cluster-scoped resources.
	claimAPI = &api{
		name:        "claim",
		kind:        "claim",
		tenant:      gvr("platform.socle.do-now.io", "v1alpha1", "karpenters"),
		xr:          gvr("platform.socle.do-now.io", "v1alpha1", "xkarpenters"),
		definition:  "apis/definition.yaml",
		composition: "apis/composition.yaml",
		example:     "examples/claim.yaml",
		golden:      "examples/render/8-all-ready.yaml",
	}
	// namespacedAPI is Crossplane v2's: the tenant creates the XR itself in its namespace, and it
	// composes namespaced resources there.
	namespacedAPI = &api{
		name:        "namespaced",
		kind:        "namespaced XR",
		tenant:      gvr("platform.m.socle.do-now.io", "v1alpha1", "karpenters"),
		namespaced:  true,
		definition:  "apis/definition-namespaced.yaml",
		composition: "apis/composition-namespaced.yaml",
		example:     "examples/namespaced/xr.yaml",
		golden:      "examples/namespaced/render/8-all-ready.yaml",
	}
	apis = []*api{claimAPI, namespacedAPI}
)

// An api is one of the platform's APIs, and where the repository keeps what it ships of it
// (paths from the repository's root).
type api struct {
	name string // the subtests' name
	kind string // what messages call what the tenant creates
	// tenant is what the tenant creates in its namespace: the claim, or the namespaced XR.
	tenant schema.GroupVersionResource
	// xr is the claim's cluster-scoped XR; zero for the namespaced XR, which is its own XR.
	xr schema.GroupVersionResource
	// namespaced is true when the XR, and all it composes, lives in the tenant's namespace.
	namespaced bool

	definition, composition string // the XRD and the Composition
	example                 string // what a tenant writes, examples/claim.yaml's request
	golden                  string // the render of that request with everything observed Ready
}

// crossplaneField is where a field Crossplane reserves (compositionRevisionRef, resourceRefs, ...)
// is in the API's XR and in what its tenant writes: under spec.crossplane in a namespaced XR,
// under spec in a claim and its LegacyCluster XR (crossplane-runtime v2.4.0
// pkg/resource/unstructured/composite/composite.go, SchemaLegacy; claim/claim.go).
func (a *api) crossplaneField(f string) []string {
	if a.namespaced {
		return []string{"spec", "crossplane", f}
	}
	return []string{"spec", f}
}

// xrResource is the GVR of the API's XR: the claim's XR, or the namespaced XR the tenant creates.
func (a *api) xrResource() schema.GroupVersionResource {
	if a.namespaced {
		return a.tenant
	}
	return a.xr
}

// read reads the API's XRD and Composition.
func (a *api) read(repo string) (xrd, composition *unstructured.Unstructured, err error) {
	xrds, err := readObjects(filepath.Join(repo, a.definition))
	if err != nil {
		return nil, nil, err
	}
	comps, err := readObjects(filepath.Join(repo, a.composition))
	if err != nil {
		return nil, nil, err
	}
	if len(xrds) != 1 || len(comps) != 1 {
		return nil, nil, fmt.Errorf("%s and %s: want one XRD and one Composition, found %d and %d", a.definition, a.composition, len(xrds), len(comps))
	}
	return xrds[0], comps[0], nil
}

// input reads the function input of the API's Composition: its one pipeline step's.
func (a *api) input(repo string) (map[string]any, error) {
	_, comp, err := a.read(repo)
	if err != nil {
		return nil, err
	}
	pipeline, _, _ := unstructured.NestedSlice(comp.Object, "spec", "pipeline")
	if len(pipeline) != 1 {
		return nil, fmt.Errorf("%s: want a Composition with one function step, found %d steps", a.composition, len(pipeline))
	}
	input, _, _ := unstructured.NestedMap(pipeline[0].(map[string]any), "input")
	return input, nil
}

// forEachAPI runs a scenario for each API, as the subtests claim and namespaced, one after the
// other: each holds prod-eu while it runs.
func forEachAPI(t *testing.T, scenario func(*testing.T, *api)) {
	t.Helper()
	for _, a := range apis {
		t.Run(a.name, func(t *testing.T) {
			timed(t)
			scenario(t, a)
		})
	}
}

// forEachAPIAtOnce runs a scenario for each API in parallel, for scenarios whose runs hold no
// cluster the other needs. A scenario is mostly waiting on Crossplane.
func forEachAPIAtOnce(t *testing.T, scenario func(*testing.T, *api)) {
	t.Helper()
	for _, a := range apis {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			timed(t)
			scenario(t, a)
		})
	}
}

// The composed resource names of each step (API: see docs/design.md), and the condition that
// reports the step. A step's resources appear in rounds: step one's controller policy names the
// cluster's VPC, so it is composed only once the observed EKS cluster is Ready and reports it;
// step three's ServiceAccount and access-check Pod live in the namespace, so their Objects are
// composed only once the namespace's Object is Ready. The first name of a round is the one its
// next round waits for. A step beside the others (the monitoring) holds no later step
// back: its resources appear with the next step's, and only the request's Ready waits for it.
type step struct {
	condition string
	rounds    [][]string
	beside    bool
}

var steps = []step{
	{"IdentityAndQueueReady", [][]string{{"eks-cluster", "controller-role", "final-check-role", "final-check-role-policy", "interruption-queue",
		"rule-capacity-reservation", "rule-health", "rule-rebalance", "rule-spot-interruption", "rule-state-change"}, {"controller-role-policy"}}, false},
	{"InterruptionWiringReady", [][]string{{"interruption-queue-policy", "pod-identity-association", "final-check-pod-identity-association",
		"target-capacity-reservation", "target-health", "target-rebalance", "target-spot-interruption", "target-state-change"}}, false},
	{"AccessCheckReady", [][]string{{"controller-namespace"}, {"access-check", "controller-service-account", "final-check", "final-check-rbac", "final-check-rbac-binding",
		"final-check-service-account"}}, false},
	{"ControllerReady", [][]string{{"controller-kustomization"}}, false},
	{"MonitoringReady", [][]string{{"monitoring-kustomization"}}, true},
	{"NodePoolsReady", [][]string{{"nodes-kustomization"}}, false},
}

// observers are the observe-only Objects that read each pool's NodePool and EC2NodeClass from
// the claimed cluster. They appear once the controller is Ready (with the steps after it), count Ready for
// Crossplane whatever they report, hold nothing back and report no step condition: what they
// read is status.pools, PoolsWithinLimits and NodeClassesValidated.
var observers = []string{"observe-nodepool-private", "observe-nodepool-public", "observe-ec2nodeclass-private", "observe-ec2nodeclass-public"}

// observedFrom is the first step composed with the observers.
const observedFrom = 4

// stepNames is every composed resource name of step i, in every round.
func stepNames(i int) []string {
	var out []string
	for _, r := range steps[i].rounds {
		out = append(out, r...)
	}
	sort.Strings(out)
	return out
}

// lease is the composed resource by which a request holds its cluster: composed first, alone
// until its request holds the cluster (internal/sequence's Settle after its creation), then with
// everything.
const lease = "cluster-lease"

// throughRound is every composed resource name of the steps before i and of rounds 0..r of
// step i, and of what appears with them: the lease, the steps after a step beside, the observers.
func throughRound(i, r int) []string {
	out := []string{lease}
	for j := range i {
		out = append(out, stepNames(j)...)
	}
	for _, names := range steps[i].rounds[:r+1] {
		out = append(out, names...)
	}
	for j := i + 1; j < len(steps) && steps[j-1].beside; j++ {
		out = append(out, stepNames(j)...)
	}
	if i >= observedFrom {
		out = append(out, observers...)
	}
	sort.Strings(out)
	return out
}

// throughStep is every composed resource name of steps 0..i.
func throughStep(i int) []string { return throughRound(i, len(steps[i].rounds)-1) }

// allNames is every composed resource name of a request walked to Ready, Usages apart.
func allNames() []string { return throughStep(len(steps) - 1) }

func isUsage(name string) bool { return strings.HasPrefix(name, "usage-") }

// karpenter is one request for Karpenter a test created, through either API — a claim (and the
// XR Crossplane binds it to) or a namespaced XR — and what it composed. Conditions and status are
// read from what the tenant created, composed resources found by the XR's label (and, for a
// namespaced XR, its namespace).
type karpenter struct {
	t    *testing.T
	ctx  context.Context
	api  *api
	ns   string
	name string
	xr   xrRef // the XR: the claim's, once bound; the namespaced XR itself
}

// newKarpenter creates the API's example (what a tenant writes) in ns, with the given name and
// cluster.
func newKarpenter(t *testing.T, a *api, ns, name, cluster string) *karpenter {
	t.Helper()
	return newKarpenterFrom(t, a, ns, name, func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, cluster, "spec", "cluster", "name")
	})
}

// onProdUS points a request at prod-us instead of the example's prod-eu: its region and the
// role and instance profile of its bootstrap nodes.
func onProdUS(u *unstructured.Unstructured) {
	_ = unstructured.SetNestedField(u.Object, "prod-us", "spec", "cluster", "name")
	_ = unstructured.SetNestedField(u.Object, "us-east-1", "spec", "cluster", "region")
	_ = unstructured.SetNestedField(u.Object, "arn:aws:iam::111122223333:role/prod-us-bootstrap-nodes", "spec", "nodeIdentity", "roleArn")
	_ = unstructured.SetNestedField(u.Object, "prod-us-bootstrap-nodes", "spec", "nodeIdentity", "instanceProfile")
}

// newKarpenterFrom creates the API's example in ns with the given name, changed by mutate, waits
// for Crossplane to bind a claim to an XR, and registers its deletion — waiting for everything
// it composed to be gone — so the next test starts from an empty cluster even when this one
// fails.
func newKarpenterFrom(t *testing.T, a *api, ns, name string, mutate func(*unstructured.Unstructured)) *karpenter {
	t.Helper()
	c := createKarpenter(t, a, ns, name, mutate)
	c.xr = c.waitBound()
	return c
}

// createKarpenter is newKarpenterFrom without waiting for the claim to be bound: its xr is
// unset until waitBound says.
func createKarpenter(t *testing.T, a *api, ns, name string, mutate func(*unstructured.Unstructured)) *karpenter {
	t.Helper()
	ctx := context.Background()
	objs, err := readObjects(filepath.Join("..", a.example))
	if err != nil || len(objs) != 1 {
		t.Fatalf("cannot read %s: %v", a.example, err)
	}
	u := objs[0]
	u.SetNamespace(ns)
	u.SetName(name)
	mutate(u)
	if err := cp.ensureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.dyn.Resource(a.tenant).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the API server refused the %s: %v", a.kind, err)
	}
	c := &karpenter{t: t, ctx: ctx, api: a, ns: ns, name: name}
	t.Cleanup(func() {
		if c.exists() {
			c.deleteAndWait()
		}
	})
	return c
}

// String is what messages call it: "claim team-a/karpenter", "namespaced XR team-a/karpenter".
func (c *karpenter) String() string { return c.api.kind + " " + c.ns + "/" + c.name }

// get returns what the tenant created: the claim, or the namespaced XR.
func (c *karpenter) get() *unstructured.Unstructured {
	c.t.Helper()
	u, err := cp.dyn.Resource(c.api.tenant).Namespace(c.ns).Get(c.ctx, c.name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatalf("cannot get %s: %v", c, err)
	}
	return u
}

// getXR returns the XR (the claim's, or the namespaced XR itself), or an empty object when it
// cannot be read.
func (c *karpenter) getXR() *unstructured.Unstructured {
	u, err := c.xrResource().Get(c.ctx, c.xr.name, metav1.GetOptions{})
	if err != nil {
		return &unstructured.Unstructured{Object: map[string]any{}}
	}
	return u
}

func (c *karpenter) xrResource() dynamic.ResourceInterface {
	if c.api.namespaced {
		return cp.dyn.Resource(c.api.xrResource()).Namespace(c.ns)
	}
	return cp.dyn.Resource(c.api.xrResource())
}

// update writes u, a changed copy of what the tenant created, as the tenant would.
func (c *karpenter) update(u *unstructured.Unstructured) error {
	_, err := cp.dyn.Resource(c.api.tenant).Namespace(c.ns).Update(c.ctx, u, metav1.UpdateOptions{})
	return err
}

// setVersion sets the request's spec.version as a tenant would (kubectl edit).
func (c *karpenter) setVersion(v string) error {
	return c.setField(v, "spec", "version")
}

// setField sets one field of the request as a tenant would (kubectl edit): read, change, write,
// and again when a write of Crossplane's came in between (a conflict).
func (c *karpenter) setField(v any, path ...string) error {
	var err error
	for range 5 {
		u := c.get()
		_ = unstructured.SetNestedField(u.Object, v, path...)
		if err = c.update(u); !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
}

func (c *karpenter) exists() bool {
	_, err := cp.dyn.Resource(c.api.tenant).Namespace(c.ns).Get(c.ctx, c.name, metav1.GetOptions{})
	return !apierrors.IsNotFound(err)
}

// waitBound returns the XR: for a claim, once Crossplane has created it and bound the claim.
func (c *karpenter) waitBound() xrRef {
	c.t.Helper()
	if c.api.namespaced {
		return xrRef{namespace: c.ns, name: c.name}
	}
	var xr string
	c.wait(30*time.Second, "claim bound to an XR", func() (bool, error) {
		u, err := cp.dyn.Resource(c.api.tenant).Namespace(c.ns).Get(c.ctx, c.name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		xr, _, _ = unstructured.NestedString(u.Object, "spec", "resourceRef", "name")
		return xr != "", nil
	})
	return xrRef{name: xr}
}

func (c *karpenter) wait(timeout time.Duration, what string, cond func() (bool, error)) {
	c.t.Helper()
	if err := waitFor(c.ctx, timeout, what, cond); err != nil {
		c.t.Fatalf("%v\n%s", err, c.describe())
	}
}

// composed lists what exists for the XR, Usages apart.
func (c *karpenter) composed() (resources, usages map[string]*unstructured.Unstructured) {
	c.t.Helper()
	all, err := composedOf(c.ctx, cp, c.xr)
	if err != nil {
		c.t.Fatal(err)
	}
	resources, usages = map[string]*unstructured.Unstructured{}, map[string]*unstructured.Unstructured{}
	for n, u := range all {
		switch {
		case isUsage(n):
			usages[n] = u
		case cluster.IsCheckName(resource.Name(n)):
			// Each access check Pod has an Object of its own (access-check, or
			// access-check-<digest> while access-check carries the one it supersedes): the
			// tests know the current one as access-check. The superseded one, which Crossplane
			// deletes, no longer carries the XR's labels.
			if was, ok := resources[accessCheck]; !ok || was.GetDeletionTimestamp() != nil {
				resources[accessCheck] = u
			}
		default:
			resources[n] = u
		}
	}
	return resources, usages
}

// waitComposed waits until exactly want (Usages apart) exists in the API server.
func (c *karpenter) waitComposed(want []string, timeout time.Duration) map[string]*unstructured.Unstructured {
	c.t.Helper()
	var got map[string]*unstructured.Unstructured
	c.wait(timeout, fmt.Sprintf("exactly %d composed resources: %s", len(want), strings.Join(want, ", ")), func() (bool, error) {
		got, _ = c.composed()
		return equalSets(sortedKeys(got), want), nil
	})
	return got
}

// condition returns a condition of what the tenant created, or nil.
func (c *karpenter) condition(typ string) map[string]any { return condition(c.get(), typ) }

// waitCondition waits until the condition typ of what the tenant created has status and a
// message containing every one of contains.
func (c *karpenter) waitCondition(typ, status string, timeout time.Duration, contains ...string) map[string]any {
	c.t.Helper()
	var got map[string]any
	c.wait(timeout, fmt.Sprintf("%s condition %s=%s containing %q", c.api.kind, typ, status, contains), func() (bool, error) {
		got = c.condition(typ)
		if got == nil || got["status"] != status {
			return false, nil
		}
		msg, _ := got["message"].(string)
		return containsAll(msg, contains...), nil
	})
	return got
}

// settled waits until every resource c composed is Ready, as its provider reports it. With the
// real provider-kubernetes, a request is Ready before its pools' observe-only Objects are: they
// were composed before Flux applied the pools, and the provider reads them again on its 30 s
// poll. A test that holds every resource to stay Ready starts from here.
func (c *karpenter) settled() {
	c.t.Helper()
	c.wait(2*time.Minute, "every composed resource Ready", func() (bool, error) {
		resources, _ := c.composed()
		for _, r := range resources {
			if conditionStatus(r, "Ready") != "True" {
				return false, nil
			}
		}
		return len(resources) > 0, nil
	})
}

// annotate sets an annotation on what the tenant created, as the tenant would (kubectl
// annotate). The function reads the XR's annotations: for a claim it waits until Crossplane has
// propagated the claim's to its XR.
func (c *karpenter) annotate(key, value string) {
	c.t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}}})
	if _, err := cp.dyn.Resource(c.api.tenant).Namespace(c.ns).Patch(c.ctx, c.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		c.t.Fatalf("cannot annotate %s: %v", c, err)
	}
	if c.api.namespaced {
		return
	}
	c.wait(react, fmt.Sprintf("Crossplane to propagate the claim's annotation %s=%s to its XR", key, value), func() (bool, error) {
		return c.getXR().GetAnnotations()[key] == value, nil
	})
}

// markReady has the fake provider make the named composed resources Ready.
func (c *karpenter) markReady(names ...string) { c.report(want{state: ready}, names...) }

// report has the fake provider report w for the named composed resources, which must exist.
func (c *karpenter) report(w want, names ...string) {
	c.t.Helper()
	got, _ := c.composed()
	for _, n := range names {
		if _, ok := got[n]; !ok {
			c.t.Fatalf("cannot report on %s: it does not exist", n)
		}
		fake.set(c.xr, n, w)
	}
}

// deleteAndWait deletes what the tenant created and waits until it, the XR and everything it
// composed are gone from the API server; it logs how long that took and returns the composed
// objects' deletions in the order the fake provider saw them meanwhile — of every XR, other
// tests' that run in parallel included.
func (c *karpenter) deleteAndWait() []deletion {
	c.t.Helper()
	start, mark := time.Now(), fake.deletionMark()
	c.delete()
	return c.waitGone(start, mark)
}

// delete deletes what the tenant created, as a tenant watching the uninstall would: a claim
// as its XRD's default (foreground) has it, a namespaced XR with foreground propagation
// (kubectl delete --cascade=foreground), so either stays until everything it composed is gone.
func (c *karpenter) delete() {
	c.t.Helper()
	if err := c.tryDelete(); err != nil && !apierrors.IsNotFound(err) {
		c.t.Fatalf("cannot delete %s: %v", c, err)
	}
}

// tryDelete asks the API server to delete what the tenant created, as delete does, and returns
// its answer.
func (c *karpenter) tryDelete() error {
	opts := metav1.DeleteOptions{}
	if c.api.namespaced {
		fg := metav1.DeletePropagationForeground
		opts.PropagationPolicy = &fg
	}
	return cp.dyn.Resource(c.api.tenant).Namespace(c.ns).Delete(c.ctx, c.name, opts)
}

// waitGone waits until what the tenant created, its XR and everything composed are gone, and
// returns the deletions the fake provider saw since mark. An uninstall takes two minutes and
// more (a 30 s wait of Crossplane's Usage controller per level of the Usages' order); right
// after the hub's API server restarted, Crossplane took 85 s more to delete a deleted claim's XR.
// With real claimed clusters and the suite's shards loading two cores, an uninstall took 389 s
// (cold, 2026-12-04).
func (c *karpenter) waitGone(start time.Time, mark int) []deletion {
	c.t.Helper()
	c.wait(8*time.Minute, c.api.kind+", XR and every composed resource gone", func() (bool, error) {
		if c.exists() {
			return false, nil
		}
		if _, err := c.xrResource().Get(c.ctx, c.xr.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, nil
		}
		all, err := composedOf(c.ctx, cp, c.xr)
		return err == nil && len(all) == 0, nil
	})
	// One more poll of the fake provider, so it has seen the last objects go.
	time.Sleep(3 * fakePoll)
	c.t.Logf("%s deleted: everything gone in %.1fs", c, time.Since(start).Seconds())
	return fake.deletionsSince(mark)
}

// describe is what the tenant created, the claim's XR and what it composed, for failure
// messages.
func (c *karpenter) describe() string {
	var b strings.Builder
	if u, err := cp.dyn.Resource(c.api.tenant).Namespace(c.ns).Get(c.ctx, c.name, metav1.GetOptions{}); err == nil {
		fmt.Fprintf(&b, "%s conditions:\n%s", c, conditionsText(u))
	}
	if c.xr.name != "" {
		if !c.api.namespaced {
			if u, err := c.xrResource().Get(c.ctx, c.xr.name, metav1.GetOptions{}); err == nil {
				fmt.Fprintf(&b, "XR %s conditions:\n%s", c.xr, conditionsText(u))
			}
		}
		if all, err := composedOf(c.ctx, cp, c.xr); err == nil {
			fmt.Fprintf(&b, "composed (%d):\n", len(all))
			for _, n := range sortedKeys(all) {
				u := all[n]
				fmt.Fprintf(&b, "  %-64s %s %s ready=%s synced=%s\n", n, u.GetKind(), u.GetName(), conditionStatus(u, "Ready"), conditionStatus(u, "Synced"))
			}
		}
	}
	return b.String()
}

// eventList lists the Kubernetes events about what the tenant created.
func (c *karpenter) eventList() (*corev1.EventList, error) {
	return cp.kube.CoreV1().Events(c.ns).List(c.ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(c.get().GetUID())})
}

// events lists the Kubernetes events about what the tenant created, as `kubectl describe` shows
// them.
func (c *karpenter) events() string {
	l, err := c.eventList()
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range l.Items {
		fmt.Fprintf(&b, "  %dx %s %s: %s\n", max(e.Count, 1), e.Type, e.Reason, e.Message)
	}
	return b.String()
}

// warningEvent tells whether what the tenant created has a Warning event whose message contains
// every one of want.
func (c *karpenter) warningEvent(want ...string) bool {
	l, err := c.eventList()
	if err != nil {
		return false
	}
	for _, e := range l.Items {
		if e.Type == "Warning" && containsAll(e.Message, want...) {
			return true
		}
	}
	return false
}

// xrWarnings lists the warning events on the XR (failed applies, function errors), with how many
// times each was seen. A cluster-scoped XR's events are in the default namespace.
func (c *karpenter) xrWarnings() string {
	ns := c.xr.namespace
	if ns == "" {
		ns = "default"
	}
	l, err := cp.kube.CoreV1().Events(ns).List(c.ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(c.getXR().GetUID())})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range l.Items {
		if e.Type == "Warning" {
			fmt.Fprintf(&b, "  %dx %s: %s\n", max(e.Count, 1), e.Reason, e.Message)
		}
	}
	return b.String()
}

func conditionsText(u *unstructured.Unstructured) string {
	var b strings.Builder
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		fmt.Fprintf(&b, "  %s=%v (%v) %v\n", m["type"], m["status"], m["reason"], m["message"])
	}
	return b.String()
}

func equalSets(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = append([]string(nil), a...), append([]string(nil), b...)
	sort.Strings(a)
	sort.Strings(b)
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// timed logs how long a scenario took, in the test's output.
func timed(t *testing.T) {
	start := time.Now()
	t.Cleanup(func() { fmt.Printf("e2e: %-40s %6.1fs\n", t.Name(), time.Since(start).Seconds()) })
}
