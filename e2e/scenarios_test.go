//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// How long Crossplane gets to react to one change. A reconcile takes well under a second on
// loopback, but Crossplane (v2.4.2 as v2.2.1) soon stops reacting to watch events for this XR
// (its circuit breaker opens; see docs/testing.md) and then reconciles on the function's TTL: 2s
// right after a step's resources changed, up to 30s while they wait, a minute once everything is
// Ready. The margin is for a loaded CI machine.
const react = 2 * time.Minute

// How long one round of a step's resources may take to appear: a reaction, and Crossplane's
// retry backoff should an apply fail once.
const converge = 3 * time.Minute

// Expected identifiers, as AWS (the emulator) reports them for cluster prod-eu in eu-west-3 and
// account 111122223333 (examples/claim.yaml). The queue's URL is wantQueueURL.
const (
	wantRoleARN  = "arn:aws:iam::111122223333:role/socle/prod-eu/prod-eu-karpenter"
	wantQueueARN = "arn:aws:sqs:eu-west-3:111122223333:prod-eu-karpenter"
)

// wantQueueURL is prod-eu's queue URL as the emulator reports it: moto names a queue's URL after
// the endpoint it was asked at (moto 5.2.1 sqs/models.py, Queue.url), where AWS answers
// renderedQueueURL.
func wantQueueURL() string { return cp.aws.endpoint + "/111122223333/prod-eu-karpenter" }

// renderedQueueURL is prod-eu's queue URL as AWS names it, and the golden renders' providers
// report it.
const renderedQueueURL = "https://sqs.eu-west-3.amazonaws.com/111122223333/prod-eu-karpenter"

var wantRuleARNs = map[string]any{
	"capacity-reservation": "arn:aws:events:eu-west-3:111122223333:rule/prod-eu-karpenter-capacity",
	"health":               "arn:aws:events:eu-west-3:111122223333:rule/prod-eu-karpenter-health",
	"rebalance":            "arn:aws:events:eu-west-3:111122223333:rule/prod-eu-karpenter-rebalance",
	"spot-interruption":    "arn:aws:events:eu-west-3:111122223333:rule/prod-eu-karpenter-spot",
	"state-change":         "arn:aws:events:eu-west-3:111122223333:rule/prod-eu-karpenter-state",
}

// pendingIn parses the resources a step condition says it waits on ("waiting for a, b to become
// Ready"), nil when it waits on none.
func pendingIn(message string) []string {
	_, rest, ok := strings.Cut(message, "waiting for ")
	if !ok {
		return nil
	}
	list, _, ok := strings.Cut(rest, " to become Ready")
	if !ok {
		return nil
	}
	return strings.Split(list, ", ")
}

// problemsOf is what a step condition says of one resource it waits on: its problems, from its
// first "name: problem" to the next resource's. The condition names what the step waits on, then
// each one's problems as "name: problem", joined by "; " (internal/sequence/gate.go). Empty when
// it says nothing of name.
func problemsOf(message, name string) string {
	i := strings.Index(message, "; "+name+": ")
	if i < 0 {
		return ""
	}
	problems := message[i+len("; "):]
	for _, other := range pendingIn(message) {
		if j := strings.Index(problems, "; "+other+": "); other != name && j >= 0 {
			problems = problems[:j]
		}
	}
	return problems
}

// Scenario 1: a request in tenant namespace team-a, through each API, walks from nothing to
// Ready. Each step's resources appear only once every resource of the steps before it is Ready;
// while the last resource of a step is not Ready the function has observably seen the rest Ready
// and still withholds the next step. Every object was accepted by the API server against the real
// CRDs, is of its API's scope (the namespaced XR's all in its namespace), and the claim or the
// namespaced XR shows the role ARN, the queue, the rule ARNs and every step condition. The
// monitoring, beside the node pools, is left unready until they are Ready: the node pools do not
// wait for it, the request does. Meanwhile the pools the claimed cluster's Karpenter reports show
// in status.pools and PoolsWithinLimits (Unknown before any NodePool exists), within their limits,
// then one near them: PoolsWithinLimits turns False naming it, and the request still goes Ready.
//
// prod-eu is a real claimed cluster (realClaimedClusters). The fake provider-aws holds an AWS
// resource unready; what holds an Object is what would hold it in a real cluster, each lifted
// when the walk comes to it: an organisation's admission policy refusing the controller's
// namespace (deny), the access check's script not started yet (checksHeld), the platform's
// GitOps source missing (the controller's Kustomization), the monitoring's namespace missing
// (the monitoring Kustomization, which kustomize-controller tries again after retryInterval),
// an admission policy refusing every NodePool (the nodes Kustomization). The pools'
// usage is what Karpenter's stand-in reports; provider-kubernetes re-reads a Ready Object every
// 20 s here (--poll; its default, 10m, would show a pool's change that much later).
func TestWalkToReady(t *testing.T) {
	timed(t)
	claimed, _, base := realClaimedClusters(t, realClaimedFailing, "prod-eu")
	forEachAPI(t, func(t *testing.T, a *api) { testWalkToReady(t, a, claimed["prod-eu"], base) })
}

func testWalkToReady(t *testing.T, a *api, eu *claimedCluster, base *gitOpsBase) {
	input := platformInput(t, a)
	ns, _, _ := unstructured.NestedString(input, "podIdentity", "namespace")
	monitoring, _, _ := unstructured.NestedString(input, "monitoring", "namespace")
	// The API before this one walked in the same cluster.
	eu.waitUninstalled(t, ns)
	eu.pools.Clear()
	probe := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
	liftNamespace := eu.deny(t, "", "namespaces", ns, "e2e: an admission policy holds namespace "+ns, probe)
	liftPools := eu.deny(t, "karpenter.sh", "nodepools", "", "e2e: an admission policy holds every NodePool", nil)
	eu.checksHeld.Store(true)
	t.Cleanup(func() { eu.checksHeld.Store(false) })
	if err := eu.kube.CoreV1().Namespaces().Delete(t.Context(), monitoring, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("cannot delete the monitoring namespace %s of %s: %v", monitoring, eu.name, err)
	}
	ensureMonitoring := func() {
		if err := waitFor(context.Background(), 2*time.Minute, "the monitoring namespace "+monitoring+" back", func() (bool, error) {
			return eu.ensureNamespace(context.Background(), monitoring) == nil, nil
		}); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(ensureMonitoring)
	c := newKarpenter(t, a, "team-a", "karpenter", "prod-eu")
	sourceAt(t, c, eu, base, "")
	t.Cleanup(func() { sourceAt(t, c, eu, base, "main") })
	// What lifts the hold of each Object the walk holds last in its round.
	release := map[string]func(){
		"controller-namespace":     liftNamespace,
		accessCheck:                func() { eu.checksHeld.Store(false) },
		"controller-kustomization": func() { sourceAt(t, c, eu, base, "main") },
		"monitoring-kustomization": ensureMonitoring,
		"nodes-kustomization":      liftPools,
	}
	letGo := func(names ...string) {
		for _, n := range names {
			if f, ok := release[n]; ok {
				f()
			} else {
				c.markReady(n)
			}
		}
	}

	var besides []int // the steps beside the others, left unready while the later steps walk
	for i, s := range steps {
		start := time.Now()
		for r, names := range s.rounds {
			c.waitComposed(throughRound(i, r), converge)
			// Everything of the round Ready but one resource: the function must report that one
			// as pending, with whatever of the step's later rounds it withholds, and still
			// withhold the rest.
			last := names[0]
			for _, n := range names[1:] {
				c.markReady(n)
			}
			wantPending := []string{last}
			for _, later := range s.rounds[r+1:] {
				wantPending = append(wantPending, later...)
			}
			sort.Strings(wantPending)
			c.waitCondition(s.condition, "False", react)
			c.wait(react, fmt.Sprintf("%s to wait only on %s", s.condition, strings.Join(wantPending, ", ")), func() (bool, error) {
				msg, _ := c.condition(s.condition)["message"].(string)
				return slices.Equal(pendingIn(msg), wantPending), nil
			})
			if i+1 < len(steps) {
				next := c.condition(steps[i+1].condition)
				switch {
				case s.beside:
					// The next step does not wait for this one: it waits on its own resources.
					if next == nil || next["status"] != "False" || next["reason"] != "Creating" {
						t.Errorf("step %d: %s is beside the others: while %s is not Ready, %s must be False/Creating on its own resources, got %v", i+1, s.condition, last, steps[i+1].condition, next)
					}
				case next == nil || next["status"] != "False" || next["reason"] != "WaitingForPrerequisites":
					t.Errorf("step %d: while %s is not Ready, %s must be False/WaitingForPrerequisites, got %v", i+1, last, steps[i+1].condition, next)
				}
			}
			if now, _ := c.composed(); !equalSets(sortedKeys(now), throughRound(i, r)) {
				t.Fatalf("step %d round %d: with %s not Ready, composed resources must stay %v, got %v", i+1, r+1, last, throughRound(i, r), sortedKeys(now))
			}
			if ready := c.condition("Ready"); ready == nil || ready["status"] != "False" {
				t.Errorf("step %d: the %s must be held at Ready=False while steps are withheld, got %v", i+1, a.kind, ready)
			}
			if s.condition == "NodePoolsReady" {
				// The observers exist, but the claimed cluster holds no NodePool yet.
				cond := c.waitCondition(poolsCondition, "Unknown", react)
				if cond["reason"] != "NotObservedYet" {
					t.Errorf("with no NodePool applied, %s must be Unknown/NotObservedYet, got %v", poolsCondition, cond)
				}
				for pool, rep := range poolsWithin {
					eu.pools.Store(pool, rep)
				}
			}
			if s.beside {
				continue
			}
			letGo(last)
		}
		if s.beside {
			besides = append(besides, i)
			t.Logf("step %d (%s): %d resources appeared in %.1fs; left unready while the next steps walk", i+1, s.condition, len(stepNames(i)), time.Since(start).Seconds())
			continue
		}
		c.waitCondition(s.condition, "True", converge)
		t.Logf("step %d (%s): %d resources appeared and became Ready in %.1fs", i+1, s.condition, len(stepNames(i)), time.Since(start).Seconds())
	}

	// Every step but those beside is Ready: the pools, as the claimed cluster's Karpenter reports
	// them, show on the request, which still waits for the steps beside.
	start := time.Now()
	assertPools(t, c, "True", "WithinLimits", "every pool below 0.9 of its limits", wantPoolsWithin)
	// Karpenter's own validation of each EC2NodeClass, as the claimed cluster reports it.
	c.waitCondition("NodeClassesValidated", "True", react, "Karpenter's own dry runs (CreateLaunchTemplate, CreateFleet, RunInstances) pass for every EC2NodeClass")
	if ready := c.condition("Ready"); ready == nil || ready["status"] != "False" {
		t.Errorf("the %s must wait for %s beside the node pools: want Ready=False, got %v", a.kind, steps[besides[0]].condition, ready)
	}
	// A pool at the platform's near-limits ratio: the request says which and by how much, and
	// observing holds nothing back.
	near := poolsWithin["private"]
	near.cpu = "95"
	eu.pools.Store("private", near)
	wantNearPools := clonePools(wantPoolsWithin)
	wantNearPools["private"].(map[string]any)["cpu"] = map[string]any{"used": "95", "limit": "100", "percent": int64(95)}
	assertPools(t, c, "False", "NearLimits", "at or above 0.9 of their limits, Karpenter will soon launch no more nodes: private: cpu 95 of 100 (95%)", wantNearPools)
	if cond := c.condition("NodePoolsReady"); cond == nil || cond["status"] != "True" {
		t.Errorf("a pool near its limits must not hold NodePoolsReady back, got %v", cond)
	}
	t.Logf("pools observed within, then near their limits, in %.1fs", time.Since(start).Seconds())
	for _, i := range besides {
		letGo(stepNames(i)...)
		c.waitCondition(steps[i].condition, "True", converge)
	}
	c.waitCondition("Ready", "True", react)
	got := c.get()
	if cond := condition(got, poolsCondition); cond == nil || cond["status"] != "False" || cond["reason"] != "NearLimits" {
		t.Errorf("Ready with a pool near its limits: %s must stay False/NearLimits, got %v", poolsCondition, cond)
	}
	for _, s := range steps {
		cond := condition(got, s.condition)
		if cond == nil || cond["status"] != "True" || cond["reason"] != "Available" {
			t.Errorf("%s condition %s: want True/Available, got %v", a.kind, s.condition, cond)
		}
	}
	if synced := condition(got, "Synced"); synced == nil || synced["status"] != "True" {
		t.Errorf("%s Synced: want True, got %v", a.kind, synced)
	}
	const accepted = `Karpenter for cluster "prod-eu" in eu-west-3`
	if cond := condition(got, "Accepted"); cond == nil || cond["status"] != "True" || cond["reason"] != "Accepted" || cond["message"] != accepted {
		t.Errorf("%s condition Accepted: want True/Accepted %q, got %v", a.kind, accepted, cond)
	}
	status, _, _ := unstructured.NestedMap(got.Object, "status")
	if status["roleArn"] != wantRoleARN {
		t.Errorf("%s status.roleArn: want %q, got %v", a.kind, wantRoleARN, status["roleArn"])
	}
	wantQueue := map[string]any{"name": "prod-eu-karpenter", "arn": wantQueueARN, "url": wantQueueURL()}
	if q, _ := status["queue"].(map[string]any); fmt.Sprint(q) != fmt.Sprint(wantQueue) {
		t.Errorf("%s status.queue: want %v, got %v", a.kind, wantQueue, status["queue"])
	}
	if r, _ := status["ruleArns"].(map[string]any); fmt.Sprint(r) != fmt.Sprint(wantRuleARNs) {
		t.Errorf("%s status.ruleArns: want %v, got %v", a.kind, wantRuleARNs, status["ruleArns"])
	}
	xr, err := c.xrResource().Get(c.ctx, c.xr.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if synced := condition(xr, "Synced"); synced == nil || synced["status"] != "True" {
		t.Errorf("XR Synced: want True (every composed resource applied), got %v", synced)
	}
	if w := c.xrWarnings(); w != "" {
		t.Logf("Crossplane's warnings on the XR during the walk:\n%s", w)
	}
	resources, usages := c.composed()
	t.Logf("Ready with %d composed resources and %d Usages", len(resources), len(usages))
	assertNothingPruned(t, a, resources, usages)
	assertScope(t, c, resources, usages)
	assertDelivery(t, resources, "prod-eu")
	// provider-kubernetes derives the access check's readiness from the Object's own CEL query,
	// evaluated on the Pod the claimed cluster reports Succeeded.
	if s := conditionStatus(resources[accessCheck], "Ready"); s != "True" {
		t.Errorf("the access-check Object's readiness query must hold on a Succeeded Pod: Ready=%q, conditions:\n%s", s, conditionsText(resources[accessCheck]))
	}
	if name, phase := observedPodOf(resources[accessCheck]); name != podOf(resources[accessCheck]) || phase != "Succeeded" {
		t.Errorf("the access-check Object must observe its Pod %s Succeeded, observes %q %q", podOf(resources[accessCheck]), name, phase)
	}
	assertNothingLocal(t)

	// The region is the platform's: a claim that sets another is refused by the function
	// (TestBadInput), whether it writes it first or later.
	t.Run("cluster name is immutable", func(t *testing.T) {
		for _, f := range []struct{ field, value, message string }{
			{"name", "prod-us", "spec.cluster.name is immutable"},
		} {
			err := c.setField(f.value, "spec", "cluster", f.field)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), f.message) {
				t.Errorf("changing spec.cluster.%s: want Invalid naming %q, got %v", f.field, f.message, err)
			}
		}
	})

	// The pools report nodes (poolsWithin): a guarded deletion waits for the tenant's confirmation.
	guardedDeletion(t, c, "prod-eu")
}

// assertNothingPruned compares every composed object's spec, as the API server stored it, with
// what the function desires for the same request and observed state in the API's golden render
// (examples/render/8-all-ready.yaml, examples/namespaced/render/8-all-ready.yaml, whose fake
// providers report the same identifiers but for the queue's URL, which the emulator names
// otherwise: wantQueueURL): the API server silently prunes fields a CRD does not know, so a field
// missing here was dropped.
func assertNothingPruned(t *testing.T, a *api, maps ...map[string]*unstructured.Unstructured) {
	t.Helper()
	golden, err := readObjects(filepath.Join("..", a.golden))
	if err != nil {
		t.Fatal(err)
	}
	// A Usage names the objects at its ends (internal/usage), which Crossplane named here and the
	// render's fixtures there: both are compared as the composition-resource names they stand for.
	goldenNames := map[string]string{}
	for _, g := range golden {
		goldenNames[g.GetName()] = g.GetAnnotations()[resourceNameAnno]
	}
	storedNames := resourceNames(maps...)
	compared := 0
	for _, g := range golden {
		name := g.GetAnnotations()[resourceNameAnno]
		if name == "" {
			continue // the XR
		}
		var stored *unstructured.Unstructured
		for _, m := range maps {
			if u, ok := m[name]; ok {
				stored = u
			}
		}
		if stored == nil {
			t.Errorf("%s (%s) is in the golden render but was not composed", name, g.GetKind())
			continue
		}
		compared++
		want, got := withString(g.Object["spec"], renderedQueueURL, wantQueueURL()), stored.Object["spec"]
		if k := g.GetKind(); k == "Usage" || k == "ClusterUsage" {
			want, got = endsByResourceName(g, goldenNames), endsByResourceName(stored, storedNames)
		}
		for _, d := range missingFrom(want, got, "spec") {
			t.Errorf("%s (%s): %s", name, g.GetKind(), d)
		}
	}
	t.Logf("%d composed objects keep every field of the golden render", compared)
}

// withString is v, a decoded JSON value, with every string that holds from holding to instead.
func withString(v any, from, to string) any {
	switch v := v.(type) {
	case string:
		return strings.ReplaceAll(v, from, to)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = withString(e, from, to)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = withString(e, from, to)
		}
		return out
	}
	return v
}

// endsByResourceName is a Usage's spec with the name of the object at each end replaced by the
// composition-resource name names holds for it (endName).
func endsByResourceName(u *unstructured.Unstructured, names map[string]string) map[string]any {
	spec, _, _ := unstructured.NestedMap(u.DeepCopy().Object, "spec")
	for _, end := range []string{"of", "by"} {
		if _, ok, _ := unstructured.NestedString(spec, end, "resourceRef", "name"); ok {
			_ = unstructured.SetNestedField(spec, endName(spec, end, names), end, "resourceRef", "name")
		}
	}
	return spec
}

// resourceNames maps each composed object's name to its composition-resource name, the key it
// has in maps.
func resourceNames(maps ...map[string]*unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	for _, m := range maps {
		for n, u := range m {
			out[u.GetName()] = n
		}
	}
	return out
}

// endName is the composition-resource name of the object a Usage's spec names at end ("of" or
// "by"), or, when names holds none for it, a name no resource has, so that a comparison fails
// rather than pass on two empty strings.
func endName(spec map[string]any, end string, names map[string]string) string {
	v, _, _ := unstructured.NestedString(spec, end, "resourceRef", "name")
	if n, ok := names[v]; ok {
		return n
	}
	return fmt.Sprintf("<no composed resource named %q>", v)
}

// missingFrom lists where want is not contained in got: maps may gain fields (defaults), lists
// and scalars must be equal element by element. A zero value (false, 0, "", empty) counts as
// unset — the render writes the zero fields of typed structs, built-in types omit them, and the
// API server may default them.
func missingFrom(want, got any, path string) []string {
	if isZero(want) {
		return nil
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want an object, got %v", path, got)}
		}
		var out []string
		for _, k := range sortedKeys(w) {
			if _, ok := g[k]; !ok && !isZero(w[k]) {
				out = append(out, fmt.Sprintf("%s.%s: dropped by the API server (want %v)", path, k, w[k]))
				continue
			}
			out = append(out, missingFrom(w[k], g[k], path+"."+k)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: want %v, got %v", path, w, got)}
		}
		var out []string
		for i := range w {
			out = append(out, missingFrom(w[i], g[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	default:
		if fmt.Sprint(want) != fmt.Sprint(got) {
			return []string{fmt.Sprintf("%s: want %v, got %v", path, want, got)}
		}
		return nil
	}
}

func isZero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case bool:
		return !x
	case string:
		return x == ""
	case int64:
		return x == 0
	case float64:
		return x == 0
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

// walkToReady has the fake provider make every composed resource of the requests Ready as soon
// as it appears, until every one is Ready. It prints, for each, how long after its creation it
// got Ready with providers that answer at once, and how often its XR's Responsive condition
// (Crossplane's watch circuit breaker) went False meanwhile, sampled at every poll.
func walkToReady(t *testing.T, cs ...*karpenter) {
	t.Helper()
	start := time.Now()
	responsive := make([]string, len(cs))
	wentFalse := make([]int, len(cs))
	readyAt := make([]time.Time, len(cs))
	walk(t, nil, func() bool {
		all := true
		for i, c := range cs {
			if r := conditionStatus(c.getXR(), "Responsive"); r != responsive[i] {
				if r == "False" {
					wentFalse[i]++
				}
				responsive[i] = r
			}
			if readyAt[i].IsZero() && conditionStatus(c.get(), "Ready") == "True" {
				readyAt[i] = time.Now()
			}
			all = all && !readyAt[i].IsZero()
		}
		return all
	}, cs...)
	for i, c := range cs {
		created := c.get().GetCreationTimestamp().Time
		fmt.Printf("e2e: %-40s %s Ready %.0fs after its creation (walk %.1fs), Responsive=False %d times\n",
			t.Name(), c, readyAt[i].Sub(created).Seconds(), readyAt[i].Sub(start).Seconds(), wentFalse[i])
	}
}

func (c *karpenter) walkToReady() { c.t.Helper(); walkToReady(c.t, c) }

// walk has the fake provider report, for every composed resource of the requests as soon as it
// appears, what overrides says for its name, or Ready, until done holds. Each new resource (or
// done) must come within converge of the last. A request the function refuses fails the walk at
// once: no walked request is meant to be refused, and a refused one would only time out.
func walk(t *testing.T, overrides map[string]want, done func() bool, cs ...*karpenter) {
	t.Helper()
	reported := map[string]bool{}
	for !done() {
		var what []string
		for _, c := range cs {
			what = append(what, c.String())
		}
		err := waitFor(t.Context(), converge, "another composed resource, or "+strings.Join(what, " and ")+" done", func() (bool, error) {
			progress := false
			for _, c := range cs {
				if a := c.condition("Accepted"); a != nil && a["status"] == "False" {
					return false, fmt.Errorf("%s is refused (%s): %s", c, a["reason"], a["message"])
				}
				resources, _ := c.composed()
				for _, n := range sortedKeys(resources) {
					if reported[c.xr.String()+"/"+n] {
						continue
					}
					w, ok := overrides[n]
					if !ok {
						w = want{state: ready}
					}
					fake.set(c.xr, n, w)
					reported[c.xr.String()+"/"+n] = true
					progress = true
				}
			}
			return progress || done(), nil
		})
		if err != nil {
			var b strings.Builder
			for _, c := range cs {
				b.WriteString(c.describe())
			}
			t.Fatalf("%v\n%s", err, b.String())
		}
	}
}

// assertDelivery checks that a request's resources go to its own cluster: every Object (step
// three's, the three Kustomizations' and the pools' observe-only ones) goes through the cluster's
// provider config (a ProviderConfig, or for the namespaced XR a ClusterProviderConfig, of the
// same name), no Kustomization names a kubeconfig (the claimed cluster's own Flux applies it) and
// each is named after the cluster, and every resource (and every manifest an Object applies) is
// labelled with the cluster; an observe-only Object names a NodePool (the lease: the kube-system
// Namespace) and applies nothing.
func assertDelivery(t *testing.T, resources map[string]*unstructured.Unstructured, cluster string) {
	t.Helper()
	for _, n := range sortedKeys(resources) {
		u := resources[n]
		if got := u.GetLabels()[clusterLabel]; got != cluster {
			t.Errorf("%s %s: label %s=%q, want %q", u.GetKind(), u.GetName(), clusterLabel, got, cluster)
		}
		switch u.GetKind() {
		case "Object":
			if pc, _, _ := unstructured.NestedString(u.Object, "spec", "providerConfigRef", "name"); pc != cluster {
				t.Errorf("Object %s (%s): providerConfigRef %q, want %q", u.GetName(), n, pc, cluster)
			}
			if observeOnly(u) {
				// It writes nothing to the claimed cluster, only names what it reads there.
				m, _, _ := unstructured.NestedMap(u.Object, "spec", "forProvider", "manifest")
				want := map[string]any{"apiVersion": "karpenter.sh/v1", "kind": "NodePool"}
				switch {
				case n == lease:
					want = map[string]any{"apiVersion": "v1", "kind": "Namespace"} // kube-system, read only
				case strings.HasPrefix(n, "observe-ec2nodeclass-"):
					want = map[string]any{"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass"}
				}
				if m["apiVersion"] != want["apiVersion"] || m["kind"] != want["kind"] || m["spec"] != nil {
					t.Errorf("Object %s (%s): observe-only, it must name a %s %s and carry nothing to apply, got %v", u.GetName(), n, want["apiVersion"], want["kind"], m)
				}
				continue
			}
			labels, _, _ := unstructured.NestedStringMap(u.Object, "spec", "forProvider", "manifest", "metadata", "labels")
			if labels[clusterLabel] != cluster {
				t.Errorf("Object %s (%s): manifest label %s=%q, want %q", u.GetName(), n, clusterLabel, labels[clusterLabel], cluster)
			}
			if kind, _, _ := unstructured.NestedString(u.Object, "spec", "forProvider", "manifest", "kind"); kind == "Kustomization" {
				k, _, _ := unstructured.NestedMap(u.Object, "spec", "forProvider", "manifest")
				if ref, ok, _ := unstructured.NestedFieldNoCopy(k, "spec", "kubeConfig"); ok {
					t.Errorf("Object %s (%s): its Kustomization names kubeConfig %v", u.GetName(), n, ref)
				}
				if name, _, _ := unstructured.NestedString(k, "metadata", "name"); !strings.HasPrefix(name, cluster+"-karpenter-") {
					t.Errorf("Object %s (%s): its Kustomization is named %q, want %s-karpenter-…", u.GetName(), n, name, cluster)
				}
			}
		}
	}
}

// assertScope checks that everything a request composed is of its API's scope. For the claim's
// cluster-scoped XR: provider-aws' *.aws.upbound.io, provider-kubernetes' cluster-scoped Object
// and ClusterUsages, as before the namespaced API existed. For the namespaced XR: the namespaced
// kinds (*.aws.m.upbound.io, kubernetes.m.crossplane.io Object, Usage), every one in the XR's
// namespace, and every managed resource bound to a ClusterProviderConfig — the platform's, never
// a ProviderConfig a tenant could create in its own namespace — the AWS ones to the one the
// Composition names. Every kind of the scope is composed at least once, and no composed resource
// asks its provider to write a connection Secret (for the namespaced XR, into the tenant's
// namespace).
func assertScope(t *testing.T, c *karpenter, maps ...map[string]*unstructured.Unstructured) {
	t.Helper()
	awsConfig, _ := platformInput(t, c.api)["providerConfigName"].(string)
	if awsConfig == "" {
		awsConfig = "default"
	}
	used := map[string]int{}
	for _, m := range maps {
		for _, n := range sortedKeys(m) {
			u := m[n]
			what := fmt.Sprintf("%s %s %s/%s (%s)", u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName(), n)
			k, ok := kindOf(u)
			switch {
			case !ok:
				t.Errorf("%s: not a kind the function composes", what)
				continue
			case k.namespaced != c.api.namespaced:
				t.Errorf("%s: the %s composes %s kinds only", what, c.api.kind, map[bool]string{true: "namespaced", false: "cluster-scoped"}[c.api.namespaced])
			case c.api.namespaced && u.GetNamespace() != c.ns:
				t.Errorf("%s: not in the XR's namespace %s", what, c.ns)
			}
			used[k.apiVersion()+" "+k.kind]++
			if ref, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "writeConnectionSecretToRef"); ok {
				t.Errorf("%s: writes a connection Secret %v", what, ref)
			}
			if !c.api.namespaced || k.configs == "" {
				continue
			}
			kind, _, _ := unstructured.NestedString(u.Object, "spec", "providerConfigRef", "kind")
			name, _, _ := unstructured.NestedString(u.Object, "spec", "providerConfigRef", "name")
			if kind != "ClusterProviderConfig" {
				t.Errorf("%s: providerConfigRef kind %q, want ClusterProviderConfig", what, kind)
			}
			if k.kind != "Object" && name != awsConfig {
				t.Errorf("%s: providerConfigRef name %q, want the Composition's %q", what, name, awsConfig)
			}
		}
	}
	for _, k := range composedKinds {
		if k.namespaced == c.api.namespaced && used[k.apiVersion()+" "+k.kind] == 0 {
			t.Errorf("the %s composed no %s %s", c.api.kind, k.apiVersion(), k.kind)
		}
	}
	t.Logf("%s: every composed resource of the %s's scope: %v", c, c.api.kind, used)
}

// assertNothingLocal checks that nothing of step three ever appeared in Crossplane's own cluster
// (the fake provider watches for it all run long): no karpenter namespace, no composed or
// cluster-labelled Namespace, ServiceAccount or Pod.
func assertNothingLocal(t *testing.T) {
	t.Helper()
	time.Sleep(time.Second) // one more look by the fake provider
	if local := fake.localObjects(); len(local) > 0 {
		t.Errorf("step three belongs in the claimed cluster, yet Crossplane's cluster has had:\n  %s", strings.Join(local, "\n  "))
	}
}

// Scenario 3: AWS refuses the role. The provider's message reaches the claim's step condition,
// nothing of the next step is composed, and once the provider reports the role created the
// sequence continues. prod-eu is real (realClaimedClusters): the claim's lease is read there by
// the real provider-kubernetes; nothing else reaches it.
func TestProviderErrorOnRole(t *testing.T) {
	timed(t)
	realClaimedClusters(t, claimedOptions{}, "prod-eu")
	c := newKarpenter(t, claimAPI, "team-a", "karpenter", "prod-eu")
	c.waitComposed(throughRound(0, 0), react)

	const providerError = "create failed: async create failed: failed to create the resource: " +
		"[{0 creating IAM Role (prod-eu-karpenter): operation error IAM: CreateRole, https response error StatusCode: 403, " +
		"api error AccessDenied: User: arn:aws:sts::111122223333:assumed-role/crossplane-provider-aws/e2e is not authorized " +
		"to perform: iam:CreateRole on resource: arn:aws:iam::111122223333:role/socle/prod-eu/prod-eu-karpenter " +
		"because no permissions boundary allows the iam:CreateRole action  []}]"
	c.report(want{state: failing, message: providerError}, "controller-role")
	for _, n := range steps[0].rounds[0] {
		if n != "controller-role" {
			c.markReady(n)
		}
	}
	// The observed EKS cluster Ready, the controller policy comes (step one's second round).
	c.waitComposed(throughStep(0), react)
	for _, n := range steps[0].rounds[1] {
		c.markReady(n)
	}
	cond := c.waitCondition(steps[0].condition, "False", react, "controller-role", providerError)
	t.Logf("claim condition %s: %s", steps[0].condition, cond["message"])
	if cond["reason"] != "Creating" {
		t.Errorf("%s reason: want Creating, got %v", steps[0].condition, cond["reason"])
	}
	if ready := c.condition("Ready"); ready == nil || ready["status"] != "False" {
		t.Errorf("the claim must be Ready=False while the role fails, got %v", ready)
	}
	if now, _ := c.composed(); !equalSets(sortedKeys(now), throughStep(0)) {
		t.Fatalf("with the role failing nothing of step 2 may be composed, got %v", sortedKeys(now))
	}

	// The platform team fixes the permissions boundary; the provider's next attempt succeeds.
	c.markReady("controller-role")
	c.waitCondition(steps[0].condition, "True", react)
	c.waitComposed(throughStep(1), react)
}

// Scenario 3, in the claimed cluster: the access check's Pod fails one check after another, as a
// platform engineer would meet them fixing AWS (the queue, the instance profile, the subnet
// selector, ...). The claimed clusters are real (realClaimedClusters): each Pod is applied by the
// real provider-kubernetes, scheduled by kube-scheduler, and its script run by the kubelet's
// stand-in against the stand-in AWS, which refuses one call per run (refusalOf). Each failure
// reaches the request's AccessCheckReady condition with the check's name, its exit code and
// AWS's words, as the kubelet wrote them in the Pod's status and provider-kubernetes observed
// them; the Object is Synced=True, Ready=False; the controller is never composed and the
// request stays Ready=False. A Pod that failed is never run again, whatever was fixed since: the
// engineer asks for a new run with the annotation socle.do-now.io/access-check-run on the claim
// (Crossplane propagates it to the XR, the function reads it there) or on the namespaced XR, and
// a Pod of a new name runs the checks; the old Pods stay behind in the claimed cluster, Failed,
// and the composed Object is the same. Once every check passes the request goes on to Ready.
// Both APIs at once, on a cluster each (the claim on prod-eu, the namespaced XR on prod-us), the
// eight checks that stop (all but credentials, which TestRealProviderKubernetes fails as seed
// 000's race does) shared between them.
func TestAccessCheckFails(t *testing.T) {
	timed(t)
	claimed, _, _ := realClaimedClusters(t, claimedOptions{}, "prod-eu", "prod-us")
	forEachAPIAtOnce(t, func(t *testing.T, a *api) {
		if a.namespaced {
			testAccessCheckFails(t, newKarpenterFrom(t, a, "team-b", "karpenter", onProdUS), claimed["prod-us"], "us-east-1",
				checkCluster, checkGroups, checkAMI)
			return
		}
		testAccessCheckFails(t, newKarpenter(t, a, "team-a", "karpenter", "prod-eu"), claimed["prod-eu"], "eu-west-3",
			checkQueue, checkProfile, checkSubnets, checkTemplate, checkFleet)
	})
}

// testAccessCheckFails fails the checks fails one after the other, a run each, then passes them
// all in a last run.
func testAccessCheckFails(t *testing.T, c *karpenter, claimed *claimedCluster, region string, fails ...check) {
	start := time.Now()
	// shows waits until AccessCheckReady shows check ck failed, as its refusal says, and nothing
	// else failed; it returns the condition.
	shows := func(ck check) map[string]any {
		t.Helper()
		r := refusalOf(ck, claimed.name, region)
		// After the name of the check's Object: access-check, or access-check-<digest>.
		prefix := fmt.Sprintf(": Pod failed (exit %d, Error): %s: ", ck.exitCode, ck.name)
		cond := c.waitCondition(steps[2].condition, "False", 3*time.Minute, prefix, r.says)
		if others := otherChecksNamed(cond["message"].(string), ck); len(others) > 0 {
			t.Errorf("the run fails %s only, yet %s also names %v: %s", ck.name, steps[2].condition, others, cond["message"])
		}
		return cond
	}
	first := fails[0]
	r := refusalOf(first, claimed.name, region)
	claimed.refuse(&r)
	t.Cleanup(func() { claimed.refuse(nil) })
	walk(t, nil, func() bool {
		m, _ := c.condition(steps[2].condition)["message"].(string)
		return strings.Contains(m, "Pod failed")
	}, c)
	cond := shows(first)
	// The final check's Deployment may still be on its way too, under the suite's four shards
	// ("waiting for access-check, final-check to become Ready" in one run).
	if !slices.Contains(pendingIn(cond["message"].(string)), accessCheck) {
		t.Errorf("%s: %s, want it waiting for %s", steps[2].condition, cond["message"], accessCheck)
	}
	t.Logf("%s: %s after %.1fs", steps[2].condition, cond["message"], time.Since(start).Seconds())
	// The failure as the condition words it: the access check's problems alone, as the final
	// check's Deployment or RBAC may turn Ready between two reads and their problems go.
	failure := func(m string) string { return problemsOf(m, accessCheck) }
	firstFailure := failure(cond["message"].(string))

	resources, _ := c.composed()
	object := resources[accessCheck]
	if kind, _, _ := unstructured.NestedString(object.Object, "spec", "forProvider", "manifest", "kind"); kind != "Pod" {
		t.Fatalf("the access-check Object must carry a Pod, got a %q", kind)
	}
	if !accessCheckPodName.MatchString(podOf(object)) {
		t.Errorf("the access check's Pod is named %q, want %s and a 10-digit hex digest", podOf(object), accessCheckPrefix)
	}
	policy, _, _ := unstructured.NestedString(object.Object, "spec", "readiness", "policy")
	query, _, _ := unstructured.NestedString(object.Object, "spec", "readiness", "celQuery")
	if policy != "DeriveFromCelQuery" || query != podSucceeded {
		t.Errorf("the access-check Object's readiness: want DeriveFromCelQuery %q, got %s %q", podSucceeded, policy, query)
	}
	// The checks the scenario fails are the script's, with the codes the script exits with.
	got, err := scriptChecks(object)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, checks) {
		t.Fatalf("the access check's script fails with %v, the e2e knows %v: update the e2e's checks from cluster.Checks", got, checks)
	}

	// AWS is fixed for the first check, and would refuse the second. The Pod that failed is
	// finished: nothing runs it again, so the request still shows the first failure. Crossplane
	// reconciles on the function's TTL (2s to 30s while waiting), provider-kubernetes re-reads
	// the unready Object every 30 s: give both a round to compose anything they should not.
	r = refusalOf(fails[1], claimed.name, region)
	claimed.refuse(&r)
	time.Sleep(40 * time.Second)
	c.assertAccessCheckWithholds()
	if m, _ := c.condition(steps[2].condition)["message"].(string); failure(m) != firstFailure {
		t.Errorf("without a new run, the finished Pod must still show the %s check failed (%q), got %q", first.name, firstFailure, m)
	}
	if now, _ := c.composed(); podOf(now[accessCheck]) != podOf(object) {
		t.Errorf("without a new run, the access check's Pod must keep its name %s, got %s", podOf(object), podOf(now[accessCheck]))
	}

	// One run per check: each fails the next one.
	pods := []string{podOf(object)}
	for i, ck := range fails[1:] {
		start := time.Now()
		r := refusalOf(ck, claimed.name, region)
		claimed.refuse(&r)
		pods = append(pods, c.rerun(fmt.Sprint(i+1), object, pods))
		shows(ck)
		c.assertAccessCheckWithholds()
		t.Logf("run %d: %s (exit %d) in Pod %s, on the %s in %.1fs", i+1, ck.name, ck.exitCode, pods[len(pods)-1], c.api.kind, time.Since(start).Seconds())
	}

	// Every check fixed, a last run, which passes: the request goes on to Ready.
	start = time.Now()
	claimed.refuse(nil)
	last := c.rerun("fixed", object, pods)
	pods = append(pods, last)
	c.waitCondition(steps[2].condition, "True", 3*time.Minute)
	walk(t, nil, func() bool { return conditionStatus(c.get(), "Ready") == "True" }, c)
	t.Logf("the run that passed: Pod %s, the %s Ready in %.1fs", last, c.api.kind, time.Since(start).Seconds())

	got2 := c.get()
	for _, s := range steps {
		if cond := condition(got2, s.condition); cond == nil || cond["status"] != "True" {
			t.Errorf("%s: want True once every check passed, got %v", s.condition, cond)
		}
	}
	resources, _ = c.composed()
	now := resources[accessCheck]
	if now.GetUID() == object.GetUID() {
		t.Errorf("the access-check Object of the first run (UID %s) still carries the last run's Pod: each Pod has an Object of its own", object.GetUID())
	}
	if name, phase := observedPodOf(now); name != last || phase != "Succeeded" || conditionStatus(now, "Ready") != "True" {
		t.Errorf("the access-check Object must observe Pod %s Succeeded and be Ready, observes %s %s, Ready=%s", last, name, phase, conditionStatus(now, "Ready"))
	}
	// Each run superseded the one before: Crossplane deleted that one's Object, and
	// provider-kubernetes its Pod. The claimed cluster holds the last run's Pod alone, Succeeded.
	ns, _, _ := unstructured.NestedString(platformInput(t, c.api), "podIdentity", "namespace")
	c.wait(2*time.Minute, fmt.Sprintf("the claimed cluster %s to hold no Pod of the runs before %s", claimed.name, last), func() (bool, error) {
		for _, p := range pods[:len(pods)-1] {
			if _, err := claimed.kube.CoreV1().Pods(ns).Get(t.Context(), p, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
	if got, err := claimed.kube.CoreV1().Pods(ns).Get(t.Context(), last, metav1.GetOptions{}); err != nil || got.Status.Phase != corev1.PodSucceeded {
		t.Errorf("the last run's Pod %s: want it Succeeded in the claimed cluster (%v)", last, err)
	}
	t.Logf("%d runs, the last run's Pod alone left in the claimed cluster %s", len(pods), claimed.name)
}

// rerun asks for a new run of the access check (a new value of its annotation), after the check
// that failed, and waits for a new access-check Object (not object, which the one before
// supersedes) to carry a Pod of a new name (none of before) and to observe it in the claimed
// cluster. It returns the new Pod's name.
func (c *karpenter) rerun(value string, object *unstructured.Unstructured, before []string) string {
	c.t.Helper()
	c.annotate(runAnnotation, value)
	var pod string
	c.wait(react, fmt.Sprintf("the access-check Object to carry and observe a new Pod for run %q (before: %v)", value, before), func() (bool, error) {
		resources, _ := c.composed()
		o, ok := resources[accessCheck]
		if !ok {
			return false, nil // between the superseded Pod's Object and the new one's
		}
		if o.GetUID() == object.GetUID() {
			return false, nil
		}
		pod = podOf(o)
		observed, _ := observedPodOf(o)
		return !slices.Contains(before, pod) && observed == pod, nil
	})
	if !accessCheckPodName.MatchString(pod) {
		c.t.Errorf("the access check's Pod is named %q, want %s and a 10-digit hex digest", pod, accessCheckPrefix)
	}
	return pod
}

// assertAccessCheckWithholds checks what a failed access check holds back: nothing of step 4 is
// composed, ControllerReady waits for prerequisites, the request is Ready=False, and the
// access-check Object, as provider-kubernetes reports it, is applied (Synced) but its readiness
// query is false.
func (c *karpenter) assertAccessCheckWithholds() {
	c.t.Helper()
	resources, _ := c.composed()
	if !equalSets(sortedKeys(resources), throughStep(2)) {
		c.t.Errorf("with the access check not passed, nothing of step 4 may be composed: want %v, got %v", throughStep(2), sortedKeys(resources))
	}
	if next := c.condition(steps[3].condition); next == nil || next["reason"] != "WaitingForPrerequisites" {
		c.t.Errorf("%s must wait for prerequisites, got %v", steps[3].condition, next)
	}
	if ready := c.condition("Ready"); ready == nil || ready["status"] != "False" {
		c.t.Errorf("the %s must be Ready=False, got %v", c.api.kind, ready)
	}
	if o := resources[accessCheck]; o == nil || conditionStatus(o, "Ready") != "False" || conditionStatus(o, "Synced") != "True" {
		c.t.Errorf("the access-check Object must be Synced=True, Ready=False, got:\n%s", conditionsText(o))
	}
}

// readyOnRealProdEU starts prod-eu as a real claimed cluster whose Objects provider-kubernetes
// re-reads every 20 s (realClaimedFailing), and walks team-a's claim on it to Ready: the start of
// the scenarios that then make the controller's Kustomization fail. It returns the claim, prod-eu
// and the GitOps base its source can be moved on (sourceAt).
func readyOnRealProdEU(t *testing.T) (*karpenter, *claimedCluster, *gitOpsBase) {
	t.Helper()
	claimed, _, base := realClaimedClusters(t, realClaimedFailing, "prod-eu")
	eu := claimed["prod-eu"]
	c := newKarpenter(t, claimAPI, "team-a", "karpenter", "prod-eu")
	c.walkToReady()
	return c, eu, base
}

// Scenario 4: a Ready resource turns unready once later steps exist — the controller's
// Kustomization fails, the role degrades and loses its observed ARN. Nothing is deleted from the
// API server, nothing is re-created, the association keeps the role's ARN, nothing installed in
// the claimed cluster goes, the claim says what is wrong, and it recovers once they are Ready
// again. prod-eu is real (realClaimedClusters): the Kustomization fails as a platform's change
// of its GitOps repository makes it fail, its source moved to a branch whose build fails on the
// function's patches (renamedBranch), and the real kustomize-controller reports it. A Ready
// Object is re-read by provider-kubernetes at its poll interval alone (10 minutes by default):
// here every 20 s (realClaimedFailing).
func TestUnreadyDeletesNothing(t *testing.T) {
	timed(t)
	c, eu, base := readyOnRealProdEU(t)
	before, usagesBefore := c.composed()
	installed := installedUIDs(t, c, eu)
	assoc := before["pod-identity-association"]
	assocRole, _, _ := unstructured.NestedString(assoc.Object, "spec", "forProvider", "roleArn")

	// The controller first: the claim names Flux's report. Then the role, which blocks every
	// later step: the claim then names the role and shows the later steps waiting on it.
	sourceAt(t, c, eu, base, renamedBranch)
	kustomizationReported(t, c, eu, "BuildFailed")
	c.waitCondition("Ready", "False", react)
	// The role degrades, and the provider no longer observes its ARN either.
	c.report(want{state: unready, message: "role is being replaced", dropARN: true}, "controller-role")
	c.waitCondition(steps[0].condition, "False", react, "controller-role", "role is being replaced")
	for _, s := range steps[1:] {
		if cond := c.condition(s.condition); cond == nil || cond["reason"] != "WaitingForPrerequisites" {
			t.Errorf("with the role unready, %s must be waiting for prerequisites, got %v", s.condition, cond)
		}
	}
	// Let Crossplane reconcile a few more times on what it now observes, and provider-kubernetes
	// re-read the unready Kustomization's Object.
	time.Sleep(40 * time.Second)

	after, usagesAfter := c.composed()
	checkSurvived(t, "after a prerequisite turned unready", before, after)
	if len(after) != len(before) || len(usagesAfter) != len(usagesBefore) {
		t.Errorf("composed resources changed: %d resources and %d Usages before, %d and %d after",
			len(before), len(usagesBefore), len(after), len(usagesAfter))
	}
	if got, _, _ := unstructured.NestedString(after["pod-identity-association"].Object, "spec", "forProvider", "roleArn"); got != assocRole {
		t.Errorf("the association's roleArn changed while the role was unobserved: %q, was %q", got, assocRole)
	}
	checkInstalledSurvived(t, "after a prerequisite turned unready", installed, installedUIDs(t, c, eu))

	sourceAt(t, c, eu, base, "main")
	c.markReady("controller-role")
	c.waitCondition("Ready", "True", 3*time.Minute)
	checkInstalledSurvived(t, "recovered", installed, installedUIDs(t, c, eu))
}

// A hostile change in AWS: someone adds "Action": "*" to the controller's role policy in the
// console while the controller is not at its target (its Kustomization failing: prod-eu is real,
// its source moved to a branch whose build fails), which is when the function keeps the
// statements a new policy drops. AWS (the fake provider-aws) reports the document with the
// statement; the document the function writes, as the API server holds the RolePolicy's spec,
// never has it, so provider-aws puts back the function's own.
func TestOutOfBandStatementNotKept(t *testing.T) {
	timed(t)
	c, eu, base := readyOnRealProdEU(t)
	sourceAt(t, c, eu, base, renamedBranch)
	kustomizationReported(t, c, eu, "BuildFailed")
	console := map[string]any{"Sid": "Console", "Effect": "Allow", "Action": "*", "Resource": "*"}
	c.report(want{state: ready, outOfBand: console}, "controller-role-policy")
	c.wait(react, "AWS reporting the console's statement", func() (bool, error) {
		res, _ := c.composed()
		held, _, _ := unstructured.NestedString(res["controller-role-policy"].Object, "status", "atProvider", "policy")
		return strings.Contains(held, `"Sid":"Console"`), nil
	})
	// A reconcile that observed it: the controller's new report on the claim (its source now
	// missing) comes from the same answer as the role policy's document Crossplane applied.
	sourceAt(t, c, eu, base, "")
	kustomizationReported(t, c, eu, "ArtifactFailed")
	res, _ := c.composed()
	wrote, _, _ := unstructured.NestedString(res["controller-role-policy"].Object, "spec", "forProvider", "policy")
	var doc struct{ Statement []map[string]any }
	if err := json.Unmarshal([]byte(wrote), &doc); err != nil || len(doc.Statement) == 0 {
		t.Fatalf("the role policy's spec is not a policy document: %v", err)
	}
	for _, st := range doc.Statement {
		if st["Action"] == "*" || st["Sid"] == "Console" {
			t.Errorf("the function wrote the statement added in the console back into the role policy: %v", st)
		}
	}
	if !t.Failed() {
		t.Logf("AWS reports the console's statement; the function writes its own %d, none of them that one", len(doc.Statement))
	}
	sourceAt(t, c, eu, base, "main")
	c.markReady("controller-role-policy")
	c.waitCondition("Ready", "True", 3*time.Minute)
}

// Scenario 6: deleting the claim (for prod-eu), or the namespaced XR (for prod-us), removes
// everything it composed, the Objects that carry step three to the claimed cluster included, in
// the order the function's Usages (ClusterUsages for the claim, namespaced Usages for the
// namespaced XR) set: the nodes before the controller, the controller before the final check,
// the final check before the AWS access and the namespace's and ServiceAccount's Objects, each
// EventBridge target before its rule (and not
// before the queue: that order protects nothing). Crossplane's webhook refuses the deletion of a resource still in use, the garbage
// collector retries, and Crossplane replays the deletion once the Usage is gone. Both clusters
// are real (realClaimedClusters): the real provider-kubernetes deletes each Object's object from
// its claimed cluster, whose real Flux uninstalls what it installed, while a NodeClaim of the
// private pool's class holds the nodes Kustomization (Karpenter's finalizer, its stand-in) and
// so the controller, for 20 s (holdByNodeClaim).
func TestDeletion(t *testing.T) {
	timed(t)
	claimed, _, _ := realClaimedClusters(t, claimedOptions{}, "prod-eu", "prod-us")
	// Each API on a cluster of its own (prod-eu from team-a, prod-us from team-b), so both run at
	// once.
	forEachAPIAtOnce(t, func(t *testing.T, a *api) {
		if a.namespaced {
			testDeletion(t, newKarpenterFrom(t, a, "team-b", "karpenter", onProdUS), claimed["prod-us"])
			return
		}
		testDeletion(t, newKarpenter(t, a, "team-a", "karpenter", "prod-eu"), claimed["prod-eu"])
	})
}

func testDeletion(t *testing.T, c *karpenter, claimed *claimedCluster) {
	c.walkToReady()
	resources, usages := c.composed()
	// 28: the final check holds its own role, policy, Pod Identity association, ServiceAccount
	// and RBAC, each by a Usage, until it is gone.
	if !equalSets(sortedKeys(resources), allNames()) || len(usages) != 28 {
		t.Fatalf("before deleting: want every resource and 28 Usages, got %v and %d Usages", sortedKeys(resources), len(usages))
	}

	edges := usageEdges(resources, usages)
	for _, want := range []usageEdge{
		{"nodes-kustomization", "controller-kustomization"},
		{"controller-kustomization", "final-check"},
		{"final-check", "controller-role"},
		{"final-check", "pod-identity-association"},
		{"final-check", "controller-namespace"},
		{"final-check", "controller-service-account"},
		{"final-check", "final-check-rbac"},
		{"final-check", "final-check-role"},
		{"final-check", "final-check-role-policy"},
		{"final-check", "final-check-pod-identity-association"},
		{"controller-kustomization", "interruption-queue"},
		{"controller-kustomization", "target-health"},
		{"controller-kustomization", "monitoring-kustomization"},
		{"observe-ec2nodeclass-private", "controller-kustomization"},
		{"observe-ec2nodeclass-public", "controller-kustomization"},
		{"target-health", "rule-health"},
	} {
		if !slices.Contains(edges, want) {
			t.Errorf("no Usage orders the deletion of %s before %s", want.by, want.of)
		}
	}
	if retired := (usageEdge{"target-health", "interruption-queue"}); slices.Contains(edges, retired) {
		t.Errorf("a Usage orders the deletion of %s before %s: that order protects nothing", retired.by, retired.of)
	}
	c.waitUsagesBound()

	// The private pool's EC2NodeClass still has a NodeClaim, so Karpenter's finalizer keeps it:
	// the nodes Kustomization, being deleted, waits for it, and the uninstall with it; the
	// request stays, and nothing the instances need is released.
	held := holdByNodeClaim(t, c, claimed, 20*time.Second)
	start, mark := time.Now(), fake.deletionMark()
	c.delete()
	held()
	assertDeletedInOrder(t, c, append(sortedKeys(resources), sortedKeys(usages)...), edges, c.waitGone(start, mark))
	ns, _, _ := unstructured.NestedString(platformInput(t, c.api), "podIdentity", "namespace")
	claimed.waitUninstalled(t, ns)
	assertNothingLocal(t)
}

// A usageEdge is the order one Usage declares: by is deleted before of.
type usageEdge struct{ by, of string }

// usageEdges reads the deletion order the Usages declare from the Usages themselves: the
// composition-resource names of the objects their ends name (internal/usage names each by its
// resourceRef), read from resources, which holds every composed resource by that name.
func usageEdges(resources, usages map[string]*unstructured.Unstructured) []usageEdge {
	names := resourceNames(resources)
	var edges []usageEdge
	for _, n := range sortedKeys(usages) {
		spec, _, _ := unstructured.NestedMap(usages[n].Object, "spec")
		edges = append(edges, usageEdge{by: endName(spec, "by", names), of: endName(spec, "of", names)})
	}
	return edges
}

// waitUsagesBound waits until each of c's Usages names the objects at both its ends (the function
// names them once both are observed): only then does Crossplane's webhook hold a deletion.
func (c *karpenter) waitUsagesBound() {
	c.t.Helper()
	c.wait(react, "every Usage bound to the resources it orders", func() (bool, error) {
		_, usages := c.composed()
		for _, u := range usages {
			of, _, _ := unstructured.NestedString(u.Object, "spec", "of", "resourceRef", "name")
			by, _, _ := unstructured.NestedString(u.Object, "spec", "by", "resourceRef", "name")
			if of == "" || by == "" {
				return false, nil
			}
		}
		return true, nil
	})
}

// assertDeletedInOrder checks, among the deletions the fake provider saw (of every XR: another
// test's run may delete its own meanwhile), that the deletion of each of c's names was seen, and
// that each edge's by was deleted in an earlier cycle than its of; it logs c's deletions.
func assertDeletedInOrder(t *testing.T, c *karpenter, names []string, edges []usageEdge, seen []deletion) {
	t.Helper()
	var deletions []deletion
	for _, d := range seen {
		if d.xr == c.xr {
			deletions = append(deletions, d)
		}
	}
	if len(deletions) == 0 {
		t.Fatalf("the fake provider saw no deletion of %s's resources", c)
	}
	when := map[string]deletion{}
	var b strings.Builder
	for _, d := range deletions {
		when[d.name] = d
		fmt.Fprintf(&b, "\n  +%5.1fs %s (%s)", d.at.Sub(deletions[0].at).Seconds(), d.name, d.kind)
	}
	t.Logf("deletions as the fake provider saw them (deletionTimestamp set or object gone):%s", b.String())
	for _, n := range names {
		if _, ok := when[n]; !ok {
			t.Errorf("the deletion of %s was never seen", n)
		}
	}
	for _, e := range edges {
		by, of := when[e.by], when[e.of]
		if by.cycle >= of.cycle {
			t.Errorf("%s must be deleted before %s: deletions seen %+.1fs and %+.1fs after the first",
				e.by, e.of, by.at.Sub(deletions[0].at).Seconds(), of.at.Sub(deletions[0].at).Seconds())
		}
	}
}

// Scenario 2: bad requests, through either API, are refused at admission by the XRD's schema
// (both XRDs are generated from the same types), with a message naming the field; the ones the
// schema cannot judge are refused by the function, which composes nothing. Part of scenario 5
// too: a claim or a namespaced XR for another tenant's cluster is refused — the namespaced XR's
// own namespace is its tenant, whatever claimRef it writes. (Immutability of the cluster name and
// region, a CEL rule on update, is checked on the Ready requests of TestWalkToReady.)
func TestBadInput(t *testing.T) {
	timed(t)
	// Nothing is accepted, so nothing holds a cluster: both APIs, and every refusal, at once.
	forEachAPIAtOnce(t, testBadInput)
}

func testBadInput(t *testing.T, a *api) {
	set := func(value any, path ...string) func(*unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) { _ = unstructured.SetNestedField(u.Object, value, path...) }
	}
	list := func(v ...any) []any { return v }
	cases := []struct {
		reason string
		mutate func(*unstructured.Unstructured)
		want   []string // what the API server's message must contain
	}{
		{"a cluster name must start with a letter or digit (pattern)",
			set("-prod-eu", "spec", "cluster", "name"), []string{"spec.cluster.name", "should match"}},
		{"a cluster name longer than 44 characters would overflow the AWS rule names (maxLength)",
			set(strings.Repeat("c", 45), "spec", "cluster", "name"), []string{"spec.cluster.name", "Too long"}},
		{"an empty cluster name (minLength)",
			set("", "spec", "cluster", "name"), []string{"spec.cluster.name"}},
		{"a region must be an AWS region (pattern)",
			set("EU-WEST-3", "spec", "cluster", "region"), []string{"spec.cluster.region", "should match"}},
		{"the node role ARN needs a 12-digit account (pattern)",
			set("arn:aws:iam::12345:role/nodes", "spec", "nodeIdentity", "roleArn"), []string{"spec.nodeIdentity.roleArn", "should match"}},
		{"an instance profile name has no spaces (pattern)",
			set("bootstrap nodes", "spec", "nodeIdentity", "instanceProfile"), []string{"spec.nodeIdentity.instanceProfile", "should match"}},
		{"only known Karpenter versions have a controller policy (enum)",
			set("0.37.0", "spec", "version"), []string{"spec.version", "Unsupported value"}},
		{"architectures are arm64 or amd64 (enum)",
			set(list("riscv64"), "spec", "pools", "private", "architectures"), []string{"spec.pools.private.architectures[0]", "Unsupported value"}},
		{"capacity types are a set (no duplicates)",
			set(list("spot", "spot"), "spec", "pools", "public", "capacityTypes"), []string{"spec.pools.public.capacityTypes[1]", "Duplicate"}},
		{"at most three capacity types (maxItems)",
			set(list("spot", "on-demand", "reserved", "spot-again"), "spec", "pools", "public", "capacityTypes"), []string{"spec.pools.public.capacityTypes", "must have at most 3 items"}},
		{"the oldest instance generation is at most 20 (maximum)",
			set(int64(21), "spec", "pools", "private", "minGeneration"), []string{"spec.pools.private.minGeneration", "should be less than or equal to 20"}},
		{"a CPU limit of 0 would never launch a node (CEL)",
			set(map[string]any{"cpu": "0", "memory": "100Gi"}, "spec", "pools", "public", "limits"), []string{"spec.pools.public.limits.cpu", "must be a quantity above 0 and at most 10000"}},
		{"a memory limit above 40Ti (CEL)",
			set(map[string]any{"cpu": "100", "memory": "41Ti"}, "spec", "pools", "private", "limits"), []string{"spec.pools.private.limits.memory", "must be a quantity above 0 and at most 40Ti"}},
		{"limits need both cpu and memory",
			set(map[string]any{"cpu": "100"}, "spec", "pools", "private", "limits"), []string{"spec.pools.private.limits.memory", "Required"}},
		{"consolidateAfter is a duration like 5m (pattern)",
			set("5 minutes", "spec", "pools", "private", "consolidateAfter"), []string{"spec.pools.private.consolidateAfter", "should match"}},
		{"an AMI alias is al2023@vYYYYMMDD (pattern)",
			set("al2023@2024", "spec", "pools", "public", "amiAlias"), []string{"spec.pools.public.amiAlias", "should match"}},
		{"instance categories are lowercase letters (pattern)",
			set(list("C5"), "spec", "pools", "private", "instanceCategories"), []string{"spec.pools.private.instanceCategories[0]", "should match"}},
		{"zones are availability zone names (pattern)",
			set(list("euw3-az1"), "spec", "pools", "public", "zones"), []string{"spec.pools.public.zones[0]", "should match"}},
	}
	base, err := readObjects(filepath.Join("..", a.example))
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.ensureNamespace(t.Context(), "team-b"); err != nil {
		t.Fatal(err)
	}
	for i, tc := range cases {
		u := base[0].DeepCopy()
		u.SetNamespace("team-b")
		u.SetName(fmt.Sprintf("bad-%d", i))
		tc.mutate(u)
		_, err := cp.dyn.Resource(a.tenant).Namespace("team-b").Create(t.Context(), u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if !apierrors.IsInvalid(err) {
			t.Errorf("%s: want the %s refused as Invalid, got %v", tc.reason, a.kind, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: the refusal must contain %q, got: %v", tc.reason, w, err)
			}
		}
	}
	t.Logf("%d bad %ss refused at admission", len(cases), a.kind)

	// What only the function can judge — including tenancy, which the Composition's input declares
	// (prod-eu may be claimed from team-a and team-c, its nodes in account 111122223333): it
	// answers a Fatal result naming the field, with Accepted=False on the claim or the namespaced
	// XR (Invalid: it does not validate; Refused: valid, but not the tenant's to claim), and
	// Crossplane composes nothing.
	type refusal struct {
		reason  string
		ns      string
		mutate  func(*unstructured.Unstructured)
		refusal string // the Accepted condition's reason
		want    string
	}
	refusals := []refusal{
		{"al2023@latest passes the schema but the platform has not allowed it", "team-a",
			set("al2023@latest", "spec", "pools", "private", "amiAlias"), "Invalid", "spec.pools.private.amiAlias"},
		// The platform's facts of the cluster (tenancy.clusters[]): a tenant may repeat them, never
		// choose them, and learns them only when the cluster is given to its namespace.
		{"a node role of the tenant's choosing, in the cluster's account", "team-a",
			set("arn:aws:iam::111122223333:role/OrganizationAccountAccessRole", "spec", "nodeIdentity", "roleArn"), "Refused",
			`spec.nodeIdentity.roleArn: Forbidden: the platform decides it for cluster "prod-eu" (arn:aws:iam::111122223333:role/prod-eu-bootstrap-nodes)`},
		{"a region of the tenant's choosing", "team-a",
			set("us-east-1", "spec", "cluster", "region"), "Refused",
			`spec.cluster.region: Forbidden: the platform decides it for cluster "prod-eu" (eu-west-3)`},
		{"another tenant's cluster", "team-b",
			func(*unstructured.Unstructured) {}, "Refused", `claims from namespace "team-b" may not target cluster "prod-eu"`},
		{"a cluster the platform has not declared", "team-a",
			set("prod-ap", "spec", "cluster", "name"), "Refused", `cluster "prod-ap" is not declared in the platform's tenancy`},
		{"a node role in another account than the cluster's", "team-a",
			set("arn:aws:iam::444455556666:role/prod-eu-bootstrap-nodes", "spec", "nodeIdentity", "roleArn"), "Refused", "spec.nodeIdentity.roleArn"},
		// Out of the platform's bounds (the Composition's input.pools).
		{"a pool larger than the platform's ceiling for the cluster", "team-a",
			set(map[string]any{"cpu": "500", "memory": "100Gi"}, "spec", "pools", "public", "limits"), "Invalid",
			`spec.pools.public.limits.cpu: Invalid value: "500": exceeds the platform's ceiling 200 for cluster "prod-eu"`},
		{"an instance category the platform does not allow", "team-a",
			set(list("p"), "spec", "pools", "private", "instanceCategories"), "Invalid",
			`spec.pools.private.instanceCategories[0]: Unsupported value: "p": the platform allows c, m, r`},
		{"an instance generation older than the platform's minimum", "team-a",
			set(int64(5), "spec", "pools", "private", "minGeneration"), "Invalid",
			`spec.pools.private.minGeneration: Invalid value: 5: is below the platform's minimum generation 6 for cluster "prod-eu"`},
		{"reserved capacity where the platform selects no reservation", "team-a",
			set(list("reserved"), "spec", "pools", "public", "capacityTypes"), "Invalid",
			`spec.pools.public.capacityTypes[0]: Unsupported value: "reserved": the platform offers no capacity reservations for cluster "prod-eu"`},
		{"a consolidation delay under the platform's floor", "team-a",
			set("1m", "spec", "pools", "private", "consolidateAfter"), "Invalid",
			`spec.pools.private.consolidateAfter: Invalid value: "1m": is below the platform's minimum 15m for cluster "prod-eu"`},
		{"a zone outside the cluster's region", "team-a",
			set(list("eu-west-1a"), "spec", "pools", "public", "zones"), "Invalid",
			`spec.pools.public.zones[0]: Invalid value: "eu-west-1a": is not a zone of the cluster's region eu-west-3`},
	}
	if a.namespaced {
		// Crossplane writes a claim's claimRef on its XR; a namespaced XR's would be the
		// tenant's own words. Crossplane's schema for a namespaced XR has no spec.claimRef, so
		// the API server drops it before the function (which would not trust it either) sees
		// it: team-b naming team-a's claim still asks from team-b.
		refusals = append(refusals, refusal{"a namespaced XR whose claimRef names another tenant's claim", "team-b",
			set(map[string]any{"apiVersion": "platform.socle.do-now.io/v1alpha1", "kind": "Karpenter", "namespace": "team-a", "name": "karpenter"}, "spec", "claimRef"),
			"Refused", `claims from namespace "team-b" may not target cluster "prod-eu"`})
	}
	// In parallel: each is refused on its own (none holds the cluster), and a refusal is mostly
	// waiting for Crossplane. Names differ, for the refusals share two namespaces.
	for i, tc := range refusals {
		t.Run(tc.reason, func(t *testing.T) {
			t.Parallel()
			c := newKarpenterFrom(t, a, tc.ns, fmt.Sprintf("refused-%d", i), tc.mutate)
			c.assertRefused(tc.reason, tc.refusal, tc.want)
		})
	}
}

// assertRefused checks how the function's refusal reaches Crossplane and the tenant: the Fatal
// result on the XR's Synced condition (for a claim, Crossplane v2.4.2 shows a Fatal result
// nowhere else: the claim stays Synced; a namespaced XR is itself what the tenant reads), and on
// the claim or namespaced XR the Accepted condition False with reason refusal and a warning
// event, every message containing each of want. It logs what the tenant sees and checks
// that nothing was composed.
func (c *karpenter) assertRefused(reason, refusal string, want ...string) {
	c.t.Helper()
	c.wait(react, fmt.Sprintf("the XR's Synced condition naming %q", want), func() (bool, error) {
		synced := condition(c.getXR(), "Synced")
		m, _ := synced["message"].(string)
		return synced["status"] == "False" && containsAll(m, want...), nil
	})
	c.wait(react, fmt.Sprintf("the %s's Accepted condition False/%s naming %q", c.api.kind, refusal, want), func() (bool, error) {
		accepted := c.condition("Accepted")
		m, _ := accepted["message"].(string)
		return accepted["status"] == "False" && accepted["reason"] == refusal && containsAll(m, want...), nil
	})
	c.wait(react, fmt.Sprintf("a warning event on the %s naming %q", c.api.kind, want), func() (bool, error) {
		return c.warningEvent(want...), nil
	})
	c.t.Logf("%s:\n  XR Synced: %s\n  %s conditions:\n%s  %s events:\n%s  XR warnings:\n%s", reason,
		condition(c.getXR(), "Synced")["message"], c.api.kind, conditionsText(c.get()), c.api.kind, c.events(), c.xrWarnings())
	// A few more reconciles: a refused XR must not compose anything in between.
	time.Sleep(2 * time.Second)
	if all, _ := composedOf(c.ctx, cp, c.xr); len(all) != 0 {
		c.t.Errorf("%s: nothing may be composed, got %v", reason, sortedKeys(all))
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// checkSurvived: every composed object of before is still in after, the same object (same
// UID), and not being deleted.
func checkSurvived(t *testing.T, when string, before, after map[string]*unstructured.Unstructured) {
	t.Helper()
	for _, n := range sortedKeys(before) {
		a, ok := after[n]
		switch {
		case !ok:
			t.Errorf("%s was deleted %s", n, when)
		case a.GetUID() != before[n].GetUID():
			t.Errorf("%s was re-created %s", n, when)
		case a.GetDeletionTimestamp() != nil:
			t.Errorf("%s is being deleted %s", n, when)
		}
	}
}

// TestProblemsOf holds problemsOf to two reads of one step condition in a cold make test
// (2026-12-05, TestAccessCheckFails/claim, 40 s apart): the final check's RBAC's problem went
// between them, the access check's stayed.
func TestProblemsOf(t *testing.T) {
	const queue = "access-check: Pod failed (exit 11, Error): interruption-queue: An error occurred (AccessDenied) " +
		"when calling the GetQueueUrl operation: User: arn:aws:sts::111122223333:assumed-role/prod-eu-karpenter/eks-prod-eu-karpe-0123 " +
		"is not authorized to perform: sqs:getqueueurl on resource: arn:aws:sqs:eu-west-3:111122223333:prod-eu-karpenter " +
		"because no identity-based policy allows the sqs:getqueueurl action"
	for _, tc := range []struct{ name, message, want string }{
		{"with another resource's problem after it",
			"waiting for access-check, final-check-rbac to become Ready; " + queue + "; final-check-rbac: the claimed cluster reports nothing of it yet",
			queue},
		{"alone", "waiting for access-check to become Ready; " + queue, queue},
		{"two problems of its own, another resource's after them",
			"waiting for access-check, final-check to become Ready; access-check: Synced=False (ReconcileError): x; access-check: y; final-check: z",
			"access-check: Synced=False (ReconcileError): x; access-check: y"},
		{"another resource's problem before it",
			"waiting for access-check, final-check to become Ready; final-check: z; " + queue, queue},
		{"nothing said of it", "waiting for final-check to become Ready; final-check: z", ""},
	} {
		if got := problemsOf(tc.message, accessCheck); got != tc.want {
			t.Errorf("%s: problemsOf(%q) = %q, want %q", tc.name, tc.message, got, tc.want)
		}
	}
}
