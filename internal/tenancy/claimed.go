package tenancy

import (
	"fmt"

	"github.com/crossplane/function-sdk-go/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/do-now/function-karpenter/internal/awsres"
	"github.com/do-now/function-karpenter/internal/config"
)

// Claimed refuses xr when another XR, of either API, already holds its
// cluster by a controller role: rivals are those Ask found, each controlled
// by an XR that exists and asks for the cluster from a namespace the
// tenancy gives it to. Two XRs that composed a role before leases existed
// keep the old rule: the older role holds.
func Claimed(c *config.Config, own map[resource.Name]resource.ObservedComposed, rivals Rivals) *field.Error {
	if len(rivals.Roles) == 0 {
		return nil
	}
	holder := &rivals.Roles[0] // the oldest
	if r, ok := own[awsres.ControllerRole]; ok && older(&resource.Required{Resource: &r.Resource.Unstructured}, holder) {
		return nil
	}
	return refusal(c)
}

// refusal refuses c's cluster, held by another XR. It names no holder: a
// tenant learns nothing of another tenant's or the platform's objects
// (a name would be what a claim's spec.resourceRef needs to bind an XR).
func refusal(c *config.Config) *field.Error {
	return field.Forbidden(field.NewPath("spec", "cluster", "name"),
		fmt.Sprintf("cluster %q is already claimed: one Karpenter per cluster", c.Spec.Cluster.Name))
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
