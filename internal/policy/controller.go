package policy

import (
	"fmt"
)

// ControllerParams are what the controller policy is scoped to.
type ControllerParams struct {
	Partition   string
	Region      string
	Account     string
	ClusterName string
	// ClusterARN is the EKS cluster the controller discovers its endpoint from.
	ClusterARN string
	// QueueARN is the interruption queue the controller reads.
	QueueARN string
	// NodeRoleARN is the only role the controller may pass to EC2.
	NodeRoleARN string
}

// ControllerV1_14 is the controller policy of Karpenter's v1.14 reference
// setup (its NodeLifecycle, IAMIntegration, EKSIntegration, Interruption and
// ResourceDiscovery policies), statement for statement, with two removals:
// the instance-profile writes (the nodes' instance profile already exists and
// Karpenter only reads it) and the ARC zonal-shift read. PassRole is limited
// to the one existing node role. internal/versions says which Karpenter
// versions it serves.
func ControllerV1_14(p ControllerParams) Document {
	ec2 := func(resource string) string {
		return fmt.Sprintf("arn:%s:ec2:%s:%s", p.Partition, p.Region, resource)
	}
	ec2s := func(resources ...string) []string {
		out := make([]string, len(resources))
		for i, r := range resources {
			out[i] = ec2(r)
		}
		return out
	}
	clusterTag := "kubernetes.io/cluster/" + p.ClusterName
	taggedResources := ec2s("*:fleet/*", "*:instance/*", "*:volume/*", "*:network-interface/*", "*:launch-template/*", "*:spot-instances-request/*")
	ownedByNodePool := ownedByNodePool(p.ClusterName)
	return Document{
		Version: Version,
		Statement: []Statement{
			{
				Sid:      "AllowScopedEC2InstanceAccessActions",
				Effect:   Allow,
				Resource: ec2s(":image/*", ":snapshot/*", "*:security-group/*", "*:subnet/*", "*:capacity-reservation/*", "*:placement-group/*"),
				Action:   []string{"ec2:RunInstances", "ec2:CreateFleet"},
			},
			{
				Sid:       "AllowScopedEC2LaunchTemplateAccessActions",
				Effect:    Allow,
				Resource:  one(ec2("*:launch-template/*")),
				Action:    []string{"ec2:RunInstances", "ec2:CreateFleet"},
				Condition: ownedByNodePool,
			},
			{
				Sid:      "AllowScopedEC2InstanceActionsWithTags",
				Effect:   Allow,
				Resource: taggedResources,
				Action:   []string{"ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"},
				Condition: Condition{
					"StringEquals": {
						"aws:RequestTag/" + clusterTag:        one("owned"),
						"aws:RequestTag/eks:eks-cluster-name": one(p.ClusterName),
					},
					"StringLike": {"aws:RequestTag/karpenter.sh/nodepool": one("*")},
				},
			},
			{
				Sid:      "AllowScopedResourceCreationTagging",
				Effect:   Allow,
				Resource: taggedResources,
				Action:   one("ec2:CreateTags"),
				Condition: Condition{
					"StringEquals": {
						"aws:RequestTag/" + clusterTag:        one("owned"),
						"aws:RequestTag/eks:eks-cluster-name": one(p.ClusterName),
						"ec2:CreateAction":                    {"RunInstances", "CreateFleet", "CreateLaunchTemplate"},
					},
					"StringLike": {"aws:RequestTag/karpenter.sh/nodepool": one("*")},
				},
			},
			{
				Sid:      "AllowScopedResourceTagging",
				Effect:   Allow,
				Resource: one(ec2("*:instance/*")),
				Action:   one("ec2:CreateTags"),
				Condition: Condition{
					"StringEquals":              {"aws:ResourceTag/" + clusterTag: one("owned")},
					"StringLike":                {"aws:ResourceTag/karpenter.sh/nodepool": one("*")},
					"StringEqualsIfExists":      {"aws:RequestTag/eks:eks-cluster-name": one(p.ClusterName)},
					"ForAllValues:StringEquals": {"aws:TagKeys": {"eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"}},
				},
			},
			{
				Sid:       "AllowScopedDeletion",
				Effect:    Allow,
				Resource:  ec2s("*:instance/*", "*:launch-template/*"),
				Action:    []string{"ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"},
				Condition: ownedByNodePool,
			},
			{
				Sid:       "AllowPassingInstanceRole",
				Effect:    Allow,
				Resource:  one(p.NodeRoleARN),
				Action:    one("iam:PassRole"),
				Condition: Condition{"StringEquals": {"iam:PassedToService": {"ec2.amazonaws.com", "ec2.amazonaws.com.cn"}}},
			},
			{
				Sid:      "AllowAPIServerEndpointDiscovery",
				Effect:   Allow,
				Resource: one(p.ClusterARN),
				Action:   one("eks:DescribeCluster"),
			},
			{
				Sid:      "AllowInterruptionQueueActions",
				Effect:   Allow,
				Resource: one(p.QueueARN),
				Action:   []string{"sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"},
			},
			{
				Sid:      "AllowRegionalReadActions",
				Effect:   Allow,
				Resource: one("*"),
				Action: []string{
					"ec2:DescribeCapacityReservations",
					"ec2:DescribeImages",
					"ec2:DescribeInstances",
					"ec2:DescribeInstanceStatus",
					"ec2:DescribeInstanceTypeOfferings",
					"ec2:DescribeInstanceTypes",
					"ec2:DescribeLaunchTemplates",
					"ec2:DescribePlacementGroups",
					"ec2:DescribeSecurityGroups",
					"ec2:DescribeSpotPriceHistory",
					"ec2:DescribeSubnets",
				},
				Condition: Condition{"StringEquals": {"aws:RequestedRegion": one(p.Region)}},
			},
			{
				Sid:      "AllowSSMReadActions",
				Effect:   Allow,
				Resource: one(fmt.Sprintf("arn:%s:ssm:%s::parameter/aws/service/*", p.Partition, p.Region)),
				Action:   one("ssm:GetParameter"),
			},
			{
				Sid:      "AllowPricingReadActions",
				Effect:   Allow,
				Resource: one("*"),
				Action:   one("pricing:GetProducts"),
			},
			{
				Sid:      "AllowUnscopedInstanceProfileListAction",
				Effect:   Allow,
				Resource: one("*"),
				Action:   one("iam:ListInstanceProfiles"),
			},
			{
				Sid:      "AllowInstanceProfileReadActions",
				Effect:   Allow,
				Resource: one(fmt.Sprintf("arn:%s:iam::%s:instance-profile/*", p.Partition, p.Account)),
				Action:   one("iam:GetInstanceProfile"),
			},
		},
	}
}

// InstanceReboot lets the controller reboot the instances of its own node
// pools in place, as Karpenter 1.15's node repair does behind its
// RebootForRepair feature gate (ec2:RebootInstances), scoped like their
// termination.
func InstanceReboot(p ControllerParams) Statement {
	return Statement{
		Sid:       "AllowScopedInstanceReboot",
		Effect:    Allow,
		Resource:  one(fmt.Sprintf("arn:%s:ec2:%s:*:instance/*", p.Partition, p.Region)),
		Action:    one("ec2:RebootInstances"),
		Condition: ownedByNodePool(p.ClusterName),
	}
}

// ownedByNodePool matches what Karpenter launched for one of the cluster's
// node pools.
func ownedByNodePool(cluster string) Condition {
	return Condition{
		"StringEquals": {"aws:ResourceTag/kubernetes.io/cluster/" + cluster: one("owned")},
		"StringLike":   {"aws:ResourceTag/karpenter.sh/nodepool": one("*")},
	}
}
