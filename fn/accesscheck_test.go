package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	cd "github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/do-now/function-karpenter/internal/cluster"
	"github.com/do-now/function-karpenter/internal/sequence"
)

// TestAccessCheckRecovers: a check that failed for a passing cause (no
// credentials yet, as a Pod admitted before EKS propagated its Pod
// Identity association gets none) runs again as a new Pod once its backoff
// is over, with no one asking; a refusal by AWS, and a check out of
// attempts, stay failed until a run is asked for.
func TestAccessCheckRecovers(t *testing.T) {
	finished := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	at := func(after time.Duration, req *fnv1.RunFunctionRequest) *fnv1.RunFunctionResponse {
		t.Helper()
		return runAt(t, finished.Add(after), req)
	}
	pod := func(rsp *fnv1.RunFunctionResponse) (name, attempt string) {
		checks := slices.Sorted(maps.Keys(checksOf(rsp)))
		if len(checks) != 1 {
			t.Fatalf("want one access check composed, got %v", checks)
		}
		m := rsp.GetDesired().GetResources()[checks[0]].GetResource().AsMap()
		meta := m["spec"].(map[string]any)["forProvider"].(map[string]any)["manifest"].(map[string]any)["metadata"].(map[string]any)
		annotations, _ := meta["annotations"].(map[string]any)
		a, _ := annotations[cluster.AttemptAnnotation].(string)
		return meta["name"].(string), a
	}
	failedAt := func(obj map[string]any, check cluster.Check, aws string) map[string]any {
		obj = failedCheck(obj, check, aws)
		manifest := obj["status"].(map[string]any)["atProvider"].(map[string]any)["manifest"].(map[string]any)
		manifest["status"].(map[string]any)["containerStatuses"].([]any)[0].(map[string]any)["state"].(map[string]any)["terminated"].(map[string]any)["finishedAt"] = finished.Format(time.RFC3339)
		return obj
	}
	noCredentials := "Unable to locate credentials. You can configure credentials by running \"aws configure\"."

	observed := readyAt(t, "1.15.0", func(b *requestBuilder) *requestBuilder { return b })
	first, _ := pod(run(t, aRequest(t).observing(observed).build()))
	observed[cluster.AccessCheck] = failedAt(observed[cluster.AccessCheck], cluster.CheckCredentials, noCredentials)

	rsp := at(5*time.Second, aRequest(t).observing(observed).build())
	if name, n := pod(rsp); name != first || n != "1" {
		t.Errorf("within the backoff: Pod %s attempt %s, want the first, %s attempt 1", name, n, first)
	}
	if ttl := rsp.GetMeta().GetTtl().AsDuration(); ttl > cluster.FirstBackoff-5*time.Second {
		t.Errorf("within the backoff the TTL is %s, want at most the %s left", ttl, cluster.FirstBackoff-5*time.Second)
	}
	rsp = at(cluster.FirstBackoff, aRequest(t).observing(observed).build())
	second, n := pod(rsp)
	if second == first || n != "2" {
		t.Fatalf("after the backoff: Pod %s attempt %s, want a new Pod, attempt 2", second, n)
	}
	checkNothingDropped(t, without(observed, cluster.AccessCheck), rsp)
	if _, ok := rsp.GetDesired().GetResources()[string(cluster.AccessCheck)]; ok {
		t.Error("the first attempt's Object is still desired once the second supersedes it: its Pod would be left behind")
	}

	// The second attempt is what an Object of its own carries; AWS refuses it.
	observed = (fakeProviders{t: t, account: account}).observe(rsp, true)
	check, _ := cluster.ObservedCheck(observedComposed(t, observed))
	if check == cluster.AccessCheck {
		t.Errorf("the second attempt is composed as %s, the name of the Pod it supersedes", check)
	}
	observed[check] = failedAt(observed[check], cluster.CheckQueue,
		"An error occurred (AccessDenied) when calling the GetQueueUrl operation: explicit deny in a service control policy")
	if name, n := pod(at(time.Hour, aRequest(t).observing(observed).build())); name != second || n != "2" {
		t.Errorf("a refusal by AWS: Pod %s attempt %s, want it to stay %s attempt 2", name, n, second)
	}
	if msg := conditionMessage(at(time.Hour, aRequest(t).observing(observed).build()), "AccessCheckReady"); !strings.Contains(msg, "interruption-queue: An error occurred (AccessDenied)") {
		t.Errorf("AccessCheckReady %q, want AWS's refusal", msg)
	}

	// Out of attempts: the platform allows two.
	observed[check] = failedAt(observed[check], cluster.CheckCredentials, noCredentials)
	if name, n := pod(at(time.Hour, aRequest(t).withInput("accessCheck.attempts", 2).observing(observed).build())); name != second || n != "2" {
		t.Errorf("the last attempt failed: Pod %s attempt %s, want it to stay %s attempt 2", name, n, second)
	}
	if _, n := pod(at(time.Hour, aRequest(t).observing(observed).build())); n != "3" {
		t.Errorf("with attempts left (4), the second passing failure leads to attempt %s, want 3", n)
	}
}

// TestChangeProvenBeforeTheNodes: a day-two change of what the preflight
// proves (here the private pool's AMI pin) runs the check again as a new
// Pod, and the node pools keep what they run until that Pod succeeded.
func TestChangeProvenBeforeTheNodes(t *testing.T) {
	observed := readyAt(t, "1.15.0", func(b *requestBuilder) *requestBuilder { return b })
	manifest := func(rsp *fnv1.RunFunctionResponse) any {
		return rsp.GetDesired().GetResources()["nodes-kustomization"].GetResource().AsMap()["spec"].(map[string]any)["forProvider"].(map[string]any)["manifest"]
	}
	pinned := func() *requestBuilder { return aRequest(t).withSpec("pools.private.amiAlias", "al2023@v20260403") }
	before := observed["nodes-kustomization"]["spec"].(map[string]any)["forProvider"].(map[string]any)["manifest"]

	rsp := run(t, pinned().observing(observed).build())
	if !cmp.Equal(manifest(rsp), before) {
		t.Errorf("the node pools changed before the access check passed on the change:\n%s", cmp.Diff(before, manifest(rsp)))
	}
	if msg := conditionMessage(rsp, "NodePoolsReady"); !strings.Contains(msg, "AccessCheckReady") {
		t.Errorf("NodePoolsReady %q, want it to say the pools wait for the check", msg)
	}
	// All but the check the change supersedes, whose Object goes with its Pod.
	checkNothingDropped(t, without(observed, cluster.AccessCheck), rsp)
	if checks := checksOf(rsp); len(checks) != 1 || checks[string(cluster.AccessCheck)] != "" {
		t.Errorf("the change's check is composed as %v, want one Object, not %s, which carries the Pod it supersedes", checks, cluster.AccessCheck)
	}

	// The new Pod succeeds: the change reaches the pools.
	observed = (fakeProviders{t: t, account: account}).observe(rsp, true)
	rsp = run(t, pinned().observing(observed).build())
	if cmp.Equal(manifest(rsp), before) {
		t.Error("the access check passed on the change, yet the node pools kept their old manifest")
	}
}

// TestAccessCheckWarningsReachTheClaim: a check that passed with a
// warning (the pricing API out of reach) is Ready, and AccessCheckReady
// says what it warned of.
func TestAccessCheckWarningsReachTheClaim(t *testing.T) {
	observed := readyAt(t, "1.15.0", func(b *requestBuilder) *requestBuilder { return b })
	manifest := observed[cluster.AccessCheck]["status"].(map[string]any)["atProvider"].(map[string]any)["manifest"].(map[string]any)
	warning := "passed, with warning pricing: Karpenter reads prices in eu-central-1 and cannot: An error occurred (AccessDeniedException)"
	manifest["status"] = map[string]any{"phase": "Succeeded", "containerStatuses": []any{map[string]any{
		"name": "aws", "state": map[string]any{"terminated": map[string]any{"exitCode": 0, "reason": "Completed", "message": warning + "\n"}},
	}}}
	rsp := run(t, aRequest(t).observing(observed).build())
	if c := conditionsOf(rsp)["AccessCheckReady"]; c.Status != fnv1.Status_STATUS_CONDITION_TRUE {
		t.Errorf("AccessCheckReady %v, want True: a warning does not fail the check", c)
	}
	if msg := conditionMessage(rsp, "AccessCheckReady"); !strings.Contains(msg, "access-check: "+warning) {
		t.Errorf("AccessCheckReady %q, want it to carry the warning", msg)
	}
}

// TestNodeClassValidationReachesTheClaim: once the controller runs,
// Karpenter validates each EC2NodeClass itself and reports it in the
// class's ValidationSucceeded condition (karpenter-provider-aws v1.15.0
// pkg/controllers/nodeclass/validation.go: reason
// CreateFleetAuthCheckFailed, message "Controller isn't authorized to call
// ec2:CreateFleet: ..."); the claim shows it, without withholding anything.
func TestNodeClassValidationReachesTheClaim(t *testing.T) {
	observed := readyAt(t, "1.15.0", func(b *requestBuilder) *requestBuilder { return b })
	rsp := run(t, aRequest(t).observing(observed).build())
	if c := conditionsOf(rsp)["NodeClassesValidated"]; c.Status != fnv1.Status_STATUS_CONDITION_TRUE {
		t.Errorf("every class validated: NodeClassesValidated %v, want True", c)
	}
	manifest := observed["observe-ec2nodeclass-private"]["status"].(map[string]any)["atProvider"].(map[string]any)["manifest"].(map[string]any)
	says := "Controller isn't authorized to call ec2:CreateFleet: UnauthorizedOperation: You are not authorized to perform this operation."
	manifest["status"] = map[string]any{"conditions": []any{
		map[string]any{"type": "ValidationSucceeded", "status": "False", "reason": "CreateFleetAuthCheckFailed", "message": says},
		map[string]any{"type": "Ready", "status": "False", "reason": "UnhealthyDependents", "message": "ValidationSucceeded=False"},
	}}
	rsp = run(t, aRequest(t).observing(observed).build())
	c := conditionsOf(rsp)["NodeClassesValidated"]
	if c != (cond{fnv1.Status_STATUS_CONDITION_FALSE, "ValidationFailed"}) {
		t.Errorf("Karpenter refuses the private class: NodeClassesValidated %v, want False/ValidationFailed", c)
	}
	if msg := conditionMessage(rsp, "NodeClassesValidated"); !strings.Contains(msg, "private: CreateFleetAuthCheckFailed: "+says) {
		t.Errorf("NodeClassesValidated %q, want Karpenter's reason and words", msg)
	}
	checkNothingDropped(t, observed, rsp)
}

// checksOf are the access checks rsp composes, by composed resource name:
// the Pod each carries.
func checksOf(rsp *fnv1.RunFunctionResponse) map[string]string {
	out := map[string]string{}
	for name, r := range rsp.GetDesired().GetResources() {
		if !cluster.IsCheckName(resource.Name(name)) {
			continue
		}
		m := r.GetResource().AsMap()
		out[name] = m["spec"].(map[string]any)["forProvider"].(map[string]any)["manifest"].(map[string]any)["metadata"].(map[string]any)["name"].(string)
	}
	return out
}

// endedAt sets when the Pod an observed access check carries ended.
func endedAt(obj map[string]any, at time.Time) map[string]any {
	manifest := obj["status"].(map[string]any)["atProvider"].(map[string]any)["manifest"].(map[string]any)
	manifest["status"].(map[string]any)["containerStatuses"].([]any)[0].(map[string]any)["state"].(map[string]any)["terminated"].(map[string]any)["finishedAt"] = at.Format(time.RFC3339)
	return obj
}

// TestRunAnnotationBounded: the re-run annotation is no flood. After a
// pass, new values within the platform's minimum interval start no Pod:
// the check stays the Pod that passed, AccessCheckReady says until when,
// and no event is sent for it; once the interval is over, one value starts
// one new Pod. After a failure, a new value starts one new attempt at once,
// and values asked for while it runs start nothing more. Each Pod is
// composed in an Object of its own, and the Object of the Pod it
// supersedes is no longer desired, so Crossplane deletes it and its Pod.
func TestRunAnnotationBounded(t *testing.T) {
	passed := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	at := func(now time.Time, req *fnv1.RunFunctionRequest) *fnv1.RunFunctionResponse {
		t.Helper()
		return runAt(t, now, req)
	}
	// The claim shows AccessCheckReady as the function left it: an event
	// would be a transition only.
	asking := func(value string, observed map[resource.Name]map[string]any, ready bool) *fnv1.RunFunctionRequest {
		b := aRequest(t).withXRAnnotation(cluster.RunAnnotation, value).observing(observed)
		if ready {
			b = b.withXRCondition(sequence.AccessCheckReady, "True", sequence.ReasonAvailable)
		} else {
			b = b.withXRCondition(sequence.AccessCheckReady, "False", sequence.ReasonCreating)
		}
		return b.build()
	}
	events := func(rsp *fnv1.RunFunctionResponse) (n int) {
		for _, r := range rsp.GetResults() {
			if strings.HasPrefix(r.GetMessage(), sequence.AccessCheckReady+":") {
				n++
			}
		}
		return n
	}

	observed := readyAt(t, "1.15.0", func(b *requestBuilder) *requestBuilder { return b })
	observed[cluster.AccessCheck] = endedAt(observed[cluster.AccessCheck], passed)
	first := map[string]string{string(cluster.AccessCheck): checksOf(run(t, aRequest(t).observing(observed).build()))[string(cluster.AccessCheck)]}

	// Values within the hour after the pass: nothing starts.
	for i, after := range []time.Duration{time.Second, time.Minute, 10 * time.Minute, 59 * time.Minute} {
		rsp := at(passed.Add(after), asking(fmt.Sprintf("within-%d", i), observed, true))
		if diff := cmp.Diff(first, checksOf(rsp)); diff != "" {
			t.Errorf("a new value %s after a pass must start no Pod (-want, +got):\n%s", after, diff)
		}
		msg := conditionMessage(rsp, sequence.AccessCheckReady)
		if !strings.Contains(msg, "waits") || !strings.Contains(msg, passed.Add(time.Hour).Format(time.RFC3339)) {
			t.Errorf("%s after a pass: AccessCheckReady %q, want it to say the run waits until %s", after, msg, passed.Add(time.Hour).Format(time.RFC3339))
		}
		if n := events(rsp); n != 0 {
			t.Errorf("%s after a pass: %d AccessCheckReady events, want none", after, n)
		}
		if ttl, left := rsp.GetMeta().GetTtl().AsDuration(), time.Hour-after; ttl > left {
			t.Errorf("%s after a pass: TTL %s, want at most the %s until the run is due", after, ttl, left)
		}
	}

	// The interval is over: one value starts one Pod, in an Object of its
	// own; the Object of the Pod that passed is no longer desired.
	rsp := at(passed.Add(time.Hour+time.Second), asking("after-the-hour", observed, true))
	second := checksOf(rsp)
	if len(second) != 1 || second[string(cluster.AccessCheck)] != "" || slices.Contains(slices.Collect(maps.Values(second)), first[string(cluster.AccessCheck)]) {
		t.Fatalf("a value after the interval: checks %v, want one new Pod in an Object of its own, and not %v", second, first)
	}

	// The new Pod is refused by AWS: a new value starts one new attempt at
	// once, and supersedes the failed one.
	observed = (fakeProviders{t: t, account: account}).observe(rsp, true)
	for name := range second {
		observed[resource.Name(name)] = endedAt(failedCheck(observed[resource.Name(name)], cluster.CheckQueue,
			"An error occurred (AccessDenied) when calling the GetQueueUrl operation: explicit deny"), passed.Add(time.Hour+time.Minute))
	}
	rsp = at(passed.Add(time.Hour+2*time.Minute), asking("after-the-failure", observed, false))
	third := checksOf(rsp)
	if len(third) != 1 || slices.Contains(slices.Collect(maps.Values(third)), slices.Collect(maps.Values(second))[0]) {
		t.Fatalf("a value after a failure: checks %v, want one new Pod, not %v", third, second)
	}
	for name := range second {
		if _, ok := third[name]; ok {
			t.Errorf("the failed check's Object %s is still desired: its Pod would be left behind", name)
		}
	}

	// While that attempt runs, more values start nothing more.
	observed = (fakeProviders{t: t, account: account}).observe(rsp, false)
	for i := range 5 {
		rsp := at(passed.Add(time.Hour+3*time.Minute), asking(fmt.Sprintf("while-it-runs-%d", i), observed, false))
		if diff := cmp.Diff(third, checksOf(rsp)); diff != "" {
			t.Errorf("value %d while the new attempt runs must start no Pod (-want, +got):\n%s", i, diff)
		}
	}
}

// observedComposed is observed as the SDK reads it.
func observedComposed(t *testing.T, observed map[resource.Name]map[string]any) map[resource.Name]resource.ObservedComposed {
	t.Helper()
	out := map[resource.Name]resource.ObservedComposed{}
	for n, o := range observed {
		out[n] = resource.ObservedComposed{Resource: &cd.Unstructured{Unstructured: unstructured.Unstructured{Object: o}}}
	}
	return out
}

// without is observed but name.
func without(observed map[resource.Name]map[string]any, name resource.Name) map[resource.Name]map[string]any {
	out := maps.Clone(observed)
	delete(out, name)
	return out
}

// superseded tells whether the observed n is an access check whose Pod
// rsp composes no more: Crossplane may delete it, and its Pod goes with
// it. The Pod rsp composes (if the steps let it yet) is another, in an
// Object of its own.
func superseded(n resource.Name, observed map[string]any, rsp *fnv1.RunFunctionResponse) bool {
	if !cluster.IsCheckName(n) {
		return false
	}
	pod, _, _ := unstructured.NestedString(observed, "spec", "forProvider", "manifest", "metadata", "name")
	return !slices.Contains(slices.Collect(maps.Values(checksOf(rsp))), pod)
}

// byStepName is observed with its access check under access-check, the
// name the steps know it by.
func byStepName(observed map[resource.Name]map[string]any) map[resource.Name]map[string]any {
	out := map[resource.Name]map[string]any{}
	for n, o := range observed {
		if cluster.IsCheckName(n) {
			n = cluster.AccessCheck
		}
		out[n] = o
	}
	return out
}

// runAt is one reconcile of req by the function at time now, which must
// not refuse it.
func runAt(t *testing.T, now time.Time, req *fnv1.RunFunctionRequest) *fnv1.RunFunctionResponse {
	t.Helper()
	f := &Function{log: logging.NewNopLogger(), clock: func() time.Time { return now }}
	rsp, _, err := fetching(context.Background(), f.RunFunction, req)
	if err != nil {
		t.Fatal(err)
	}
	if msg := fatal(rsp); msg != "" {
		t.Fatal(msg)
	}
	return rsp
}
