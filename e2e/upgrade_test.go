//go:build e2e

package e2e

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// builtFor is the Karpenter version a Kustomization's Object carries (KARPENTER_VERSION).
func builtFor(o *unstructured.Unstructured) string {
	v, _, _ := unstructured.NestedString(o.Object, "spec", "forProvider", "manifest", "spec", "postBuild", "substitute", "KARPENTER_VERSION")
	return v
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
