package tenancy

import (
	"fmt"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	iam "github.com/upbound/provider-aws/v2/apis/cluster/iam/v1beta1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/do-now/function-karpenter/internal/awsres"
	"github.com/do-now/function-karpenter/internal/sequence"
	"github.com/do-now/function-karpenter/internal/spec"
)

// Requirement names the resources the function asks Crossplane for: the
// controller roles composed for the claimed cluster, by any XR.
const Requirement = "cluster-controller-roles"

// Labels Crossplane sets on every composed resource.
const (
	compositeLabel      = "crossplane.io/composite"
	claimNameLabel      = "crossplane.io/claim-name"
	claimNamespaceLabel = "crossplane.io/claim-namespace"
)

// Selector selects every controller role composed for c's cluster: one
// cluster holds one Karpenter, so another XR's role means the cluster is
// taken.
func Selector(c *spec.Config) *fnv1.ResourceSelector {
	return &fnv1.ResourceSelector{
		ApiVersion: iam.Role_GroupVersionKind.GroupVersion().String(),
		Kind:       iam.Role_Kind,
		Match: &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{Labels: map[string]string{
			spec.ClusterLabel:      spec.KubernetesName(c.Spec.Cluster.Name),
			sequence.ResourceLabel: string(awsres.ControllerRole),
		}}},
	}
}

// Claimed refuses XR xr when another XR already holds its cluster: roles
// are the controller roles Selector found. Two XRs created at once may both
// have a role for a moment; the one whose role is older keeps the cluster,
// the other is refused and composes nothing more (what it composed stays,
// for the platform to clean up).
func Claimed(c *spec.Config, xr string, roles []resource.Required) *field.Error {
	var own, holder *resource.Required
	for i := range roles {
		r := &roles[i]
		if r.Resource.GetLabels()[compositeLabel] == xr {
			own = r
			continue
		}
		if holder == nil || older(r, holder) {
			holder = r
		}
	}
	if holder == nil || (own != nil && older(own, holder)) {
		return nil
	}
	l := holder.Resource.GetLabels()
	by := fmt.Sprintf("XKarpenter %s", l[compositeLabel])
	if l[claimNameLabel] != "" {
		by = fmt.Sprintf("claim %s/%s", l[claimNamespaceLabel], l[claimNameLabel])
	}
	return field.Forbidden(field.NewPath("spec", "cluster", "name"),
		fmt.Sprintf("cluster %q is already claimed by %s: one Karpenter per cluster", c.Spec.Cluster.Name, by))
}

// older orders roles by creation, then name, so every XR agrees which one
// came first.
func older(a, b *resource.Required) bool {
	ta, tb := a.Resource.GetCreationTimestamp(), b.Resource.GetCreationTimestamp()
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	return a.Resource.GetName() < b.Resource.GetName()
}
