// Package guard keeps a request whose cluster still runs Karpenter's nodes
// from being deleted by accident, when the platform asks for it (input
// deletionGuard): the function composes a Usage of the XR itself, with a
// reason and no user. Crossplane's webhook refuses the deletion of an
// object a Usage protects, answering with the first Usage's reason
// (crossplane v2.4.2 internal/webhook/protection/usage/handler.go,
// inUseMessage): a namespaced XR's deletion is refused to the tenant
// outright; a claim's is accepted, and the claim's controller, deleting its
// XR, is refused and says so on the claim (its Synced condition:
// internal/controller/apiextensions/claim/reconciler.go, errDeleteComposite).
//
// The tenant confirms by annotating its claim or namespaced XR with the
// platform's key, set to the cluster's name. Crossplane propagates no
// annotation from a claim being deleted, so the function reads the claim
// itself (a required resource). Confirmed, or once the pools report no
// node, the Usage is no longer composed; Crossplane deletes it, and its
// replayDeletion deletes the XR the deletion was attempted on
// (protection.crossplane.io/v1beta1 Usage, spec.replayDeletion).
package guard

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/do-now/function-karpenter/apis/v1alpha1"
	"github.com/do-now/function-karpenter/internal/config"
)

// Name is the guard's composed resource name. It is API.
const Name resource.Name = "deletion-guard"

// ClaimRequirement is the name the function asks Crossplane for the claim
// of a legacy XR under.
const ClaimRequirement = "deletion-guard-claim"

// APIVersion of the guard's Usage, as package usage composes its own.
const APIVersion = "protection.crossplane.io/v1beta1"

// ClaimSelector asks for the claim xr is bound to (its spec.claimRef, which
// Crossplane writes), when the platform guards deletions; ok is false
// otherwise, and for a namespaced XR, which has no claim.
func ClaimSelector(c *config.Config, xr *unstructured.Unstructured) (*fnv1.ResourceSelector, bool) {
	if c.Input.DeletionGuard == nil {
		return nil, false
	}
	ref, _, _ := unstructured.NestedStringMap(xr.Object, "spec", "claimRef")
	if ref["name"] == "" || ref["namespace"] == "" || ref["kind"] == "" {
		return nil, false
	}
	ns := ref["namespace"]
	return &fnv1.ResourceSelector{ApiVersion: ref["apiVersion"], Kind: ref["kind"], Namespace: &ns,
		Match: &fnv1.ResourceSelector_MatchName{MatchName: ref["name"]}}, true
}

// Confirmed tells whether the tenant confirmed the deletion: the platform's
// annotation, set to the cluster's name, on xr or on the claim Crossplane
// answered for ClaimRequirement.
func Confirmed(c *config.Config, xr *unstructured.Unstructured, req *fnv1.RunFunctionRequest) bool {
	g := c.Input.DeletionGuard
	if g == nil {
		return false
	}
	if xr.GetAnnotations()[g.Annotation] == c.Spec.Cluster.Name {
		return true
	}
	for _, it := range req.GetRequiredResources()[ClaimRequirement].GetItems() {
		claim := unstructured.Unstructured{Object: it.GetResource().AsMap()}
		if claim.GetAnnotations()[g.Annotation] == c.Spec.Cluster.Name {
			return true
		}
	}
	return false
}

// Usage is the guard to compose for xr, or nil: while the platform guards
// deletions, the tenant has not confirmed, and the pools report nodes, or
// report nothing while the guard exists already (an observation lost is no
// proof the nodes went). pools is what the claim reports of its pools.
func Usage(c *config.Config, xr *unstructured.Unstructured, pools map[string]v1alpha1.PoolStatus, observed map[resource.Name]resource.ObservedComposed, confirmed bool, labels map[string]string) *resource.DesiredComposed {
	g := c.Input.DeletionGuard
	if g == nil || confirmed {
		return nil
	}
	var nodes int64
	var counts []string
	reported := false
	for _, pool := range slices.Sorted(maps.Keys(pools)) {
		if n := pools[pool].Nodes; n != nil {
			reported = true
			nodes += *n
			if *n > 0 {
				counts = append(counts, fmt.Sprintf("%s %d", pool, *n))
			}
		}
	}
	_, exists := observed[Name]
	if nodes == 0 && (reported || !exists) {
		return nil
	}
	what := fmt.Sprintf("its pools report %d nodes (%s)", nodes, strings.Join(counts, ", "))
	if nodes == 0 {
		what = "its pools' nodes are not observed"
	}
	kind := xr.GetKind()
	if ref, _, _ := unstructured.NestedStringMap(xr.Object, "spec", "claimRef"); ref["kind"] != "" {
		kind = ref["kind"]
	}
	reason := fmt.Sprintf("cluster %s runs Karpenter's nodes: %s, which deleting this %s terminates; to confirm, annotate the %s %s=%s",
		c.Spec.Cluster.Name, what, kind, kind, g.Annotation, c.Spec.Cluster.Name)

	u := composed.New()
	u.SetAPIVersion(APIVersion)
	u.SetKind("ClusterUsage")
	ref := map[string]any{"name": xr.GetName()}
	// A namespaced XR's Usage lives with it, and names no namespace for
	// it: a Usage without "by" whose "of" names one, even its own, is
	// refused as cross-namespace (crossplane v2.4.2
	// cluster/crds/protection.crossplane.io_usages.yaml, spec's CEL rule;
	// seen refused by the API server in the e2e suite).
	if ns := xr.GetNamespace(); ns != "" {
		u.SetKind("Usage")
		u.SetNamespace(ns)
	}
	u.SetLabels(labels)
	u.Object["spec"] = map[string]any{
		"of":     map[string]any{"apiVersion": xr.GetAPIVersion(), "kind": xr.GetKind(), "resourceRef": ref},
		"reason": reason,
		// The deletion a tenant attempted goes ahead once the Usage goes.
		"replayDeletion": true,
	}
	// A guard is bookkeeping, not part of what the claim waits for.
	return &resource.DesiredComposed{Resource: u, Ready: resource.ReadyTrue}
}
