package awsres

import (
	"cmp"

	"github.com/crossplane/function-sdk-go/resource"

	"github.com/do-now/function-karpenter/internal/interruption"
	"github.com/do-now/function-karpenter/internal/policy"
)

// Observed are the identifiers AWS reported for the resources of step one.
// A field is empty until the provider has written it.
type Observed struct {
	RoleARN string
	// FinalCheckRoleARN is the final check's role.
	FinalCheckRoleARN string
	QueueURL          string
	QueueARN          string
	// RuleARNs maps an interruption rule key to its ARN.
	RuleARNs map[string]string
	// The claimed EKS cluster as AWS describes it: its Kubernetes version
	// (1.34), ARN and VPC.
	ClusterVersion, ClusterARN, ClusterVPC string
}

// ReadObserved reads the identifiers providers wrote into status.atProvider.
func ReadObserved(ocds map[resource.Name]resource.ObservedComposed) Observed {
	get := func(name resource.Name, path string) string {
		ocd, ok := ocds[name]
		if !ok {
			return ""
		}
		s, _ := ocd.Resource.GetString(path)
		return s
	}
	o := Observed{
		RoleARN:           get(ControllerRole, "status.atProvider.arn"),
		FinalCheckRoleARN: get(FinalCheckRole, "status.atProvider.arn"),
		QueueURL:          get(InterruptionQueue, "status.atProvider.url"),
		QueueARN:          get(InterruptionQueue, "status.atProvider.arn"),
		RuleARNs:          map[string]string{},
		// Observed as provider-aws writes it: the claim API's v1beta1 keeps
		// vpcConfig as a list, the namespaced one as an object.
		ClusterVersion: get(EKSCluster, "status.atProvider.version"),
		ClusterARN:     get(EKSCluster, "status.atProvider.arn"),
		ClusterVPC:     cmp.Or(get(EKSCluster, "status.atProvider.vpcConfig[0].vpcId"), get(EKSCluster, "status.atProvider.vpcConfig.vpcId")),
	}
	for _, r := range interruption.Rules {
		if arn := get(RuleResource(r), "status.atProvider.arn"); arn != "" {
			o.RuleARNs[r.Key] = arn
		}
	}
	return o
}

// KnownVPC is the claimed cluster's VPC: as the observed cluster reports
// it, else, while it reports none (unobserved a moment, its status being
// rewritten), the VPC the observed controller policy grants, so that
// nothing built from the VPC (the policy, the access check's Pod) changes
// for a moment's silence. An EKS cluster cannot change VPC.
func KnownVPC(o Observed, ocds map[resource.Name]resource.ObservedComposed) string {
	if o.ClusterVPC != "" {
		return o.ClusterVPC
	}
	ocd, ok := ocds[ControllerRolePolicy]
	if !ok {
		return ""
	}
	doc, _ := ocd.Resource.GetString("spec.forProvider.policy")
	return policy.GrantedVPC(doc)
}
