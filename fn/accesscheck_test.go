package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/google/go-cmp/cmp"

	"github.com/do-now/function-karpenter/internal/cluster"
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
		f := &Function{log: logging.NewNopLogger(), clock: func() time.Time { return finished.Add(after) }}
		rsp, _, err := fetching(context.Background(), f.RunFunction, req)
		if err != nil {
			t.Fatal(err)
		}
		if msg := fatal(rsp); msg != "" {
			t.Fatal(msg)
		}
		return rsp
	}
	pod := func(rsp *fnv1.RunFunctionResponse) (name, attempt string) {
		m := rsp.GetDesired().GetResources()[string(cluster.AccessCheck)].GetResource().AsMap()
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
	checkNothingDropped(t, observed, rsp)

	// The second attempt is what the Object carries now; AWS refuses it.
	observed = (fakeProviders{t: t, account: account}).observe(rsp, true)
	observed[cluster.AccessCheck] = failedAt(observed[cluster.AccessCheck], cluster.CheckQueue,
		"An error occurred (AccessDenied) when calling the GetQueueUrl operation: explicit deny in a service control policy")
	if name, n := pod(at(time.Hour, aRequest(t).observing(observed).build())); name != second || n != "2" {
		t.Errorf("a refusal by AWS: Pod %s attempt %s, want it to stay %s attempt 2", name, n, second)
	}
	if msg := conditionMessage(at(time.Hour, aRequest(t).observing(observed).build()), "AccessCheckReady"); !strings.Contains(msg, "interruption-queue: An error occurred (AccessDenied)") {
		t.Errorf("AccessCheckReady %q, want AWS's refusal", msg)
	}

	// Out of attempts: the platform allows two.
	observed[cluster.AccessCheck] = failedAt(observed[cluster.AccessCheck], cluster.CheckCredentials, noCredentials)
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
	checkNothingDropped(t, observed, rsp)

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
