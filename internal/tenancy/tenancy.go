// Package tenancy decides whether a claim may act on the cluster it names:
// the platform lists, per cluster, its account and the tenant namespaces
// that may claim it, and refuses everything else. One tenant can never
// install Karpenter, or reuse the AWS names of, another tenant's cluster.
package tenancy

import (
	"fmt"
	"slices"

	"github.com/do-now/function-karpenter/internal/spec"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Check refuses a claim from namespace for a cluster the platform has not
// given to that namespace, or naming a node role outside the cluster's
// account. namespace is empty for an XR created without a claim: such XRs
// are the platform's own and need only a declared cluster.
func Check(c *spec.Config, namespace string) field.ErrorList {
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
	if namespace != "" && !slices.Contains(cluster.Namespaces, namespace) {
		errs = append(errs, field.Forbidden(name, fmt.Sprintf("claims from namespace %q may not target cluster %q", namespace, c.Spec.Cluster.Name)))
	}
	if c.NodeRole.Account != cluster.Account {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "nodeIdentity", "roleArn"),
			fmt.Sprintf("the node role is in account %s; cluster %q is in account %s", c.NodeRole.Account, c.Spec.Cluster.Name, cluster.Account)))
	}
	return errs
}
