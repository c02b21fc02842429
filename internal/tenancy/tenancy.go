// Package tenancy decides whether a claim may act on the cluster it names:
// the platform lists, per cluster, its account and the tenant namespaces
// that may claim it, and refuses everything else. One tenant can never
// install Karpenter, or reuse the AWS names of, another tenant's cluster.
package tenancy

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/scope"
)

// Check refuses a claim from namespace for a cluster the platform has not
// given to that namespace, or one that asks for a region or node identity
// other than the platform declares for the cluster. namespace is empty for
// an XR created without a claim: such XRs are the platform's own and need
// only a declared cluster.
func Check(c *config.Config, namespace string) field.ErrorList {
	if c.Input.Tenancy == nil {
		return field.ErrorList{field.Forbidden(field.NewPath("input", "tenancy"),
			"no tenancy is declared, so no cluster may be claimed: list the clusters and the namespaces that may claim them")}
	}
	name := field.NewPath("spec", "cluster", "name")
	cluster, ok := c.Tenant()
	if !ok {
		return field.ErrorList{field.Forbidden(name, fmt.Sprintf("cluster %q is not declared in the platform's tenancy", c.Spec.Cluster.Name))}
	}
	var errs field.ErrorList
	member := namespace == "" || slices.Contains(cluster.Namespaces, namespace)
	if !member {
		errs = append(errs, field.Forbidden(name, fmt.Sprintf("claims from namespace %q may not target cluster %q", namespace, c.Spec.Cluster.Name)))
	}
	req := c.Requested
	for _, f := range []struct {
		path            *field.Path
		asked, platform string
	}{
		{field.NewPath("spec", "cluster", "region"), req.Region, cluster.Region},
		{field.NewPath("spec", "nodeIdentity", "roleArn"), req.NodeIdentity.RoleARN, cluster.NodeIdentity.RoleARN},
		{field.NewPath("spec", "nodeIdentity", "instanceProfile"), req.NodeIdentity.InstanceProfile, cluster.NodeIdentity.InstanceProfile},
	} {
		if f.asked == "" || f.asked == f.platform {
			continue
		}
		msg := fmt.Sprintf("the platform decides it for cluster %q: leave it unset", c.Spec.Cluster.Name)
		if member {
			// Only those the cluster is given to may learn its facts.
			msg = fmt.Sprintf("the platform decides it for cluster %q (%s): leave it unset or repeat it", c.Spec.Cluster.Name, f.platform)
		}
		errs = append(errs, field.Forbidden(f.path, msg))
	}
	return errs
}

// Pinned refuses an XR that chooses its own Composition or revision: with
// compositionUpdatePolicy Manual, or a revision or Composition selector, a
// claim keeps an older or another function input, and later tightening of
// the platform's policy (a namespace removed from the tenancy, a lower
// ceiling, a boundary added) never reaches it. The XRDs enforce the
// Composition (enforcedCompositionRef); Crossplane itself writes
// compositionRef and compositionRevisionRef, so those are not judged here.
// Claims copy these fields to their XR (Crossplane v2.4.2
// internal/controller/apiextensions/claim/syncer_ssa.go, which propagates
// xcrd.PropagateSpecProps; compositionRef not when the XRD enforces one).
func Pinned(xr map[string]any, api scope.API) field.ErrorList {
	fields, _, _ := unstructured.NestedMap(xr, api.CrossplaneFields...)
	p := field.NewPath(api.CrossplaneFields[0], api.CrossplaneFields[1:]...)
	var errs field.ErrorList
	if pol, _ := fields["compositionUpdatePolicy"].(string); pol == "Manual" {
		errs = append(errs, field.Forbidden(p.Child("compositionUpdatePolicy"),
			"must be Automatic: the platform's latest Composition revision applies to every claim"))
	}
	for _, f := range []string{"compositionRevisionSelector", "compositionSelector"} {
		if _, ok := fields[f]; ok {
			errs = append(errs, field.Forbidden(p.Child(f), "must not be set: the platform chooses the Composition and its revision"))
		}
	}
	return errs
}
