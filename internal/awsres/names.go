// Package awsres builds the provider-aws managed resources of the AWS half of
// the sequence as typed provider structs: the controller role and its policy,
// the interruption queue and its policy, the EventBridge rules and targets,
// and the Pod Identity association.
package awsres

import (
	"github.com/crossplane/function-sdk-go/resource"

	"github.com/do-now/function-karpenter/internal/interruption"
)

// Composed resource names. They are API: renaming one makes Crossplane delete
// the old resource and create a new one, that is, delete real infrastructure.
const (
	ControllerRole          resource.Name = "controller-role"
	ControllerRolePolicy    resource.Name = "controller-role-policy"
	InterruptionQueue       resource.Name = "interruption-queue"
	InterruptionQueuePolicy resource.Name = "interruption-queue-policy"
	PodIdentityAssociation  resource.Name = "pod-identity-association"
	// The final check's own AWS identity (package cluster, finalcheck.go):
	// a role that lists instances and nothing more, bound to the final
	// check's ServiceAccount alone.
	FinalCheckRole                   resource.Name = "final-check-role"
	FinalCheckRolePolicy             resource.Name = "final-check-role-policy"
	FinalCheckPodIdentityAssociation resource.Name = "final-check-pod-identity-association"
	// EKSCluster observes the claimed EKS cluster (managementPolicies:
	// Observe): its Kubernetes version, ARN and VPC. It manages nothing,
	// and deleting it deletes nothing in AWS.
	EKSCluster resource.Name = "eks-cluster"
)

// RuleResource is the composed resource name of an interruption rule.
func RuleResource(r interruption.Rule) resource.Name { return resource.Name("rule-" + r.Key) }

// TargetResource is the composed resource name of a rule's queue target.
func TargetResource(r interruption.Rule) resource.Name { return resource.Name("target-" + r.Key) }
