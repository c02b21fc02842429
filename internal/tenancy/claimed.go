package tenancy

import (
	"fmt"
	"slices"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	iam "github.com/upbound/provider-aws/v2/apis/cluster/iam/v1beta1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/do-now/function-karpenter/apis/input/v1beta1"
	"github.com/do-now/function-karpenter/internal/awsres"
	"github.com/do-now/function-karpenter/internal/scope"
	"github.com/do-now/function-karpenter/internal/sequence"
	"github.com/do-now/function-karpenter/internal/spec"
)

// Labels Crossplane sets on every composed resource.
const (
	compositeLabel      = "crossplane.io/composite"
	claimNameLabel      = "crossplane.io/claim-name"
	claimNamespaceLabel = "crossplane.io/claim-namespace"
)

// Requirement names what the function asks Crossplane for about one API:
// the controller roles composed for the claimed cluster by that API's XRs.
func Requirement(api scope.API) string { return "cluster-controller-roles-" + api.Key }

// Requirements selects, for every API, every controller role composed for
// c's cluster: one cluster holds one Karpenter, whichever API asked for it,
// so another XR's role means the cluster is taken. A namespaced role is
// looked for in every namespace.
func Requirements(c *spec.Config) map[string]*fnv1.ResourceSelector {
	out := make(map[string]*fnv1.ResourceSelector, len(scope.APIs))
	for _, api := range scope.APIs {
		gv, _ := api.GroupVersion(scope.IAM) // every API composes the role
		out[Requirement(api)] = &fnv1.ResourceSelector{
			ApiVersion: gv.String(),
			Kind:       iam.Role_Kind,
			Match: &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{Labels: map[string]string{
				spec.ClusterLabel:      spec.KubernetesName(c.Spec.Cluster.Name),
				sequence.ResourceLabel: string(awsres.ControllerRole),
			}}},
		}
	}
	return out
}

// Claimed refuses xr when another XR, of either API, already holds its
// cluster: roles are the controller roles Requirements found. Two XRs
// created at once may both have a role for a moment; the one whose role is
// older keeps the cluster, the other is refused and composes nothing more.
// Only a role composed for a namespace the tenancy gives the cluster to (or
// for the platform's own XR) counts: a labelled Role anywhere else cannot
// squat the cluster. The holder is named only to those namespaces.
//
// What it does not prevent (README, "Tenancy"): both racers' first steps
// carry the same AWS names, so deleting the loser deletes them.
func Claimed(c *spec.Config, xr scope.XR, roles []resource.Required) *field.Error {
	cluster, _ := c.Tenant()
	var own, holder *resource.Required
	for i := range roles {
		r := &roles[i]
		// An XR's role is in its namespace (none for a cluster-scoped XR),
		// so two namespaced XRs of one name are told apart.
		if r.Resource.GetLabels()[compositeLabel] == xr.Name && r.Resource.GetNamespace() == xr.Namespace {
			own = r
			continue
		}
		if !eligible(r, cluster) {
			continue
		}
		if holder == nil || older(r, holder) {
			holder = r
		}
	}
	if holder == nil || (own != nil && older(own, holder)) {
		return nil
	}
	by := ""
	if ns := c.Owner.Namespace; ns == "" || slices.Contains(cluster.Namespaces, ns) {
		by = " by " + heldBy(holder)
	}
	return field.Forbidden(field.NewPath("spec", "cluster", "name"),
		fmt.Sprintf("cluster %q is already claimed%s: one Karpenter per cluster", c.Spec.Cluster.Name, by))
}

// eligible tells whether a controller role may hold cluster: it was composed
// for an XR (Crossplane labels what it composes), of a namespace the tenancy
// gives the cluster to, or of no namespace (the platform's own XR).
func eligible(role *resource.Required, cluster v1beta1.TenantCluster) bool {
	l := role.Resource.GetLabels()
	if l[compositeLabel] == "" {
		return false
	}
	ns := role.Resource.GetNamespace() // a namespaced XR's
	if ns == "" {
		ns = l[claimNamespaceLabel] // a claim's; empty for the platform's XR
	}
	return ns == "" || slices.Contains(cluster.Namespaces, ns)
}

// heldBy names who holds a cluster: the claim, or the XR, its role was
// composed for.
func heldBy(role *resource.Required) string {
	l := role.Resource.GetLabels()
	if l[claimNameLabel] != "" {
		return fmt.Sprintf("claim %s/%s", l[claimNamespaceLabel], l[claimNameLabel])
	}
	kind := "XR"
	for _, api := range scope.APIs {
		if gv, _ := api.GroupVersion(scope.IAM); gv.String() == role.Resource.GetAPIVersion() {
			kind = api.XR.Kind
		}
	}
	if ns := role.Resource.GetNamespace(); ns != "" {
		return fmt.Sprintf("%s %s/%s", kind, ns, l[compositeLabel])
	}
	return fmt.Sprintf("%s %s", kind, l[compositeLabel])
}

// older orders roles by creation, then namespace and name, so every XR
// agrees which one came first.
func older(a, b *resource.Required) bool {
	ta, tb := a.Resource.GetCreationTimestamp(), b.Resource.GetCreationTimestamp()
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	ka := a.Resource.GetNamespace() + "/" + a.Resource.GetName()
	kb := b.Resource.GetNamespace() + "/" + b.Resource.GetName()
	return ka < kb
}
