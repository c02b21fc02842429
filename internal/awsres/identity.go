package awsres

import (
	"fmt"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/function-sdk-go/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/do-now/function-karpenter/internal/config"
)

// CheckIdentity refuses a spec whose cluster name or region no longer match
// the AWS resources that exist: following the change would orphan the role
// and the queue, or recreate them elsewhere. The XRD refuses such updates
// at admission; this catches XRs that bypass it.
func CheckIdentity(c *config.Config, observed map[resource.Name]resource.ObservedComposed) field.ErrorList {
	var errs field.ErrorList
	name := field.NewPath("spec", "cluster", "name")
	if role, ok := observed[ControllerRole]; ok {
		if was := role.Resource.GetAnnotations()[meta.AnnotationKeyExternalName]; was != "" && was != c.Names.Role {
			errs = append(errs, field.Forbidden(name, fmt.Sprintf("is immutable: the controller role %q exists for another cluster name; delete the claim and create a new one", was)))
		}
	}
	if q, ok := observed[InterruptionQueue]; ok {
		if was, _ := q.Resource.GetString("spec.forProvider.region"); was != "" && was != c.Spec.Cluster.Region {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "cluster", "region"), fmt.Sprintf("is immutable: the interruption queue exists in %s", was)))
		}
		if was, _ := q.Resource.GetString("spec.forProvider.name"); len(errs) == 0 && was != "" && was != c.Names.Queue {
			errs = append(errs, field.Forbidden(name, fmt.Sprintf("is immutable: the interruption queue %q exists for another cluster name", was)))
		}
	}
	return errs
}
