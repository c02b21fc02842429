package awsres

import (
	"errors"
	"fmt"
	"regexp"
	"sort"

	xpv1 "github.com/crossplane/crossplane-runtime/v2/apis/common/v1"
	"github.com/crossplane/function-sdk-go/resource"
	events "github.com/upbound/provider-aws/v2/apis/cluster/cloudwatchevents/v1beta1"
	eks "github.com/upbound/provider-aws/v2/apis/cluster/eks/v1beta1"
	iam "github.com/upbound/provider-aws/v2/apis/cluster/iam/v1beta1"
	sqs "github.com/upbound/provider-aws/v2/apis/cluster/sqs/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/interruption"
	"github.com/do-now/function-karpenter/internal/naming"
	"github.com/do-now/function-karpenter/internal/policy"
	"github.com/do-now/function-karpenter/internal/versions"
)

// Queue settings Karpenter's reference setup uses.
const (
	QueueRetentionSeconds = 300
	DefaultEventBus       = "default"
)

// ClusterTag marks every AWS resource with the cluster it serves.
const ClusterTag = config.ClusterLabel

// Resources are desired managed resources by composed resource name.
type Resources = map[resource.Name]runtime.Object

// Identity returns step one: the controller role and its inline policy, the
// final check's role and its policy, the interruption queue and the five
// rules, and the observed EKS cluster. Every
// ARN it names is derived from the node role's account; the policy also
// names the cluster's VPC, which only the observed EKS cluster tells: until
// then the policy has no document (ErrNoVPC), the step withholds it while it
// does not exist (internal/sequence), and an existing one keeps the document
// it has (internal/upgrade).
func Identity(c *config.Config) (Resources, error) {
	doc, err := ControllerPolicy(c)
	if err != nil && !errors.Is(err, ErrNoVPC) {
		return nil, err
	}
	tags := tags(c)
	res := Resources{
		ControllerRole: role(c, c.Names.Role, c.Input.PodIdentity.ServiceAccount,
			fmt.Sprintf("Karpenter controller of EKS cluster %s, assumed through EKS Pod Identity", c.Spec.Cluster.Name)),
		ControllerRolePolicy: rolePolicy(c, c.Names.RolePolicy, c.Names.Role, optional(doc)),
		FinalCheckRole: role(c, c.Names.FinalCheckRole, naming.FinalCheckServiceAccount,
			fmt.Sprintf("Final check of Karpenter's uninstall on EKS cluster %s: lists its instances, assumed through EKS Pod Identity", c.Spec.Cluster.Name)),
		FinalCheckRolePolicy: rolePolicy(c, c.Names.FinalCheckRolePolicy, c.Names.FinalCheckRole, ptr(policy.FinalCheck(c.Account.Region).JSON())),
		InterruptionQueue: &sqs.Queue{
			TypeMeta: typeMeta(sqs.Queue_GroupVersionKind.GroupVersion().String(), sqs.Queue_Kind),
			Spec: sqs.QueueSpec{
				ResourceSpec: resourceSpec(c),
				ForProvider: sqs.QueueParameters{
					Region:                  ptr(c.Spec.Cluster.Region),
					Name:                    ptr(c.Names.Queue),
					MessageRetentionSeconds: ptr(float64(QueueRetentionSeconds)),
					SqsManagedSseEnabled:    ptr(true),
					Tags:                    tags,
				},
			},
		},
	}
	observeOnly := resourceSpec(c)
	observeOnly.ManagementPolicies = xpv1.ManagementPolicies{xpv1.ManagementActionObserve}
	res[EKSCluster] = &eks.Cluster{
		TypeMeta:   typeMeta(eks.Cluster_GroupVersionKind.GroupVersion().String(), eks.Cluster_Kind),
		ObjectMeta: externalName(c.Spec.Cluster.Name),
		Spec: eks.ClusterSpec{
			ResourceSpec: observeOnly,
			ForProvider:  eks.ClusterParameters{Region: ptr(c.Spec.Cluster.Region)},
		},
	}
	for _, r := range interruption.Rules {
		res[RuleResource(r)] = &events.Rule{
			TypeMeta:   typeMeta(events.Rule_GroupVersionKind.GroupVersion().String(), events.Rule_Kind),
			ObjectMeta: externalName(c.Names.Rules[r.Key]),
			Spec: events.RuleSpec{
				ResourceSpec: resourceSpec(c),
				ForProvider: events.RuleParameters{
					Region:       ptr(c.Spec.Cluster.Region),
					Description:  ptr(fmt.Sprintf("%s events for Karpenter on EKS cluster %s", r.DetailType, c.Spec.Cluster.Name)),
					EventBusName: ptr(DefaultEventBus),
					EventPattern: ptr(r.EventPattern()),
					Tags:         tags,
				},
			},
		}
	}
	return res, nil
}

// Wiring returns step two: the queue policy that lets only the five rules
// send and only the controller role receive, one target per rule, and the
// Pod Identity associations of the controller and of the final check. It uses the
// identifiers AWS reported, falling back to the derived ones for a resource
// that exists already while its prerequisite is momentarily unobserved.
func Wiring(c *config.Config, o Observed) Resources {
	roleARN := or(o.RoleARN, c.Account.RoleARN(c.Names.RolePath, c.Names.Role))
	queueARN := or(o.QueueARN, c.Account.QueueARN(c.Names.Queue))
	queueURL := or(o.QueueURL, c.Account.QueueURL(c.Names.Queue))
	ruleARNs := make([]string, 0, len(interruption.Rules))
	for _, r := range interruption.Rules {
		ruleARNs = append(ruleARNs, or(o.RuleARNs[r.Key], c.Account.RuleARN(c.Names.Rules[r.Key])))
	}
	sort.Strings(ruleARNs)

	res := Resources{
		InterruptionQueuePolicy: &sqs.QueuePolicy{
			TypeMeta: typeMeta(sqs.QueuePolicy_GroupVersionKind.GroupVersion().String(), sqs.QueuePolicy_Kind),
			Spec: sqs.QueuePolicySpec{
				ResourceSpec: resourceSpec(c),
				ForProvider: sqs.QueuePolicyParameters{
					Region:   ptr(c.Spec.Cluster.Region),
					QueueURL: ptr(queueURL),
					Policy:   ptr(policy.InterruptionQueue(queueARN, ruleARNs, roleARN).JSON()),
				},
			},
		},
		PodIdentityAssociation: association(c, c.Input.PodIdentity.ServiceAccount, roleARN),
		FinalCheckPodIdentityAssociation: association(c, naming.FinalCheckServiceAccount,
			or(o.FinalCheckRoleARN, c.Account.RoleARN(c.Names.RolePath, c.Names.FinalCheckRole))),
	}
	for _, r := range interruption.Rules {
		res[TargetResource(r)] = &events.Target{
			TypeMeta: typeMeta(events.Target_GroupVersionKind.GroupVersion().String(), events.Target_Kind),
			Spec: events.TargetSpec{
				ResourceSpec: resourceSpec(c),
				ForProvider: events.TargetParameters{
					Region:       ptr(c.Spec.Cluster.Region),
					EventBusName: ptr(DefaultEventBus),
					Rule:         ptr(c.Names.Rules[r.Key]),
					TargetID:     ptr(naming.TargetID),
					Arn:          ptr(queueARN),
				},
			},
		}
	}
	return res
}

// role is an IAM role under the cluster's path that EKS Pod Identity
// assumes for serviceAccount in the controller's namespace of the claimed
// cluster, and for nothing else.
func role(c *config.Config, name, serviceAccount, description string) *iam.Role {
	return &iam.Role{
		TypeMeta:   typeMeta(iam.Role_GroupVersionKind.GroupVersion().String(), iam.Role_Kind),
		ObjectMeta: externalName(name),
		Spec: iam.RoleSpec{
			ResourceSpec: resourceSpec(c),
			ForProvider: iam.RoleParameters{
				AssumeRolePolicy: ptr(policy.PodIdentityTrust(policy.Binding{
					Account:        c.Account.ID,
					Cluster:        c.Spec.Cluster.Name,
					ClusterARN:     c.Account.ClusterARN(c.Spec.Cluster.Name),
					Namespace:      c.Input.PodIdentity.Namespace,
					ServiceAccount: serviceAccount,
				}).JSON()),
				Description:         ptr(description),
				Path:                ptr(c.Names.RolePath),
				PermissionsBoundary: optional(c.Input.PermissionsBoundaryARN),
				Tags:                tags(c),
			},
		},
	}
}

// rolePolicy is the inline policy name of role, with doc (nil: none yet).
func rolePolicy(c *config.Config, name, role string, doc *string) *iam.RolePolicy {
	return &iam.RolePolicy{
		TypeMeta:   typeMeta(iam.RolePolicy_GroupVersionKind.GroupVersion().String(), iam.RolePolicy_Kind),
		ObjectMeta: externalName(name),
		Spec: iam.RolePolicySpec{
			ResourceSpec: resourceSpec(c),
			ForProvider:  iam.RolePolicyParameters{Policy: doc, Role: ptr(role)},
		},
	}
}

// association binds serviceAccount, in the controller's namespace of the
// claimed cluster, to the role roleARN through EKS Pod Identity.
func association(c *config.Config, serviceAccount, roleARN string) *eks.PodIdentityAssociation {
	return &eks.PodIdentityAssociation{
		TypeMeta: typeMeta(eks.PodIdentityAssociation_GroupVersionKind.GroupVersion().String(), eks.PodIdentityAssociation_Kind),
		Spec: eks.PodIdentityAssociationSpec{
			ResourceSpec: resourceSpec(c),
			ForProvider: eks.PodIdentityAssociationParameters_2{
				Region:         ptr(c.Spec.Cluster.Region),
				ClusterName:    ptr(c.Spec.Cluster.Name),
				Namespace:      ptr(c.Input.PodIdentity.Namespace),
				ServiceAccount: ptr(serviceAccount),
				RoleArn:        ptr(roleARN),
				Tags:           tags(c),
			},
		},
	}
}

// ControllerPolicy returns the controller's inline policy for the claim's
// version, with the gates the platform enables, as JSON, refusing one over
// the inline policy size limit.
func ControllerPolicy(c *config.Config) (string, error) {
	return ControllerPolicyOf(c, string(c.Spec.Version))
}

// ErrNoVPC is ControllerPolicyOf's answer while the observed EKS cluster
// reports no VPC: the policy names it.
var ErrNoVPC = errors.New("the claimed cluster's VPC is not observed yet")

// vpcID is what a VPC ID looks like. Anything else is refused: the ID goes
// into an ArnLike condition, where a wildcard would match every VPC.
var vpcID = regexp.MustCompile(`^vpc-[0-9a-f]+$`)

// ControllerPolicyOf is the controller's inline policy for Karpenter
// version, in the claimed cluster's VPC.
func ControllerPolicyOf(c *config.Config, version string) (string, error) {
	v, err := versions.Get(version)
	if err != nil {
		return "", err
	}
	switch {
	case c.ClusterVPC == "":
		return "", ErrNoVPC
	case !vpcID.MatchString(c.ClusterVPC):
		return "", fmt.Errorf("the observed EKS cluster %q reports VPC %q, which is not a VPC ID", c.Spec.Cluster.Name, c.ClusterVPC)
	}
	doc := v.ControllerPolicy(policy.ControllerParams{
		Partition:    string(c.Account.Partition),
		Region:       c.Account.Region,
		Account:      c.Account.ID,
		ClusterName:  c.Spec.Cluster.Name,
		ClusterARN:   c.Account.ClusterARN(c.Spec.Cluster.Name),
		QueueARN:     c.Account.QueueARN(c.Names.Queue),
		NodeRoleARN:  c.NodeRole.ARN,
		VPC:          c.ClusterVPC,
		Reservations: reservations(c),
	}, c.Gates())
	s := doc.JSON()
	if len(s) > naming.MaxInlinePolicy {
		return "", fmt.Errorf("the controller policy of Karpenter %s is %d characters, over the IAM inline policy limit of %d", version, len(s), naming.MaxInlinePolicy)
	}
	return s, nil
}

// reservations are the platform's capacity reservation terms for the
// cluster, which the controller may launch into and no others.
func reservations(c *config.Config) []policy.Reservation {
	var out []policy.Reservation
	for _, t := range c.Pools.CapacityReservationSelectorTerms {
		out = append(out, policy.Reservation{ID: t.ID, OwnerID: t.OwnerID, Tags: t.Tags})
	}
	return out
}
