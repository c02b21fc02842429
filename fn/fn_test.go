package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/do-now/function-karpenter/internal/cluster"
	"github.com/do-now/function-karpenter/internal/requeue"
)

var (
	step1 = []string{
		"controller-role", "controller-role-policy", "final-check-role", "final-check-role-policy", "interruption-queue", "eks-cluster",
		"rule-capacity-reservation", "rule-health", "rule-rebalance", "rule-spot-interruption", "rule-state-change",
	}
	// step1BeforeVPC is step one until the observed cluster reports its
	// VPC: all but the controller policy, which names it.
	step1BeforeVPC = []string{
		"controller-role", "final-check-role", "final-check-role-policy", "interruption-queue", "eks-cluster",
		"rule-capacity-reservation", "rule-health", "rule-rebalance", "rule-spot-interruption", "rule-state-change",
	}
	step2 = []string{
		"interruption-queue-policy", "pod-identity-association", "final-check-pod-identity-association",
		"target-capacity-reservation", "target-health", "target-rebalance", "target-spot-interruption", "target-state-change",
	}
	step3 = []string{"access-check", "controller-namespace", "controller-service-account", "final-check", "final-check-rbac", "final-check-rbac-binding", "final-check-service-account"}
	step4 = []string{"controller-kustomization"}
	// step5 is the node pools and, beside them, the monitoring: both wait
	// for the controller only.
	step5 = []string{"monitoring-kustomization", "nodes-kustomization"}
	// observers are the observe-only Objects of the pools' NodePools,
	// composed with step 5 and Ready for Crossplane whatever they report.
	observers = []string{"observe-nodepool-private", "observe-nodepool-public", "observe-ec2nodeclass-private", "observe-ec2nodeclass-public"}
	steps     = []string{"IdentityAndQueueReady", "InterruptionWiringReady", "AccessCheckReady", "ControllerReady", "MonitoringReady", "NodePoolsReady"}
)

// wantConditions is the state of every step: ready ones Available, the
// first unready one with reason first, the rest waiting for prerequisites;
// and no upgrade under way.
func wantConditions(ready int, first string) map[string]cond {
	out := map[string]cond{
		"ClusterHeld":          {fnv1.Status_STATUS_CONDITION_TRUE, "Available"},
		"Accepted":             {fnv1.Status_STATUS_CONDITION_TRUE, "Accepted"},
		"VersionReady":         {fnv1.Status_STATUS_CONDITION_TRUE, "Current"},
		"PoolsWithinLimits":    {fnv1.Status_STATUS_CONDITION_UNKNOWN, "NotObservedYet"},
		"NodeClassesValidated": {fnv1.Status_STATUS_CONDITION_UNKNOWN, "NotObservedYet"},
		// The fake cluster runs Kubernetes 1.34 (clusterVersion): 1.15.0 and the pin serve 1.35.
		"NextMinorReady": {fnv1.Status_STATUS_CONDITION_TRUE, "Served"},
	}
	for i, s := range steps {
		switch {
		case i < ready:
			out[s] = cond{fnv1.Status_STATUS_CONDITION_TRUE, "Available"}
		case i == ready, i == ready+1 && steps[ready] == "MonitoringReady":
			// The node pools do not wait for the monitoring beside them.
			out[s] = cond{fnv1.Status_STATUS_CONDITION_FALSE, first}
		default:
			out[s] = cond{fnv1.Status_STATUS_CONDITION_FALSE, "WaitingForPrerequisites"}
		}
	}
	return out
}

// reportedPool is a pool's status as the fake cluster's Karpenter reports
// its NodePool: two nodes, 8 of 100 CPUs, 32Gi of 400Gi.
var reportedPool = map[string]any{
	"nodes":  float64(2),
	"cpu":    map[string]any{"used": "8", "limit": "100", "percent": float64(8)},
	"memory": map[string]any{"used": "32Gi", "limit": "400Gi", "percent": float64(8)},
}

// withObserved is observed with name replaced by o.
func withObserved(observed map[resource.Name]map[string]any, name resource.Name, o map[string]any) map[resource.Name]map[string]any {
	out := copyObserved(observed)
	out[name] = o
	return out
}

// clusterUnobserved is want before AWS reports the cluster's version.
func clusterUnobserved(want map[string]cond) map[string]cond {
	want["NextMinorReady"] = cond{fnv1.Status_STATUS_CONDITION_UNKNOWN, "ClusterVersionUnknown"}
	return want
}

// observedPools is want once the pools' NodePools are observed, below
// their limits.
func observedPools(want map[string]cond) map[string]cond {
	want["PoolsWithinLimits"] = cond{fnv1.Status_STATUS_CONDITION_TRUE, "WithinLimits"}
	want["NodeClassesValidated"] = cond{fnv1.Status_STATUS_CONDITION_TRUE, "Validated"}
	return want
}

// installing is want before the node pools were ever composed: the
// version is being installed, not yet current.
func installing(want map[string]cond) map[string]cond {
	want["VersionReady"] = cond{fnv1.Status_STATUS_CONDITION_FALSE, "Installing"}
	return want
}

// run is one reconcile of the function, uncached, called as Crossplane
// calls it (see fetching): what Crossplane applies.
func run(t testing.TB, req *fnv1.RunFunctionRequest) *fnv1.RunFunctionResponse {
	t.Helper()
	f := &Function{log: logging.NewNopLogger()}
	rsp, _, err := fetching(context.Background(), f.RunFunction, req)
	if err != nil {
		t.Fatalf("RunFunction returned an error, it must report failures as results: %v", err)
	}
	return rsp
}

// desiredNames lists the desired composed resources, Usages aside.
func desiredNames(rsp *fnv1.RunFunctionResponse) []string {
	var names []string
	for n := range rsp.GetDesired().GetResources() {
		if !strings.HasPrefix(n, "usage-") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// usageNames lists the desired Usages.
func usageNames(rsp *fnv1.RunFunctionResponse) []string {
	var names []string
	for n := range rsp.GetDesired().GetResources() {
		if strings.HasPrefix(n, "usage-") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

func readyNames(rsp *fnv1.RunFunctionResponse) []string {
	var names []string
	for n, r := range rsp.GetDesired().GetResources() {
		if r.GetReady() == fnv1.Ready_READY_TRUE && !strings.HasPrefix(n, "usage-") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// Usages expected once the resources at both of their ends exist: each
// target before its rule and the queue once step 2 exists; the controller
// before its AWS access and namespace once step 4 exists; the nodes before
// the controller once step 5 exists.
var (
	targetUsages = func() []string {
		var out []string
		for _, r := range []string{"capacity-reservation", "health", "rebalance", "spot-interruption", "state-change"} {
			out = append(out, "usage-target-"+r+"-before-rule-"+r)
		}
		return out
	}()
	// Once the final check exists: it outlives every instance, and what it
	// runs with outlives it.
	finalCheckUsages = []string{
		"usage-final-check-before-controller-namespace",
		"usage-final-check-before-controller-role",
		"usage-final-check-before-controller-role-policy",
		"usage-final-check-before-controller-service-account",
		"usage-final-check-before-final-check-pod-identity-association",
		"usage-final-check-before-final-check-rbac",
		"usage-final-check-before-final-check-rbac-binding",
		"usage-final-check-before-final-check-role",
		"usage-final-check-before-final-check-role-policy",
		"usage-final-check-before-final-check-service-account",
		"usage-final-check-before-pod-identity-association",
	}
	controllerUsages = append([]string{
		"usage-controller-kustomization-before-final-check",
		"usage-controller-kustomization-before-interruption-queue",
		"usage-controller-kustomization-before-interruption-queue-policy",
	}, func() []string {
		// The interruption pipeline outlives the controller.
		var out []string
		for _, r := range []string{"capacity-reservation", "health", "rebalance", "spot-interruption", "state-change"} {
			out = append(out, "usage-controller-kustomization-before-target-"+r)
		}
		return out
	}()...)
	// Once the nodes step and the observers exist: the nodes, then every
	// EC2NodeClass (so every instance) before the controller; the
	// monitoring after it.
	nodesUsages = []string{
		"usage-nodes-kustomization-before-controller-kustomization",
		"usage-observe-ec2nodeclass-private-before-controller-kustomization",
		"usage-observe-ec2nodeclass-public-before-controller-kustomization",
		"usage-controller-kustomization-before-monitoring-kustomization",
	}
)

func union(sets ...[]string) []string {
	var out []string
	for _, s := range sets {
		out = append(out, s...)
	}
	sort.Strings(out)
	return out
}

type cond struct {
	Status fnv1.Status
	Reason string
}

func conditionsOf(rsp *fnv1.RunFunctionResponse) map[string]cond {
	out := map[string]cond{}
	for _, c := range rsp.GetConditions() {
		out[c.GetType()] = cond{Status: c.GetStatus(), Reason: c.GetReason()}
	}
	return out
}

func fatal(rsp *fnv1.RunFunctionResponse) string {
	for _, r := range rsp.GetResults() {
		if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
			return r.GetMessage()
		}
	}
	return ""
}

// round is what one call of the function is expected to answer.
type round struct {
	desired    []string
	usages     []string
	ready      []string
	conditions map[string]cond
	// xrReady is false when the XR must be held at Ready=False.
	xrReady bool
}

func (r round) check(t *testing.T, name string, rsp *fnv1.RunFunctionResponse) {
	t.Helper()
	if msg := fatal(rsp); msg != "" {
		t.Fatalf("%s: fatal result: %s", name, msg)
	}
	// Every round but the first holds the cluster: its lease, Ready
	// whatever it reports, comes with whatever else is desired.
	desired, ready := union(r.desired, []string{"cluster-lease"}), union(r.ready, []string{"cluster-lease"})
	if diff := cmp.Diff(desired, desiredNames(rsp)); diff != "" {
		t.Fatalf("%s: desired resources (-want +got):\n%s", name, diff)
	}
	if diff := cmp.Diff(union(r.usages), usageNames(rsp), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("%s: usages (-want +got):\n%s", name, diff)
	}
	if diff := cmp.Diff(ready, readyNames(rsp), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("%s: ready resources (-want +got):\n%s", name, diff)
	}
	if diff := cmp.Diff(r.conditions, conditionsOf(rsp)); diff != "" {
		t.Errorf("%s: conditions (-want +got):\n%s", name, diff)
	}
	heldBack := rsp.GetDesired().GetComposite().GetReady() == fnv1.Ready_READY_FALSE
	if heldBack == r.xrReady {
		t.Errorf("%s: XR held at Ready=False is %v, want %v", name, heldBack, !r.xrReady)
	}
	// The fakes report no timestamps: whatever waits was just emitted.
	wantTTL := requeue.Shortest
	if r.xrReady {
		wantTTL = time.Minute
	}
	if got := rsp.GetMeta().GetTtl().AsDuration(); got != wantTTL {
		t.Errorf("%s: TTL %v, want %v", name, got, wantTTL)
	}
}

func forProvider(rsp *fnv1.RunFunctionResponse, name, field string) any {
	return rsp.GetDesired().GetResources()[name].GetResource().AsMap()["spec"].(map[string]any)["forProvider"].(map[string]any)[field]
}

// TestWalkToReady walks one claim from nothing to Ready, with fake providers
// creating what the function asks for, and checks what appears at each
// round; a failed access check holds the controller back; then a Ready
// resource turns unready and nothing goes. The same walk, from the same
// table, for both APIs: only the kinds and where they live differ.
func TestWalkToReady(t *testing.T) {
	for _, a := range apis {
		t.Run(a.name, func(t *testing.T) { walkToReady(t, a) })
	}
}

func walkToReady(t *testing.T, a api) {
	aws := fakeProviders{t: t, account: account}
	calls := 0
	call := func(observed map[resource.Name]map[string]any) *fnv1.RunFunctionResponse {
		rsp := run(t, a.request(t).observing(observed).build())
		calls++
		a.checkScope(t, fmt.Sprintf("call %d", calls), rsp)
		return rsp
	}

	// Nothing exists: the lease alone, which the XR must hold its cluster
	// by before anything in AWS is composed.
	rsp := call(nil)
	if got := desiredNames(rsp); !cmp.Equal(got, []string{"cluster-lease"}) {
		t.Fatalf("nothing exists: desired %v, want the lease alone", got)
	}
	waiting := clusterUnobserved(installing(wantConditions(0, "WaitingForPrerequisites")))
	waiting["ClusterHeld"] = cond{fnv1.Status_STATUS_CONDITION_FALSE, "Creating"}
	if diff := cmp.Diff(waiting, conditionsOf(rsp)); diff != "" {
		t.Errorf("nothing exists: conditions (-want +got):\n%s", diff)
	}
	// The fakes report no creationTimestamp: the lease counts as old
	// enough at once (internal/tenancy's tests hold the wait).
	// Step one but its controller policy, which names the cluster's VPC:
	// it waits for the observed cluster to be Ready and report it.
	rsp = call(aws.observe(rsp, false))
	round{desired: step1BeforeVPC, conditions: clusterUnobserved(installing(wantConditions(0, "Creating")))}.check(t, "lease exists", rsp)

	observed := aws.observe(rsp, false)
	rsp = call(observed)
	round{desired: step1BeforeVPC, conditions: installing(wantConditions(0, "Creating"))}.check(t, "step 1 exists, not Ready", rsp)

	observed = aws.observe(rsp, true)
	rsp = call(observed)
	round{desired: step1, ready: step1BeforeVPC, conditions: installing(wantConditions(0, "Creating"))}.check(t, "step 1 Ready but its policy", rsp)
	var policy struct {
		Statement []struct {
			Sid       string
			Condition map[string]map[string][]string
		}
	}
	if err := json.Unmarshal([]byte(forProvider(rsp, "controller-role-policy", "policy").(string)), &policy); err != nil {
		t.Fatalf("controller policy is not JSON: %v", err)
	}
	var vpcs []string
	for _, s := range policy.Statement {
		if s.Sid == "AllowScopedEC2InstanceAccessActionsInClusterVPC" {
			vpcs = s.Condition["ArnLike"]["ec2:Vpc"]
		}
	}
	if diff := cmp.Diff([]string{"arn:aws:ec2:eu-west-3:*:vpc/vpc-0fa4e"}, vpcs); diff != "" {
		t.Errorf("the controller may launch in (-the observed cluster's VPC +got):\n%s", diff)
	}

	observed = aws.observe(rsp, true)
	rsp = call(observed)
	round{desired: union(step1, step2), ready: step1, conditions: installing(wantConditions(1, "Creating"))}.check(t, "step 1 Ready", rsp)
	wantRoleARN := "arn:aws:iam::111122223333:role/socle/prod-eu/prod-eu-karpenter"
	if got := forProvider(rsp, "pod-identity-association", "roleArn"); got != wantRoleARN {
		t.Errorf("association roleArn %v, want the observed role ARN %s", got, wantRoleARN)
	}

	// Step 3 goes to the claimed cluster in two rounds: what lives in the
	// namespace only once the namespace exists.
	observed = aws.observe(rsp, true)
	rsp = call(observed)
	round{desired: union(step1, step2, []string{"controller-namespace"}), usages: targetUsages, ready: union(step1, step2), conditions: installing(wantConditions(2, "Creating"))}.check(t, "step 2 Ready", rsp)
	wantRef := map[string]any{"name": "prod-eu"}
	if a.providerConfigKind != "" {
		wantRef["kind"] = a.providerConfigKind
	}
	if got := rsp.GetDesired().GetResources()["controller-namespace"].GetResource().AsMap()["spec"].(map[string]any)["providerConfigRef"]; !cmp.Equal(got, wantRef) {
		t.Errorf("the namespace's Object goes through providerConfigRef %v, want the claimed cluster's own (prod-eu)", got)
	}

	observed = aws.observe(rsp, true)
	observed["controller-namespace"] = unready(observed["controller-namespace"])
	rsp = call(observed)
	round{desired: union(step1, step2, []string{"controller-namespace"}), usages: targetUsages, ready: union(step1, step2), conditions: installing(wantConditions(2, "Creating"))}.check(t, "namespace not Ready yet", rsp)

	observed = aws.observe(rsp, true)
	rsp = call(observed)
	round{desired: union(step1, step2, step3), usages: targetUsages, ready: union(step1, step2, []string{"controller-namespace"}), conditions: installing(wantConditions(2, "Creating"))}.check(t, "namespace Ready", rsp)

	observed = aws.observe(rsp, true)
	observed["access-check"] = failedCheck(observed["access-check"], cluster.CheckQueue, "An error occurred (AWS.SimpleQueueService.NonExistentQueue) when calling the GetQueueUrl operation: The specified queue does not exist.")
	rsp = call(observed)
	round{desired: union(step1, step2, step3), usages: union(targetUsages, finalCheckUsages), ready: union(step1, step2, []string{"controller-namespace", "controller-service-account", "final-check", "final-check-rbac", "final-check-rbac-binding", "final-check-service-account"}), conditions: installing(wantConditions(2, "Creating"))}.check(t, "access check failed", rsp)
	if msg := conditionMessage(rsp, "AccessCheckReady"); !strings.Contains(msg, ": Pod failed (exit 11, Error): interruption-queue: An error occurred (AWS.SimpleQueueService.NonExistentQueue)") {
		t.Errorf("a failed access check must reach the claim with its reason, got %q", msg)
	}

	observed = aws.observe(rsp, true)
	rsp = call(observed)
	round{desired: union(step1, step2, step3, step4), usages: union(targetUsages, finalCheckUsages), ready: union(step1, step2, step3), conditions: installing(wantConditions(3, "Creating"))}.check(t, "access check succeeded", rsp)

	observed = aws.observe(rsp, true)
	rsp = call(observed)
	round{desired: union(step1, step2, step3, step4, step5, observers), usages: union(targetUsages, finalCheckUsages, controllerUsages), ready: union(step1, step2, step3, step4, observers), conditions: installing(wantConditions(4, "Creating"))}.check(t, "controller Ready", rsp)

	observed = aws.observe(rsp, true)
	all := union(step1, step2, step3, step4, step5, observers)
	rsp = call(observed)
	allUsages := union(targetUsages, finalCheckUsages, controllerUsages, nodesUsages)
	round{desired: all, usages: allUsages, ready: all, conditions: observedPools(wantConditions(6, "")), xrReady: true}.check(t, "everything Ready", rsp)
	wantStatus := map[string]any{
		"roleArn": wantRoleARN,
		"queue": map[string]any{
			"name": "prod-eu-karpenter",
			"url":  "https://sqs.eu-west-3.amazonaws.com/111122223333/prod-eu-karpenter",
			"arn":  "arn:aws:sqs:eu-west-3:111122223333:prod-eu-karpenter",
		},
		"ruleArns": map[string]any{
			"health":               "arn:aws:events:eu-west-3:111122223333:rule/prod-eu-karpenter-health",
			"spot-interruption":    "arn:aws:events:eu-west-3:111122223333:rule/prod-eu-karpenter-spot",
			"rebalance":            "arn:aws:events:eu-west-3:111122223333:rule/prod-eu-karpenter-rebalance",
			"state-change":         "arn:aws:events:eu-west-3:111122223333:rule/prod-eu-karpenter-state",
			"capacity-reservation": "arn:aws:events:eu-west-3:111122223333:rule/prod-eu-karpenter-capacity",
		},
		// What the fake cluster's Karpenter reports of both NodePools.
		"pools": map[string]any{"private": reportedPool, "public": reportedPool},
	}
	if diff := cmp.Diff(wantStatus, rsp.GetDesired().GetComposite().GetResource().AsMap()["status"]); diff != "" {
		t.Errorf("XR status (-want +got):\n%s", diff)
	}

	// The platform guards deletions: with the pools' four nodes reported,
	// the XR is guarded by a Usage of itself, whose reason says so; the
	// tenant's confirmation lifts it, on the claim Crossplane answers for
	// (a claim being deleted propagates nothing to its XR) or on a
	// namespaced XR itself. Nothing else changes.
	const confirm = "socle.do-now.io/delete-with-nodes"
	guarded := func(b *requestBuilder) *fnv1.RunFunctionResponse {
		rsp := run(t, b.withInput("deletionGuard.annotation", confirm).observing(observed).build())
		a.checkScope(t, "guarded", rsp)
		return rsp
	}
	g := guarded(a.request(t)).GetDesired().GetResources()["deletion-guard"].GetResource().AsMap()
	if reason, _ := g["spec"].(map[string]any)["reason"].(string); !strings.Contains(reason, "4 nodes (private 2, public 2)") || !strings.Contains(reason, confirm+"=prod-eu") {
		t.Errorf("guarded with four nodes: the guard %v, want its reason to count them and say how to confirm", g)
	}
	confirmed := a.request(t)
	if a.namespace == "" {
		confirmed = confirmed.requiring(map[string]any{"apiVersion": "platform.socle.do-now.io/v1alpha1", "kind": "Karpenter",
			"metadata": map[string]any{"name": "karpenter", "namespace": "team-a", "annotations": map[string]any{confirm: "prod-eu"}}})
	} else {
		confirmed = confirmed.withXRAnnotation(confirm, "prod-eu")
	}
	lifted := guarded(confirmed)
	if _, ok := lifted.GetDesired().GetResources()["deletion-guard"]; ok {
		t.Error("confirmed, the XR is still guarded")
	}
	round{desired: all, usages: allUsages, ready: all, conditions: observedPools(wantConditions(6, "")), xrReady: true}.check(t, "confirmed", lifted)

	// A pool at the near-limits ratio: the claim says which and how much,
	// and nothing is held back for it.
	near := deepCopy(observed["observe-nodepool-private"])
	nearStatus := near["status"].(map[string]any)["atProvider"].(map[string]any)["manifest"].(map[string]any)["status"].(map[string]any)
	nearStatus["resources"] = map[string]any{"cpu": "95", "memory": "32Gi"}
	rsp = call(withObserved(observed, "observe-nodepool-private", near))
	if c := conditionsOf(rsp)["PoolsWithinLimits"]; c != (cond{fnv1.Status_STATUS_CONDITION_FALSE, "NearLimits"}) {
		t.Errorf("a pool at 95%% of its CPU limit: PoolsWithinLimits %v, want False/NearLimits", c)
	}
	if msg := conditionMessage(rsp, "PoolsWithinLimits"); !strings.Contains(msg, "private: cpu 95 of 100 (95%)") || strings.Contains(msg, "public:") {
		t.Errorf("PoolsWithinLimits %q, want it to name the private pool's CPU, 95 of 100, and only it", msg)
	}
	if rsp.GetDesired().GetComposite().GetReady() == fnv1.Ready_READY_FALSE {
		t.Error("a pool near its limits holds the XR unready: observing must never gate")
	}

	// The NodePools not observed (the claimed cluster unreachable, say):
	// unknown, still observed, nothing held back.
	unseen := copyObserved(observed)
	delete(unseen, "observe-nodepool-private")
	delete(unseen, "observe-nodepool-public")
	rsp = call(unseen)
	if c := conditionsOf(rsp)["PoolsWithinLimits"]; c != (cond{fnv1.Status_STATUS_CONDITION_UNKNOWN, "NotObservedYet"}) {
		t.Errorf("no NodePool observed: PoolsWithinLimits %v, want Unknown/NotObservedYet", c)
	}
	if rsp.GetDesired().GetComposite().GetReady() == fnv1.Ready_READY_FALSE {
		t.Error("NodePools not observed hold the XR unready: observing must never gate")
	}
	for _, n := range observers {
		if _, ok := rsp.GetDesired().GetResources()[n]; !ok {
			t.Errorf("%s is no longer desired while its NodePool is not observed", n)
		}
	}

	// The controller turns unready after the nodes exist: nothing that exists
	// is dropped or withheld; the XR goes back to Ready=False and says why.
	observed["controller-kustomization"] = kustomizationFailing(observed["controller-kustomization"], "HelmRelease/karpenter/karpenter status: 'Failed'")
	rsp = call(observed)
	round{desired: all, usages: allUsages, ready: union(step1, step2, step3, step5, observers), conditions: observedPools(wantConditions(3, "Creating"))}.check(t, "controller unready after the nodes exist", rsp)
	if msg := conditionMessage(rsp, "ControllerReady"); !strings.Contains(msg, "HelmRelease/karpenter/karpenter status: 'Failed'") {
		t.Errorf("Flux's message must reach the claim, got %q", msg)
	}

	// The role turns unready too, and then loses its observed ARN: the
	// wiring that exists is still emitted, unchanged.
	before := rsp.GetDesired().GetResources()["pod-identity-association"].GetResource().AsMap()
	role := unready(observed["controller-role"])
	role["status"].(map[string]any)["atProvider"] = map[string]any{}
	observed["controller-role"] = role
	rsp = call(observed)
	round{desired: all, usages: allUsages, ready: union(step1[1:], step2, step3, step5, observers), conditions: observedPools(wantConditions(0, "Creating"))}.check(t, "role unready and unobserved", rsp)
	after := rsp.GetDesired().GetResources()["pod-identity-association"].GetResource().AsMap()
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("the association changed while its role was unobserved (-before +after):\n%s", diff)
	}
}

func conditionMessage(rsp *fnv1.RunFunctionResponse, typ string) string {
	for _, c := range rsp.GetConditions() {
		if c.GetType() == typ {
			return c.GetMessage()
		}
	}
	return ""
}

func TestProviderErrorReachesTheClaim(t *testing.T) {
	aws := fakeProviders{t: t, account: account}
	observed := aws.firstStep(aRequest(t), false)
	observed["controller-role"] = failing(observed["controller-role"], "AccessDenied: not authorized to perform iam:CreateRole")

	rsp := run(t, aRequest(t).observing(observed).build())
	for _, c := range rsp.GetConditions() {
		if c.GetType() != "IdentityAndQueueReady" {
			continue
		}
		want := "controller-role: Synced=False (ReconcileError): AccessDenied: not authorized to perform iam:CreateRole"
		if !strings.Contains(c.GetMessage(), want) {
			t.Errorf("condition message %q does not carry the provider's error %q", c.GetMessage(), want)
		}
		if c.GetTarget() != fnv1.Target_TARGET_COMPOSITE_AND_CLAIM {
			t.Errorf("condition target %v, want the claim too", c.GetTarget())
		}
		return
	}
	t.Fatal("no IdentityAndQueueReady condition")
}

func TestEventsOnlyOnTransitions(t *testing.T) {
	// showing is a new XR's request whose XR already shows every step as
	// the function answers a new XR, but for the changes given.
	showing := func(changes map[string][2]string) *fnv1.RunFunctionRequest {
		b := aRequest(t)
		for _, c := range [][3]string{
			{"ClusterHeld", "False", "Creating"},
			{"IdentityAndQueueReady", "False", "WaitingForPrerequisites"},
			{"InterruptionWiringReady", "False", "WaitingForPrerequisites"},
			{"AccessCheckReady", "False", "WaitingForPrerequisites"},
			{"ControllerReady", "False", "WaitingForPrerequisites"},
			{"MonitoringReady", "False", "WaitingForPrerequisites"},
			{"NodePoolsReady", "False", "WaitingForPrerequisites"},
			{"VersionReady", "False", "Installing"},
			{"PoolsWithinLimits", "Unknown", "NotObservedYet"},
			{"NodeClassesValidated", "Unknown", "NotObservedYet"},
			{"NextMinorReady", "Unknown", "ClusterVersionUnknown"},
		} {
			if changed, ok := changes[c[0]]; ok {
				c[1], c[2] = changed[0], changed[1]
			}
			b.withXRCondition(c[0], c[1], c[2])
		}
		return b.build()
	}
	cases := map[string]struct {
		reason string
		req    *fnv1.RunFunctionRequest
		want   int
	}{
		"FirstCall": {
			reason: "A new XR shows no step conditions: each step's state (its lease's first), its version's and its next minor's, is news.",
			req:    aRequest(t).build(),
			want:   11,
		},
		"NothingChanged": {
			reason: "The XR already shows every step as it is: no event.",
			req:    showing(nil),
			want:   0,
		},
		"OneStepChanged": {
			reason: "Only the step whose state differs from the XR's gets an event.",
			req:    showing(map[string][2]string{"IdentityAndQueueReady": {"True", "Available"}}),
			want:   1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, tc.req)
			if got := len(rsp.GetResults()); got != tc.want {
				t.Errorf("%s\n%d results, want %d: %v", tc.reason, got, tc.want, rsp.GetResults())
			}
		})
	}
}

// TestBadInputComposesNothing checks that invalid claims and inputs get a
// Fatal result naming the field, and that what exists is passed through.
func TestBadInputComposesNothing(t *testing.T) {
	cases := map[string]struct {
		reason string
		req    func(*requestBuilder) *requestBuilder
		want   string
	}{
		"MalformedRoleARN": {
			reason: "The node role ARN decides account and partition; a malformed one is refused.",
			req: func(b *requestBuilder) *requestBuilder {
				return b.withSpec("nodeIdentity.roleArn", "arn:aws:iam::1234:role/x")
			},
			want: "spec.nodeIdentity.roleArn",
		},
		"ClusterNameTooLongForRules": {
			reason: "A cluster name that makes a rule name exceed 64 characters is refused before anything is emitted.",
			req:    func(b *requestBuilder) *requestBuilder { return b.withSpec("cluster.name", strings.Repeat("c", 45)) },
			want:   "spec.cluster.name",
		},
		"UnknownVersion": {
			reason: "Only versions with a known controller policy are accepted.",
			req:    func(b *requestBuilder) *requestBuilder { return b.withSpec("version", "0.37.0") },
			want:   "spec.version",
		},
		"UnknownInputField": {
			reason: "A misspelt platform setting must not silently fall back to a default.",
			req:    func(b *requestBuilder) *requestBuilder { return b.withInput("iamPathPrefx", "/x/") },
			want:   "input",
		},
		"BadPathPrefix": {
			reason: "The IAM path prefix must be an IAM path.",
			req:    func(b *requestBuilder) *requestBuilder { return b.withInput("iamPathPrefix", "socle") },
			want:   "input.iamPathPrefix",
		},
		"LimitOverThePlatformsCeiling": {
			reason: "A pool bigger than the platform allows for the cluster is refused, naming the ceiling.",
			req: func(b *requestBuilder) *requestBuilder {
				return b.withSpec("pools.public.limits", map[string]any{"cpu": "500", "memory": "100Gi"})
			},
			want: `spec.pools.public.limits.cpu: Invalid value: "500": exceeds the platform's ceiling 200 for cluster "prod-eu"`,
		},
		"CategoryThePlatformDoesNotAllow": {
			reason: "A tenant may narrow the instance categories, never widen them.",
			req: func(b *requestBuilder) *requestBuilder {
				return b.withSpec("pools.private.instanceCategories", []any{"p"})
			},
			want: `spec.pools.private.instanceCategories[0]: Unsupported value: "p": the platform allows c, m, r`,
		},
		"XROfAnotherAPI": {
			reason: "An XR of a kind the function does not serve is refused, naming the apiVersion.",
			req: func(b *requestBuilder) *requestBuilder {
				b.xr["apiVersion"] = "platform.socle.do-now.io/v1beta1"
				return b
			},
			want: "apiVersion: the function serves platform.socle.do-now.io/v1alpha1, Kind=XKarpenter or platform.m.socle.do-now.io/v1alpha1, Kind=Karpenter",
		},
		"UnpinnedVersion": {
			reason: "Without the platform's version pin a function release that knows a newer Karpenter would upgrade every claim naming none.",
			req:    func(b *requestBuilder) *requestBuilder { return b.withInput("versions.default", nil) },
			want:   "input.versions.default: Required value",
		},
		"NoAllowedVersions": {
			reason: "Without the platform's list a function release would offer tenants every version it knows.",
			req:    func(b *requestBuilder) *requestBuilder { return b.withInput("versions.allowed", nil) },
			want:   "input.versions.allowed: Required value",
		},
		"UnpinnedAMI": {
			reason: "Without the platform's AMI pin a function release that knows a newer release would drift every node.",
			req:    func(b *requestBuilder) *requestBuilder { return b.withInput("nodes.defaultAmiAlias", nil) },
			want:   "input.nodes.defaultAmiAlias: Required value",
		},
		"AMIPinBelowTheMinimum": {
			reason: "A platform that raises its minimum AMI release refuses a claim pinned below it: the nodes run on, and the claim says what to move to.",
			req: func(b *requestBuilder) *requestBuilder {
				return b.withSpec("pools.private.amiAlias", "al2023@v20260403").withInput("nodes.minAmiAlias", "al2023@v20260505")
			},
			want: `spec.pools.private.amiAlias: Invalid value: "al2023@v20260403": is older than the platform's minimum al2023@v20260505 for cluster "prod-eu": pin al2023@v20260505 or later`,
		},
		"ControllerInKubeSystem": {
			reason: "The controller's namespace is composed and deleted with the claim: never one the cluster owns.",
			req:    func(b *requestBuilder) *requestBuilder { return b.withInput("podIdentity.namespace", "kube-system") },
			want:   `input.podIdentity.namespace: Invalid value: "kube-system"`,
		},
	}
	for _, a := range apis {
		for name, tc := range cases {
			t.Run(a.name+"/"+name, func(t *testing.T) {
				existing := map[resource.Name]map[string]any{"controller-role": {"apiVersion": a.kinds["Role"], "kind": "Role"}}
				req := tc.req(a.request(t)).observing(existing).build()
				req.Desired.Resources = map[string]*fnv1.Resource{"from-an-earlier-function": {Resource: mustStruct(t, map[string]any{"kind": "ConfigMap"})}}
				rsp := run(t, req)
				msg := fatal(rsp)
				if !strings.Contains(msg, tc.want) {
					t.Errorf("%s\nfatal message %q does not name %q", tc.reason, msg, tc.want)
				}
				checkRefusalShown(t, rsp, "Invalid", msg)
				if diff := cmp.Diff([]string{"from-an-earlier-function"}, desiredNames(rsp), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("%s\na refused XR must neither add nor drop desired resources (-want +got):\n%s", tc.reason, diff)
				}
			})
		}
	}
}

// TestQueuePolicyNamesTheObservedRules reads the composed queue policy as data.
func TestQueuePolicyNamesTheObservedRules(t *testing.T) {
	aws := fakeProviders{t: t, account: account}
	observed := aws.firstStep(aRequest(t), true)
	rsp := run(t, aRequest(t).observing(observed).build())

	qp := rsp.GetDesired().GetResources()["interruption-queue-policy"].GetResource().AsMap()
	var doc struct {
		Statement []struct {
			Effect    string
			Condition map[string]map[string][]string
		}
	}
	if err := json.Unmarshal([]byte(qp["spec"].(map[string]any)["forProvider"].(map[string]any)["policy"].(string)), &doc); err != nil {
		t.Fatalf("queue policy is not JSON: %v", err)
	}
	var want []string
	for _, n := range []string{"rule-capacity-reservation", "rule-health", "rule-rebalance", "rule-spot-interruption", "rule-state-change"} {
		want = append(want, observed[resource.Name(n)]["status"].(map[string]any)["atProvider"].(map[string]any)["arn"].(string))
	}
	sort.Strings(want)
	if diff := cmp.Diff(want, doc.Statement[0].Condition["ArnEquals"]["aws:SourceArn"]); diff != "" {
		t.Errorf("aws:SourceArn (-observed rule ARNs +got):\n%s", diff)
	}
}

// checkRefusalShown checks that a refusal reaches the claim, not only the
// XR's Synced condition: Accepted=False with the reason and the message, and
// a warning event, both targeted at the claim too.
func checkRefusalShown(t *testing.T, rsp *fnv1.RunFunctionResponse, reason, msg string) {
	t.Helper()
	var accepted *fnv1.Condition
	for _, c := range rsp.GetConditions() {
		if c.GetType() == "Accepted" {
			accepted = c
		}
	}
	switch {
	case accepted == nil:
		t.Errorf("a refusal must set the Accepted condition")
	case accepted.GetStatus() != fnv1.Status_STATUS_CONDITION_FALSE || accepted.GetReason() != reason || accepted.GetMessage() != msg:
		t.Errorf("Accepted is %v/%s %q, want False/%s %q", accepted.GetStatus(), accepted.GetReason(), accepted.GetMessage(), reason, msg)
	case accepted.GetTarget() != fnv1.Target_TARGET_COMPOSITE_AND_CLAIM:
		t.Errorf("Accepted targets %v, want the claim too", accepted.GetTarget())
	}
	results := rsp.GetResults()
	if len(results) != 2 || results[0].GetSeverity() != fnv1.Severity_SEVERITY_WARNING ||
		results[0].GetTarget() != fnv1.Target_TARGET_COMPOSITE_AND_CLAIM || results[0].GetMessage() != msg ||
		results[1].GetSeverity() != fnv1.Severity_SEVERITY_FATAL {
		t.Errorf("want a warning for the claim, then the Fatal result (Crossplane records events before a Fatal one only), got %v", results)
	}
}

// TestLegacyKustomizationsStopTheClaim checks an installation from before
// the Kustomizations moved into the claimed cluster: with its Kustomizations
// and a Usage they use still in Crossplane's cluster, under names the
// function now composes as other kinds, the claim is refused, naming each,
// and nothing is composed or dropped until the platform has let them go
// (docs/operating.md "Upgrading an existing installation").
func TestLegacyKustomizationsStopTheClaim(t *testing.T) {
	aws := fakeProviders{t: t, account: account}
	var observed map[resource.Name]map[string]any
	for range 10 {
		observed = aws.observe(run(t, aRequest(t).observing(observed).build()), true)
	}
	legacy := func(kind, namespace, name string) map[string]any {
		return map[string]any{
			"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": kind,
			"metadata": map[string]any{"name": name, "namespace": namespace},
		}
	}
	observed["controller-kustomization"] = legacy("Kustomization", "flux-system", "prod-eu-karpenter-controller")
	observed["nodes-kustomization"] = legacy("Kustomization", "flux-system", "prod-eu-karpenter-nodes")
	usage := legacy("Usage", "flux-system", "xr-usage-1")
	usage["apiVersion"] = "protection.crossplane.io/v1beta1"
	observed["usage-controller-kustomization-before-interruption-queue"] = usage

	rsp := run(t, aRequest(t).observing(observed).build())
	msg := fatal(rsp)
	for _, want := range []string{
		"Crossplane cannot change the kind of a composed resource",
		"controller-kustomization: Kustomization flux-system/prod-eu-karpenter-controller (kustomize.toolkit.fluxcd.io) is now composed as Object (kubernetes.crossplane.io)",
		"nodes-kustomization: Kustomization flux-system/prod-eu-karpenter-nodes (kustomize.toolkit.fluxcd.io) is now composed as Object (kubernetes.crossplane.io)",
		"usage-controller-kustomization-before-interruption-queue: Usage flux-system/xr-usage-1 (protection.crossplane.io) is now composed as ClusterUsage (protection.crossplane.io)",
		`docs/operating.md "Upgrading an existing installation"`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("fatal message %q does not say %q", msg, want)
		}
	}
	checkRefusalShown(t, rsp, "Refused", msg)
	if got := desiredNames(rsp); len(got) != 0 {
		t.Errorf("a refused XR composes nothing (Crossplane then applies and deletes nothing), got %v", got)
	}

	// Once they are gone, the claim goes on and composes the Objects.
	delete(observed, "controller-kustomization")
	delete(observed, "nodes-kustomization")
	delete(observed, "usage-controller-kustomization-before-interruption-queue")
	rsp = run(t, aRequest(t).observing(observed).build())
	if msg := fatal(rsp); msg != "" {
		t.Fatalf("refused after the migration: %s", msg)
	}
	if k := rsp.GetDesired().GetResources()["controller-kustomization"].GetResource().AsMap(); k["kind"] != "Object" {
		t.Errorf("controller-kustomization is a %v, want the Object that applies it into the claimed cluster", k["kind"])
	}
}

// accessCheckPod is the name of the Pod the access check's Object carries.
func accessCheckPod(t *testing.T, rsp *fnv1.RunFunctionResponse) string {
	t.Helper()
	checks := checksOf(rsp)
	if len(checks) != 1 {
		t.Fatalf("want one access check Pod desired, got %v", checks)
	}
	for _, name := range checks {
		return name
	}
	return ""
}

// TestEachPreflightCheck fails each check of the access check in turn, as
// the kubelet reports the Pod: AccessCheckReady names the check and carries
// AWS's words, and the controller is not composed. Then the documented
// re-run: a new socle.do-now.io/access-check-run value on the claim gives a
// new Pod, which passes, and the controller follows.
func TestEachPreflightCheck(t *testing.T) {
	aws := fakeProviders{t: t, account: account}
	var observed map[resource.Name]map[string]any
	var rsp *fnv1.RunFunctionResponse
	for range 10 {
		rsp = run(t, aRequest(t).observing(observed).build())
		if _, ok := observed["access-check"]; ok {
			break
		}
		observed = aws.observe(rsp, true)
	}
	if _, ok := observed["access-check"]; !ok {
		t.Fatal("the access check was never composed")
	}
	first := accessCheckPod(t, rsp)
	for _, check := range cluster.Checks {
		t.Run(check.Name, func(t *testing.T) {
			says := "An error occurred (AccessDenied): explicit deny in a service control policy for " + check.Name
			failed := withObserved(observed, "access-check", failedCheck(observed["access-check"], check, says))
			rsp := run(t, aRequest(t).observing(failed).build())
			if check == cluster.CheckCredentials {
				// No credentials is what Pod Identity's propagation looks
				// like: the check is tried again in a new Pod, unasked
				// (TestAccessCheckRecovers).
				if got := accessCheckPod(t, rsp); got == first {
					t.Errorf("a failed credentials check keeps its Pod %s: it is never tried again", got)
				}
				return
			}
			msg := conditionMessage(rsp, "AccessCheckReady")
			if want := fmt.Sprintf("Pod failed (exit %d, Error): %s: %s", check.ExitCode, check.Name, says); !strings.Contains(msg, want) {
				t.Errorf("AccessCheckReady %q, want it to say %q", msg, want)
			}
			if _, ok := rsp.GetDesired().GetResources()["controller-kustomization"]; ok {
				t.Error("the controller is composed although a check failed")
			}
			if got := accessCheckPod(t, rsp); got != first {
				t.Errorf("the access check's Pod changed from %s to %s without a new run asked for", first, got)
			}
		})
	}

	// The cause fixed, the platform engineer asks for a new run.
	failed := withObserved(observed, "access-check", failedCheck(observed["access-check"], cluster.CheckFleet, "UnauthorizedOperation"))
	rerun := func() *requestBuilder { return aRequest(t).withXRAnnotation(cluster.RunAnnotation, "2026-12-01T17:00") }
	rsp = run(t, rerun().observing(failed).build())
	second := accessCheckPod(t, rsp)
	if second == first {
		t.Fatalf("a new %s value keeps the Pod %s: nothing runs again", cluster.RunAnnotation, first)
	}
	observed = aws.observe(rsp, true)
	rsp = run(t, rerun().observing(observed).build())
	if c := conditionsOf(rsp)["AccessCheckReady"]; c.Status != fnv1.Status_STATUS_CONDITION_TRUE {
		t.Errorf("the new run passed: AccessCheckReady %v", c)
	}
	if _, ok := rsp.GetDesired().GetResources()["controller-kustomization"]; !ok {
		t.Error("the new run passed, yet the controller is not composed")
	}

	// Another run asked for once the controller exists (the pass is older
	// than the platform's minimum interval: the fake kubelet says no end):
	// the Pod that passed is no proof for the new one, which has not run
	// yet, in an Object of its own; the controller stays.
	observed = aws.observe(rsp, true)
	passed := accessCheckPod(t, rsp)
	rsp = run(t, aRequest(t).withXRAnnotation(cluster.RunAnnotation, "2026-12-02").observing(observed).build())
	third := accessCheckPod(t, rsp)
	if msg := conditionMessage(rsp, "AccessCheckReady"); third == passed || conditionsOf(rsp)["AccessCheckReady"].Status != fnv1.Status_STATUS_CONDITION_FALSE || !strings.Contains(msg, "waiting for") {
		t.Errorf("a third run asked for: Pod %s (was %s), AccessCheckReady %v %q, want a new Pod and False until it is observed", third, passed, conditionsOf(rsp)["AccessCheckReady"], msg)
	}
	if _, ok := rsp.GetDesired().GetResources()["controller-kustomization"]; !ok {
		t.Error("a new run of the access check dropped the controller")
	}
}
