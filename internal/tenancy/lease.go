package tenancy

import (
	"fmt"
	"slices"
	"time"

	"github.com/crossplane/function-sdk-go/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/scope"
	"github.com/do-now/function-karpenter/internal/sequence"
)

// IsLeaseRequirement tells whether a requirement Requirements names is one
// of leases.
func IsLeaseRequirement(name string) bool {
	return slices.ContainsFunc(scope.APIs, func(a scope.API) bool { return name == LeaseRequirement(a) })
}

// LeaseRequirement names what the function asks Crossplane for about one
// API: the leases composed for the claimed cluster by that API's XRs.
func LeaseRequirement(api scope.API) string { return "cluster-leases-" + api.Key }

// Holds decides whether xr holds its cluster, from the controller roles and
// the leases Requirements found, what xr itself composed (observed), and
// the time now:
//   - while another XR's role holds the cluster (Claimed), xr is refused;
//   - an XR that composed anything but its lease holds it: the holder
//     keeps it, whatever becomes of leases;
//   - else the cluster goes to the first lease (by creation, then
//     namespace and name) among xr's own and those composed for a
//     namespace the tenancy gives the cluster to, or for the platform's
//     own XR; xr's own lease must exist and be Settle old, so that every
//     XR that asked at the same instant is seen.
//
// A refused XR composes nothing more; its lease stays, and it holds the
// cluster once it is first (the holder deleted, its role gone).
func Holds(c *config.Config, xr scope.XR, roles, leases []resource.Required, observed map[resource.Name]resource.ObservedComposed, now time.Time) (sequence.Hold, *field.Error) {
	if err := Claimed(c, xr, roles); err != nil {
		return sequence.Hold{}, err
	}
	for n := range observed {
		if n != sequence.Lease {
			// It composed more than its lease: it held the cluster.
			return sequence.Hold{Held: true}, nil
		}
	}
	name := c.Spec.Cluster.Name
	lease, ok := observed[sequence.Lease]
	if !ok {
		return sequence.Hold{Waiting: fmt.Sprintf("asking for cluster %q: its lease is not observed yet", name)}, nil
	}
	own := &resource.Required{Resource: &lease.Resource.Unstructured}
	tc, _ := c.Tenant()
	first := own
	for i := range leases {
		l := &leases[i]
		if !ownedBy(l, xr) && eligible(l, tc) && older(l, first) {
			first = l
		}
	}
	if first != own {
		return sequence.Hold{}, refusal(c, tc, first)
	}
	if age := now.Sub(lease.Resource.GetCreationTimestamp().Time); age < sequence.Settle {
		return sequence.Hold{Waiting: fmt.Sprintf("taking cluster %q once its lease is %s old, so that a claim made at the same instant is seen", name, sequence.Settle)}, nil
	}
	return sequence.Hold{Held: true}, nil
}

// ownedBy tells whether r was composed for xr: an XR's resources are in its
// namespace (none for a cluster-scoped XR), so two namespaced XRs of one
// name are told apart.
func ownedBy(r *resource.Required, xr scope.XR) bool {
	return r.Resource.GetLabels()[compositeLabel] == xr.Name && r.Resource.GetNamespace() == xr.Namespace
}
