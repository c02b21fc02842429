//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// builtFor is the Karpenter version a Kustomization's Object carries (KARPENTER_VERSION).
func builtFor(o *unstructured.Unstructured) string {
	v, _, _ := unstructured.NestedString(o.Object, "spec", "forProvider", "manifest", "spec", "postBuild", "substitute", "KARPENTER_VERSION")
	return v
}

// Scenario 8: a claim Ready at Karpenter 1.14.1 is upgraded to 1.15.0 on the real control plane,
// with the example Composition's input (no feature gate, so both versions' controller policies
// are the same document). The controller's chart moves at once and the condition says why; the
// node pools stay at 1.14.1 while the claimed cluster's Flux has not made the controller Ready at
// 1.15.0, and move once it has; the claim shows VersionReady Upgrading with the versions and
// what it waits on, then Current. Nothing is deleted or re-created. A downgrade is then refused,
// naming spec.version, and changes nothing.
func TestUpgrade(t *testing.T) {
	timed(t)
	c := newKarpenterFrom(t, claimAPI, "team-a", "karpenter", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "1.14.1", "spec", "version")
	})
	c.walkToReady()
	c.waitCondition("VersionReady", "True", react, "Karpenter 1.14.1")
	before, _ := c.composed()
	for _, n := range []string{"controller-kustomization", "nodes-kustomization"} {
		if v := builtFor(before[n]); v != "1.14.1" {
			t.Fatalf("Ready at 1.14.1, %s carries %q", n, v)
		}
	}
	policy, _, _ := unstructured.NestedString(before["controller-role-policy"].Object, "spec", "forProvider", "policy")

	// The claimed cluster's Flux will not have the new chart Ready until the test says so.
	c.report(want{state: unready, message: "HelmRelease/karpenter/karpenter status: 'Progressing'"}, "controller-kustomization")
	claim := c.get()
	_ = unstructured.SetNestedField(claim.Object, "1.15.0", "spec", "version")
	if err := c.update(claim); err != nil {
		t.Fatalf("cannot upgrade the claim: %v", err)
	}
	c.waitCondition("VersionReady", "False", converge, "1.14.1 → 1.15.0",
		"Karpenter 1.15.0's controller policy is 1.14.1's, so the controller follows at once",
		"waiting for controller-kustomization to be Ready at 1.15.0")
	if cond := c.condition("VersionReady"); cond["reason"] != "Upgrading" {
		t.Errorf("VersionReady reason %v, want Upgrading", cond["reason"])
	}
	c.waitBuiltFor("controller-kustomization", "1.15.0", react)
	// Let Crossplane reconcile a few more times: the node pools must stay where they are.
	time.Sleep(5 * time.Second)
	during, _ := c.composed()
	if v := builtFor(during["nodes-kustomization"]); v != "1.14.1" {
		t.Errorf("the node pools moved to %q before the controller was Ready at 1.15.0", v)
	}
	if got, _, _ := unstructured.NestedString(during["controller-role-policy"].Object, "spec", "forProvider", "policy"); got != policy {
		t.Error("the role policy changed, though 1.14.1's and 1.15.0's are the same document")
	}
	if ready := condition(c.get(), "Ready"); ready == nil || ready["status"] != "False" {
		t.Errorf("the claim is Ready during the upgrade: %v", ready)
	}

	c.finishUpgrade("1.15.0")

	after, _ := c.composed()
	checkSurvived(t, "by the upgrade", before, after)
	if len(after) != len(before) {
		t.Errorf("%d composed resources before the upgrade, %d after", len(before), len(after))
	}

	// Back to 1.14.1: refused, nothing changes.
	claim = c.get()
	_ = unstructured.SetNestedField(claim.Object, "1.14.1", "spec", "version")
	if err := c.update(claim); err != nil {
		t.Fatalf("cannot change the claim: %v", err)
	}
	c.wait(react, "the downgrade refused", func() (bool, error) {
		a := c.condition("Accepted")
		msg, _ := a["message"].(string)
		return a["status"] == "False" && a["reason"] == "Refused" &&
			strings.Contains(msg, "spec.version: Forbidden: a downgrade from 1.15.0, which the controller was last built for, is refused"), nil
	})
	time.Sleep(5 * time.Second)
	refused, _ := c.composed()
	if v := builtFor(refused["controller-kustomization"]); v != "1.15.0" {
		t.Errorf("after a refused downgrade the controller's Kustomization carries %q, want 1.15.0", v)
	}
}

// waitBuiltFor waits until the Kustomization Object name carries Karpenter version v.
func (c *karpenter) waitBuiltFor(name, v string, timeout time.Duration) {
	c.t.Helper()
	c.wait(timeout, name+" at "+v, func() (bool, error) {
		got, _ := c.composed()
		return builtFor(got[name]) == v, nil
	})
}

// finishUpgrade has the claimed cluster's Flux report the new chart Ready, then waits until the
// node pools follow to v and the claim is Current and Ready.
func (c *karpenter) finishUpgrade(v string) {
	c.t.Helper()
	c.markReady("controller-kustomization")
	c.waitBuiltFor("nodes-kustomization", v, converge)
	c.waitCondition("VersionReady", "True", converge, "Karpenter "+v)
	c.waitCondition("Ready", "True", converge)
}
