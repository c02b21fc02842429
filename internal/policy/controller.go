package policy

import (
	"encoding/json"
	"fmt"
	"strings"
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
	// VPC is the claimed cluster's VPC (vpc-0123…), as the observed EKS
	// cluster reports it: the only VPC whose subnets and security groups
	// the controller may launch with.
	VPC string
	// Reservations are the platform's capacity reservation terms for the
	// cluster: the only reservations the controller may launch into.
	Reservations []Reservation
}

// VPCARN is the ARN that ec2:Vpc compares with the VPC of a subnet or a
// security group. Its account is a wildcard: a VPC shared through AWS RAM
// belongs to its owner's account, not the cluster's, and a VPC ID is unique
// across accounts.
func (p ControllerParams) VPCARN() string {
	return fmt.Sprintf("arn:%s:ec2:%s:*:vpc/%s", p.Partition, p.Region, p.VPC)
}

// A Reservation is one of the platform's capacity reservation selector
// terms, as Karpenter's EC2NodeClass takes it: one reservation by ID, or
// every reservation carrying all of Tags, of OwnerID's account when set.
type Reservation struct {
	ID, OwnerID string
	Tags        map[string]string
}

// ControllerV1_14 is the controller policy of Karpenter's v1.14 reference
// setup (its NodeLifecycle, IAMIntegration, EKSIntegration, Interruption and
// ResourceDiscovery policies), statement for statement, with two removals:
// the instance-profile writes (the nodes' instance profile already exists and
// Karpenter only reads it) and the ARC zonal-shift read. PassRole is limited
// to the one existing node role. And one change: upstream's
// AllowScopedEC2InstanceAccessActions lets the controller launch with any
// subnet, security group and capacity reservation of the account, so
// whoever writes an EC2NodeClass (or runs as Karpenter's service account)
// in one cluster could launch into another cluster's network and spend its
// reservations. Here subnets and security groups must be in the cluster's
// VPC (ec2:Vpc), and a capacity reservation must be one the platform's
// terms for the cluster select (ReservationStatements): none unless the
// platform offers reservations. internal/versions says which Karpenter
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
		Statement: append([]Statement{
			{
				Sid:      "AllowScopedEC2InstanceAccessActions",
				Effect:   Allow,
				Resource: ec2s(":image/*", ":snapshot/*", "*:placement-group/*"),
				Action:   []string{"ec2:RunInstances", "ec2:CreateFleet"},
			},
			{
				// ec2:Vpc (type ARN, "the ARN of the VPC") is a condition
				// key of the subnet and security-group resource types of
				// RunInstances and CreateFleet: Service Authorization
				// Reference, Actions, resources, and condition keys for
				// Amazon EC2,
				// https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html
				// (and its example "launch instances into a specific VPC",
				// https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ExamplePolicies_EC2.html).
				// Network interfaces stay as upstream scopes them: the
				// ones a launch creates are in the subnet it names, which
				// this statement confines.
				Sid:       InClusterVPC,
				Effect:    Allow,
				Resource:  ec2s("*:security-group/*", "*:subnet/*"),
				Action:    []string{"ec2:RunInstances", "ec2:CreateFleet"},
				Condition: Condition{"ArnLike": {"ec2:Vpc": one(p.VPCARN())}},
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
		}, ReservationStatements(p)...),
	}
}

// ReservationStatements let the controller launch into the capacity
// reservations the platform's terms select, and no other: upstream grants
// every reservation of the account, so one cluster could spend another's.
// Reservations are the platform's to give (input pools, globally or per
// cluster, never a claim's field), so what IAM grants is what the platform
// offers the cluster's EC2NodeClasses: the terms by ID in one statement, one
// statement per tag term (its tags all required, ec2:ResourceTag, a value
// "*" any value as Karpenter reads it), each in its owner's account or any.
// ec2:ResourceTag/${TagKey} is a condition key of the capacity-reservation
// resource type: Service Authorization Reference, Actions, resources, and
// condition keys for Amazon EC2,
// https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html
// (the copy read, https://docs.aws.amazon.com/IAM/latest/UserGuide/list_amazonec2.html,
// lists for capacity-reservation aws:RequestTag/${TagKey}, aws:TagKeys,
// ec2:Region and ec2:ResourceTag/${TagKey}: the EC2 key is the one read
// there).
func ReservationStatements(p ControllerParams) []Statement {
	arn := func(owner, id string) string {
		if owner == "" {
			owner = "*"
		}
		return fmt.Sprintf("arn:%s:ec2:%s:%s:capacity-reservation/%s", p.Partition, p.Region, owner, id)
	}
	launch := []string{"ec2:RunInstances", "ec2:CreateFleet"}
	var byID []string
	var out []Statement
	for _, r := range p.Reservations {
		if r.ID != "" {
			byID = append(byID, arn(r.OwnerID, r.ID))
			continue
		}
		c := Condition{}
		for k, v := range r.Tags {
			op := "StringEquals"
			if v == "*" {
				op = "StringLike"
			}
			if c[op] == nil {
				c[op] = map[string][]string{}
			}
			c[op]["ec2:ResourceTag/"+k] = one(v)
		}
		out = append(out, Statement{
			Sid:       fmt.Sprintf("AllowTaggedCapacityReservations%d", len(out)),
			Effect:    Allow,
			Resource:  one(arn(r.OwnerID, "*")),
			Action:    launch,
			Condition: c,
		})
	}
	if len(byID) > 0 {
		out = append([]Statement{{Sid: "AllowNamedCapacityReservations", Effect: Allow, Resource: byID, Action: launch}}, out...)
	}
	return out
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

// InClusterVPC is the statement that grants launches in the cluster's VPC
// alone.
const InClusterVPC = "AllowScopedEC2InstanceAccessActionsInClusterVPC"

// GrantedVPC is the VPC ID a controller policy document grants launches
// in; empty when it grants none.
func GrantedVPC(doc string) string {
	var d Document
	if json.Unmarshal([]byte(doc), &d) != nil {
		return ""
	}
	for _, st := range d.Statement {
		if vpcs := st.Condition["ArnLike"]["ec2:Vpc"]; st.Sid == InClusterVPC && len(vpcs) == 1 {
			if _, id, ok := strings.Cut(vpcs[0], ":vpc/"); ok {
				return id
			}
		}
	}
	return ""
}
