package config

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/do-now/function-karpenter/apis/input/v1beta1"
)

// validatePins requires what only the platform moves: the Karpenter versions
// tenants may ask for, the version of claims that name none, the AMI
// release of pools that pin none, and the CNI's startup taints. A function release knows new versions and
// newer AMI releases; were any of these defaulted from what it knows, bumping
// the function would upgrade Karpenter and drift the nodes of every cluster
// at once. Pinned here, a release changes nothing until the platform moves a
// pin, platform-wide or cluster by cluster (tenancy.clusters[].defaultVersion,
// .amiAlias).
func validatePins(in v1beta1.Input) field.ErrorList {
	var errs field.ErrorList
	v := field.NewPath("input", "versions")
	if len(in.Versions.Allowed) == 0 {
		errs = append(errs, field.Required(v.Child("allowed"),
			"the platform lists the Karpenter versions tenants may ask for: a function release that knows a new one offers it to nobody until listed here"))
	}
	if in.Versions.Default == "" {
		errs = append(errs, field.Required(v.Child("default"),
			"the platform pins the Karpenter version of claims that name none: a function release never moves it (a cluster's own: tenancy.clusters[].defaultVersion)"))
	}
	if in.Nodes.DefaultAMIAlias == "" {
		errs = append(errs, field.Required(field.NewPath("input", "nodes", "defaultAmiAlias"),
			"the platform pins the AMI release of pools that pin none (al2023@vYYYYMMDD): a function release never moves it, so no node drifts until the platform does (a cluster's own: tenancy.clusters[].amiAlias)"))
	}
	if in.Nodes.StartupTaints == nil {
		errs = append(errs, field.Required(field.NewPath("input", "nodes", "startupTaints"),
			"the platform names the startup taints its CNI lifts (Cilium's node.cilium.io/agent-not-ready), [] for none: a change drifts every node, so no release picks them"))
	}
	return errs
}
