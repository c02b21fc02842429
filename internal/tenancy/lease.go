package tenancy

import (
	"fmt"
	"time"

	"github.com/crossplane/function-sdk-go/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/sequence"
)

// Holds decides whether xr holds its cluster, from the rivals Ask found,
// what xr itself composed (own: only what xr controls, see Own), and the
// time now:
//   - while another XR's role holds the cluster (Claimed), xr is refused;
//   - an XR that composed anything but its lease holds it: the holder
//     keeps it, whatever becomes of leases;
//   - else the cluster goes to the first lease (by creation, then
//     namespace and name) among xr's own and the rivals'; xr's own lease
//     must exist and be Settle old, so that every XR that asked at the
//     same instant is seen.
//
// A refused XR composes nothing more; its lease stays, and it holds the
// cluster once it is first (the holder deleted, its role gone). When the
// rivals could not be read (Overflow), a holder keeps the cluster and any
// other XR is refused with the reason.
func Holds(c *config.Config, rivals Rivals, own map[resource.Name]resource.ObservedComposed, now time.Time) (sequence.Hold, *field.Error) {
	holding := false
	for n := range own {
		// It composed more than its lease: it held the cluster.
		holding = holding || n != sequence.Lease
	}
	if rivals.Overflow != "" {
		if holding {
			return sequence.Hold{Held: true}, nil
		}
		return sequence.Hold{}, field.Forbidden(field.NewPath("spec", "cluster", "name"), rivals.Overflow)
	}
	if err := Claimed(c, own, rivals); err != nil {
		return sequence.Hold{}, err
	}
	if holding {
		return sequence.Hold{Held: true}, nil
	}
	name := c.Spec.Cluster.Name
	lease, ok := own[sequence.Lease]
	if !ok {
		return sequence.Hold{Waiting: fmt.Sprintf("asking for cluster %q: its lease is not observed yet", name)}, nil
	}
	mine := &resource.Required{Resource: &lease.Resource.Unstructured}
	if len(rivals.Leases) > 0 && older(&rivals.Leases[0], mine) {
		return sequence.Hold{}, refusal(c)
	}
	if age := now.Sub(lease.Resource.GetCreationTimestamp().Time); age < sequence.Settle {
		return sequence.Hold{Waiting: fmt.Sprintf("taking cluster %q once its lease is %s old, so that a claim made at the same instant is seen", name, sequence.Settle)}, nil
	}
	return sequence.Hold{Held: true}, nil
}
