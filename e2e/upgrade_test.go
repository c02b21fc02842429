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
