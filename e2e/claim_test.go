//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	claimGVR = schema.GroupVersionResource{Group: "platform.socle.do-now.io", Version: "v1alpha1", Resource: "karpenters"}
	xrGVR    = schema.GroupVersionResource{Group: "platform.socle.do-now.io", Version: "v1alpha1", Resource: "xkarpenters"}
)

// The composed resource names of each step (API: see the README), and the condition that
// reports the step. A step's resources appear in rounds: step three's ServiceAccount and Job live
// in the namespace, so their Objects are composed only once the namespace's Object is Ready.
var steps = []struct {
	condition string
	rounds    [][]string
}{
	{"IdentityAndQueueReady", [][]string{{"controller-role", "controller-role-policy", "interruption-queue",
		"rule-capacity-reservation", "rule-health", "rule-rebalance", "rule-spot-interruption", "rule-state-change"}}},
	{"InterruptionWiringReady", [][]string{{"interruption-queue-policy", "pod-identity-association",
		"target-capacity-reservation", "target-health", "target-rebalance", "target-spot-interruption", "target-state-change"}}},
	{"AccessCheckReady", [][]string{{"controller-namespace"}, {"access-check", "controller-service-account"}}},
	{"ControllerReady", [][]string{{"controller-kustomization"}}},
	{"NodePoolsReady", [][]string{{"nodes-kustomization"}}},
}

// stepNames is every composed resource name of step i, in every round.
func stepNames(i int) []string {
	var out []string
	for _, r := range steps[i].rounds {
		out = append(out, r...)
	}
	sort.Strings(out)
	return out
}

// throughRound is every composed resource name of the steps before i and of rounds 0..r of
// step i.
func throughRound(i, r int) []string {
	var out []string
	for j := range i {
		out = append(out, stepNames(j)...)
	}
	for _, names := range steps[i].rounds[:r+1] {
		out = append(out, names...)
	}
	sort.Strings(out)
	return out
}

// throughStep is every composed resource name of steps 0..i.
func throughStep(i int) []string { return throughRound(i, len(steps[i].rounds)-1) }

// allNames is every composed resource name of a claim walked to Ready, Usages apart.
func allNames() []string { return throughStep(len(steps) - 1) }

func isUsage(name string) bool { return strings.HasPrefix(name, "usage-") }

// claim is one Karpenter claim a test created, and what it composed.
type claim struct {
	t    *testing.T
	ctx  context.Context
	ns   string
	name string
	xr   string // the bound XR, once known
}

// newClaim creates examples/claim.yaml (what a tenant writes) in ns, with the given name and
// cluster.
func newClaim(t *testing.T, ns, name, cluster string) *claim {
	t.Helper()
	return newClaimFrom(t, ns, name, func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, cluster, "spec", "cluster", "name")
	})
}

// newClaimFrom creates examples/claim.yaml in ns with the given name, changed by mutate, waits
// for Crossplane to bind it to an XR, and registers its deletion — waiting for everything it
// composed to be gone — so the next test starts from an empty cluster even when this one fails.
func newClaimFrom(t *testing.T, ns, name string, mutate func(*unstructured.Unstructured)) *claim {
	t.Helper()
	ctx := context.Background()
	objs, err := readObjects(filepath.Join("..", "examples", "claim.yaml"))
	if err != nil || len(objs) != 1 {
		t.Fatalf("cannot read examples/claim.yaml: %v", err)
	}
	u := objs[0]
	u.SetNamespace(ns)
	u.SetName(name)
	mutate(u)
	if err := cp.ensureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.dyn.Resource(claimGVR).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the API server refused the claim: %v", err)
	}
	c := &claim{t: t, ctx: ctx, ns: ns, name: name}
	t.Cleanup(func() {
		if c.exists() {
			c.deleteAndWait()
		}
	})
	c.xr = c.waitBound()
	return c
}

func (c *claim) get() *unstructured.Unstructured {
	c.t.Helper()
	u, err := cp.dyn.Resource(claimGVR).Namespace(c.ns).Get(c.ctx, c.name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatalf("cannot get claim %s/%s: %v", c.ns, c.name, err)
	}
	return u
}

// getXR returns the claim's XR, or an empty object when it cannot be read.
func (c *claim) getXR() *unstructured.Unstructured {
	u, err := cp.dyn.Resource(xrGVR).Get(c.ctx, c.xr, metav1.GetOptions{})
	if err != nil {
		return &unstructured.Unstructured{Object: map[string]any{}}
	}
	return u
}

func (c *claim) exists() bool {
	_, err := cp.dyn.Resource(claimGVR).Namespace(c.ns).Get(c.ctx, c.name, metav1.GetOptions{})
	return !apierrors.IsNotFound(err)
}

// waitBound waits for Crossplane to create the claim's XR and returns its name.
func (c *claim) waitBound() string {
	c.t.Helper()
	var xr string
	c.wait(30*time.Second, "claim bound to an XR", func() (bool, error) {
		u, err := cp.dyn.Resource(claimGVR).Namespace(c.ns).Get(c.ctx, c.name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		xr, _, _ = unstructured.NestedString(u.Object, "spec", "resourceRef", "name")
		return xr != "", nil
	})
	return xr
}

func (c *claim) wait(timeout time.Duration, what string, cond func() (bool, error)) {
	c.t.Helper()
	if err := waitFor(c.ctx, timeout, what, cond); err != nil {
		c.t.Fatalf("%v\n%s", err, c.describe())
	}
}

// composed lists what exists for the claim's XR, Usages apart.
func (c *claim) composed() (resources, usages map[string]*unstructured.Unstructured) {
	c.t.Helper()
	all, err := composedOf(c.ctx, cp, c.xr)
	if err != nil {
		c.t.Fatal(err)
	}
	resources, usages = map[string]*unstructured.Unstructured{}, map[string]*unstructured.Unstructured{}
	for n, u := range all {
		if isUsage(n) {
			usages[n] = u
		} else {
			resources[n] = u
		}
	}
	return resources, usages
}

// waitComposed waits until exactly want (Usages apart) exists in the API server.
func (c *claim) waitComposed(want []string, timeout time.Duration) map[string]*unstructured.Unstructured {
	c.t.Helper()
	var got map[string]*unstructured.Unstructured
	c.wait(timeout, fmt.Sprintf("exactly %d composed resources: %s", len(want), strings.Join(want, ", ")), func() (bool, error) {
		got, _ = c.composed()
		return equalSets(sortedKeys(got), want), nil
	})
	return got
}

// condition returns a condition of the claim, or nil.
func (c *claim) condition(typ string) map[string]any { return condition(c.get(), typ) }

// waitCondition waits until the claim's condition typ has status and a message containing
// every one of contains.
func (c *claim) waitCondition(typ, status string, timeout time.Duration, contains ...string) map[string]any {
	c.t.Helper()
	var got map[string]any
	c.wait(timeout, fmt.Sprintf("claim condition %s=%s containing %q", typ, status, contains), func() (bool, error) {
		got = c.condition(typ)
		if got == nil || got["status"] != status {
			return false, nil
		}
		msg, _ := got["message"].(string)
		return containsAll(msg, contains...), nil
	})
	return got
}

// markReady has the fake provider make the named composed resources Ready.
func (c *claim) markReady(names ...string) { c.report(want{state: ready}, names...) }

// report has the fake provider report w for the named composed resources, which must exist.
func (c *claim) report(w want, names ...string) {
	c.t.Helper()
	got, _ := c.composed()
	for _, n := range names {
		if _, ok := got[n]; !ok {
			c.t.Fatalf("cannot report on %s: it does not exist", n)
		}
		fake.set(c.xr, n, w)
	}
}

// deleteAndWait deletes the claim and waits until the claim, its XR and everything it composed
// are gone from the API server; it logs how long that took and returns the composed objects'
// deletions in the order the fake provider saw them.
func (c *claim) deleteAndWait() []deletion {
	c.t.Helper()
	start := time.Now()
	fake.deletions()
	if err := cp.dyn.Resource(claimGVR).Namespace(c.ns).Delete(c.ctx, c.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		c.t.Fatalf("cannot delete claim: %v", err)
	}
	c.wait(3*time.Minute, "claim, XR and every composed resource gone", func() (bool, error) {
		if c.exists() {
			return false, nil
		}
		if _, err := cp.dyn.Resource(xrGVR).Get(c.ctx, c.xr, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, nil
		}
		all, err := composedOf(c.ctx, cp, c.xr)
		return err == nil && len(all) == 0, nil
	})
	// One more poll of the fake provider, so it has seen the last objects go.
	time.Sleep(300 * time.Millisecond)
	c.t.Logf("claim %s/%s deleted: everything gone in %.1fs", c.ns, c.name, time.Since(start).Seconds())
	return fake.deletions()
}

// describe is the claim, its XR and what it composed, for failure messages.
func (c *claim) describe() string {
	var b strings.Builder
	if u, err := cp.dyn.Resource(claimGVR).Namespace(c.ns).Get(c.ctx, c.name, metav1.GetOptions{}); err == nil {
		fmt.Fprintf(&b, "claim %s/%s conditions:\n%s", c.ns, c.name, conditionsText(u))
	}
	if c.xr != "" {
		if u, err := cp.dyn.Resource(xrGVR).Get(c.ctx, c.xr, metav1.GetOptions{}); err == nil {
			fmt.Fprintf(&b, "XR %s conditions:\n%s", c.xr, conditionsText(u))
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

// eventList lists the Kubernetes events about the claim.
func (c *claim) eventList() (*corev1.EventList, error) {
	return cp.kube.CoreV1().Events(c.ns).List(c.ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(c.get().GetUID())})
}

// events lists the Kubernetes events about the claim, as `kubectl describe` shows them.
func (c *claim) events() string {
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

// warningEvent tells whether the claim has a Warning event whose message contains every one of
// want.
func (c *claim) warningEvent(want ...string) bool {
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

// xrWarnings lists the warning events on the claim's XR (failed applies, function errors), with
// how many times each was seen.
func (c *claim) xrWarnings() string {
	l, err := cp.kube.CoreV1().Events("default").List(c.ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(c.getXR().GetUID())})
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
