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
// cluster's subnets and security groups are usable, and only the capacity
// reservations the platform's terms offer the cluster.
func TestControllerLaunchesOnlyInItsVPC(t *testing.T) {
	// The platform offers prod-eu one reservation by ID and those tagged
	// for it by its own tag.
	c := isolationConfig(t, map[string]any{"pools": map[string]any{"capacityReservationSelectorTerms": []any{
		map[string]any{"id": "cr-0a0a0a0a0a0a0a0a0"},
		map[string]any{"tags": map[string]any{"platform/reserved-for": "prod-eu"}},
	}}})
	doc := controllerDocument(t, c)
	// And a platform that offers none.
	none := controllerDocument(t, isolationConfig(t, nil))
	role := c.Account.RoleARN(c.Names.RolePath, c.Names.Role)
	vpc := func(id string) string { return "arn:aws:ec2:eu-west-3:" + isolationAccount + ":vpc/" + id }
	ec2 := func(r string) string { return "arn:aws:ec2:eu-west-3:" + isolationAccount + ":" + r }
	cases := map[string]struct {
		reason  string
		action  string
		arn     string
		context map[string][]string
		// policy is the controller policy to evaluate, doc when nil.
		policy *string
		want   decision
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
		"NamedReservation": {
			reason: "A reservation the platform names for the cluster may be used.",
			action: "ec2:CreateFleet",
			arn:    ec2("capacity-reservation/cr-0a0a0a0a0a0a0a0a0"),
			want:   allowed,
		},
		"TaggedReservation": {
			reason:  "So may one carrying the tags of the platform's term.",
			action:  "ec2:RunInstances",
			arn:     ec2("capacity-reservation/cr-0c"),
			context: map[string][]string{"ec2:ResourceTag/platform/reserved-for": {"prod-eu"}},
			want:    allowed,
		},
		"OtherReservation": {
			reason: "A reservation the platform did not offer the cluster (another cluster's) must not be spent.",
			action: "ec2:CreateFleet",
			arn:    ec2("capacity-reservation/cr-0b"),
			want:   implicitDenied,
		},
		"ReservationOfAnotherCluster": {
			reason:  "Nor one carrying the term's tag for another cluster.",
			action:  "ec2:RunInstances",
			arn:     ec2("capacity-reservation/cr-0b"),
			context: map[string][]string{"ec2:ResourceTag/platform/reserved-for": {"prod-us"}},
			want:    implicitDenied,
		},
		"NoReservationsOffered": {
			reason: "With no terms, no reservation at all: upstream grants every one of the account.",
			policy: &none,
			action: "ec2:CreateFleet",
			arn:    ec2("capacity-reservation/cr-0a0a0a0a0a0a0a0a0"),
			want:   implicitDenied,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := map[string][]string{"aws:RequestedRegion": {"eu-west-3"}, "aws:SecureTransport": {"true"}}
			for k, v := range tc.context {
				ctx[k] = v
			}
			req := request{Principal: role, Action: tc.action, Resource: tc.arn, Context: ctx}
			policy := doc
			if tc.policy != nil {
				policy = *tc.policy
			}
			if got := evaluate(t, req, []string{policy}, nil); got != tc.want {
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
		c := isolationConfig(t, nil)
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
