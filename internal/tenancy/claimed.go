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
	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/scope"
	"github.com/do-now/function-karpenter/internal/sequence"
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

// Requirements selects, for every API, every controller role and every
// lease composed for c's cluster: one cluster holds one Karpenter,
// whichever API asked for it. A namespaced one is looked for in every
// namespace.
func Requirements(c *config.Config) map[string]*fnv1.ResourceSelector {
	out := make(map[string]*fnv1.ResourceSelector, 2*len(scope.APIs))
	for _, api := range scope.APIs {
		for name, what := range map[string]struct {
			built, kind string
			resource    resource.Name
		}{
			Requirement(api):      {scope.IAM, iam.Role_Kind, awsres.ControllerRole}, // every API composes the role
			LeaseRequirement(api): {scope.Kubernetes, scope.ObjectKind, sequence.Lease},
		} {
			gv, _ := api.GroupVersion(what.built)
			out[name] = &fnv1.ResourceSelector{
				ApiVersion: gv.String(),
				Kind:       what.kind,
				Match: &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{Labels: map[string]string{
					config.ClusterLabel:    config.KubernetesName(c.Spec.Cluster.Name),
					sequence.ResourceLabel: string(what.resource),
				}}},
			}
		}
	}
	return out
}

// Claimed refuses xr when another XR, of either API, already holds its
// cluster by a controller role: roles are those Requirements found. Only a
// role composed for a namespace the tenancy gives the cluster to (or for
// the platform's own XR) counts: a labelled Role anywhere else cannot squat
// the cluster. Two XRs that composed a role before leases existed keep the
// old rule: the older role holds. The holder is named only to the
// namespaces the tenancy gives the cluster to.
func Claimed(c *config.Config, xr scope.XR, roles []resource.Required) *field.Error {
	tc, _ := c.Tenant()
	var own, holder *resource.Required
	for i := range roles {
		r := &roles[i]
		if ownedBy(r, xr) {
			own = r
			continue
		}
		if !eligible(r, tc) {
			continue
		}
		if holder == nil || older(r, holder) {
			holder = r
		}
	}
	if holder == nil || (own != nil && older(own, holder)) {
		return nil
	}
	return refusal(c, tc, holder)
}

// refusal refuses c's cluster, held by what holder was composed for, which
// it names only to namespaces the tenancy gives the cluster to.
func refusal(c *config.Config, tc v1beta1.TenantCluster, holder *resource.Required) *field.Error {
	by := ""
	if ns := c.Owner.Namespace; ns == "" || slices.Contains(tc.Namespaces, ns) {
		by = " by " + heldBy(holder)
	}
	return field.Forbidden(field.NewPath("spec", "cluster", "name"),
		fmt.Sprintf("cluster %q is already claimed%s: one Karpenter per cluster", c.Spec.Cluster.Name, by))
}

// eligible tells whether a controller role or a lease may hold cluster: it
// was composed for an XR (Crossplane labels what it composes), of a
// namespace the tenancy gives the cluster to, or of no namespace (the
// platform's own XR).
func eligible(holder *resource.Required, cluster v1beta1.TenantCluster) bool {
	l := holder.Resource.GetLabels()
	if l[compositeLabel] == "" {
		return false
	}
	ns := holder.Resource.GetNamespace() // a namespaced XR's
	if ns == "" {
		ns = l[claimNamespaceLabel] // a claim's; empty for the platform's XR
	}
	return ns == "" || slices.Contains(cluster.Namespaces, ns)
}

// heldBy names who holds a cluster: the claim, or the XR, its role or lease
// was composed for.
func heldBy(holder *resource.Required) string {
	l := holder.Resource.GetLabels()
	if l[claimNameLabel] != "" {
		return fmt.Sprintf("claim %s/%s", l[claimNamespaceLabel], l[claimNameLabel])
	}
	kind := "XR"
	for _, api := range scope.APIs {
		for _, built := range []string{scope.IAM, scope.Kubernetes} { // a role, a lease
			if gv, _ := api.GroupVersion(built); gv.String() == holder.Resource.GetAPIVersion() {
				kind = api.XR.Kind
			}
		}
	}
	if ns := holder.Resource.GetNamespace(); ns != "" {
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
