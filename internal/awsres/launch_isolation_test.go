package awsres

import (
	"errors"
	"testing"
)

// The claimed cluster's VPC, and another cluster's in the same account and
// region.
const (
	clusterVPC = "vpc-0fa4e"
	otherVPC   = "vpc-0b0b0"
)

// TestControllerLaunchesOnlyInItsVPC evaluates the controller policy step
// one composes against the launches a hostile EC2NodeClass (or anyone
// running as Karpenter's service account) could ask for: only the claimed
// cluster's subnets and security groups are usable, and no capacity
// reservation the platform did not tag for the cluster.
func TestControllerLaunchesOnlyInItsVPC(t *testing.T) {
	c := isolationConfig(t)
	doc := controllerDocument(t, c)
	role := c.Account.RoleARN(c.Names.RolePath, c.Names.Role)
	vpc := func(id string) string { return "arn:aws:ec2:eu-west-3:" + isolationAccount + ":vpc/" + id }
	ec2 := func(r string) string { return "arn:aws:ec2:eu-west-3:" + isolationAccount + ":" + r }
	cases := map[string]struct {
		reason  string
		action  string
		arn     string
		context map[string][]string
		want    decision
	}{
		"OwnSubnet": {
			reason:  "A launch into a subnet of the cluster's own VPC is what Karpenter does.",
			action:  "ec2:CreateFleet",
			arn:     ec2("subnet/subnet-0a"),
			context: map[string][]string{"ec2:Vpc": {vpc(clusterVPC)}},
			want:    allowed,
		},
		"OwnSecurityGroup": {
			reason:  "So is a launch with a security group of the cluster's own VPC.",
			action:  "ec2:RunInstances",
			arn:     ec2("security-group/sg-0a"),
			context: map[string][]string{"ec2:Vpc": {vpc(clusterVPC)}},
			want:    allowed,
		},
		"OtherVPCSubnet": {
			reason:  "A subnet of another cluster's VPC in the same account and region must be refused.",
			action:  "ec2:CreateFleet",
			arn:     ec2("subnet/subnet-0b"),
			context: map[string][]string{"ec2:Vpc": {vpc(otherVPC)}},
			want:    implicitDenied,
		},
		"OtherVPCSubnetRunInstances": {
			reason:  "RunInstances is granted like CreateFleet: refused too.",
			action:  "ec2:RunInstances",
			arn:     ec2("subnet/subnet-0b"),
			context: map[string][]string{"ec2:Vpc": {vpc(otherVPC)}},
			want:    implicitDenied,
		},
		"OtherVPCSecurityGroup": {
			reason:  "Another cluster's security group must be refused.",
			action:  "ec2:CreateFleet",
			arn:     ec2("security-group/sg-0b"),
			context: map[string][]string{"ec2:Vpc": {vpc(otherVPC)}},
			want:    implicitDenied,
		},
		"UntaggedReservation": {
			reason: "A capacity reservation the platform did not tag for the cluster (another cluster's) must not be spent.",
			action: "ec2:CreateFleet",
			arn:    ec2("capacity-reservation/cr-0b"),
			want:   implicitDenied,
		},
		"ReservationOfAnotherCluster": {
			reason:  "Nor one the platform tagged for another cluster.",
			action:  "ec2:RunInstances",
			arn:     ec2("capacity-reservation/cr-0b"),
			context: map[string][]string{"aws:ResourceTag/kubernetes.io/cluster/prod-us": {"owned"}},
			want:    implicitDenied,
		},
		"ReservationOfTheCluster": {
			reason:  "A reservation the platform tagged as the cluster's may be used.",
			action:  "ec2:CreateFleet",
			arn:     ec2("capacity-reservation/cr-0a"),
			context: map[string][]string{"aws:ResourceTag/kubernetes.io/cluster/prod-eu": {"owned"}},
			want:    allowed,
		},
		"ReservationSharedWithTheCluster": {
			reason:  "So may one the platform shares with the cluster (and others, each by its own tag).",
			action:  "ec2:RunInstances",
			arn:     ec2("capacity-reservation/cr-0c"),
			context: map[string][]string{"aws:ResourceTag/kubernetes.io/cluster/prod-eu": {"shared"}, "aws:ResourceTag/kubernetes.io/cluster/prod-us": {"shared"}},
			want:    allowed,
		},
		"ReservationTaggedOtherwise": {
			reason:  "The cluster's tag with any other value grants nothing.",
			action:  "ec2:CreateFleet",
			arn:     ec2("capacity-reservation/cr-0d"),
			context: map[string][]string{"aws:ResourceTag/kubernetes.io/cluster/prod-eu": {"*"}},
			want:    implicitDenied,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := map[string][]string{"aws:RequestedRegion": {"eu-west-3"}, "aws:SecureTransport": {"true"}}
			for k, v := range tc.context {
				ctx[k] = v
			}
			req := request{Principal: role, Action: tc.action, Resource: tc.arn, Context: ctx}
			if got := evaluate(t, req, []string{doc}, nil); got != tc.want {
				t.Errorf("\n%s\n%s on %s (context %v) under the composed controller policy: %s, want %s", tc.reason, tc.action, tc.arn, tc.context, got, tc.want)
			}
		})
	}
}

// TestControllerPolicyNeedsAVPCID: no policy without the VPC, and none for
// a VPC "ID" that is not one: it goes into an ArnLike condition, where a
// wildcard would match every VPC of the account.
func TestControllerPolicyNeedsAVPCID(t *testing.T) {
	for vpc, wantNoVPC := range map[string]bool{"": true, "*": false, "vpc-*": false, "vpc-0fa4e/../*": false} {
		c := isolationConfig(t)
		c.ClusterVPC = vpc
		doc, err := ControllerPolicy(c)
		if err == nil {
			t.Errorf("ControllerPolicy with VPC %q: want an error, got %s", vpc, doc)
			continue
		}
		if got := errors.Is(err, ErrNoVPC); got != wantNoVPC {
			t.Errorf("ControllerPolicy with VPC %q: errors.Is(%v, ErrNoVPC) = %t, want %t", vpc, err, got, wantNoVPC)
		}
	}
}
