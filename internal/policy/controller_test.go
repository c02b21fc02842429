package policy_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/do-now/function-karpenter/internal/policy"
	"github.com/do-now/function-karpenter/internal/versions"
)

// removedOnPurpose are the upstream statements the product leaves out, and why.
// Anything else missing from, added to or changed in the controller policy is
// a difference from upstream and fails the test.
var removedOnPurpose = map[string]string{
	"AllowScopedInstanceProfileCreationActions": "the nodes' instance profile already exists: Karpenter is given its name and never creates one",
	"AllowScopedInstanceProfileTagActions":      "Karpenter never creates an instance profile, so it has none of its own to tag",
	"AllowScopedInstanceProfileActions":         "Karpenter never creates an instance profile, so it never changes or deletes one",
	"AllowZonalShiftStatusReadOnly":             "the product does not enable ARC zonal shift for Karpenter, so the controller needs no zonal-shift read",
}

// launchResources are the resources of upstream's
// AllowScopedEC2InstanceAccessActions the product does not grant as upstream
// does. Subnets and security groups are granted with the statement's actions
// in conditionedOnPurpose's statement; capacity reservations only as the
// platform's terms select them (ReservationStatements, TestReservations),
// none with no terms, as here.
var launchResources = []string{"capacity-reservation/*", "security-group/*", "subnet/*"}

// conditionedOnPurpose are the statements that grant launchResources with
// the conditions the product adds, written out as the JSON they must be,
// and why.
func conditionedOnPurpose(p policy.ControllerParams) map[string]map[string]any {
	arn := func(r string) string { return "arn:" + p.Partition + ":ec2:" + p.Region + ":*:" + r }
	return map[string]map[string]any{
		// Whoever writes an EC2NodeClass in one cluster must not launch
		// into another cluster's network in the same account and region.
		"AllowScopedEC2InstanceAccessActionsInClusterVPC": {
			"Effect":    "Allow",
			"Action":    []any{"ec2:CreateFleet", "ec2:RunInstances"},
			"Resource":  []any{arn("security-group/*"), arn("subnet/*")},
			"Condition": map[string]any{"ArnLike": map[string]any{"ec2:Vpc": []any{"arn:" + p.Partition + ":ec2:" + p.Region + ":*:vpc/" + p.VPC}}},
		},
	}
}

// testParams returns controller parameters in a partition, built by hand so
// the test does not depend on the naming package's builders.
func testParams(partition, region string) policy.ControllerParams {
	return policy.ControllerParams{
		Partition:   partition,
		Region:      region,
		Account:     "123456789012",
		ClusterName: "prod-eu",
		ClusterARN:  "arn:" + partition + ":eks:" + region + ":123456789012:cluster/prod-eu",
		QueueARN:    "arn:" + partition + ":sqs:" + region + ":123456789012:prod-eu-karpenter",
		NodeRoleARN: "arn:" + partition + ":iam::123456789012:role/nodes/prod-eu-node",
		VPC:         "vpc-0fa4e5d6c7b8a9012",
	}
}

func TestControllerMatchesUpstream(t *testing.T) {
	cases := map[string]struct {
		reason string
		params policy.ControllerParams
	}{
		"Commercial": {
			reason: "In the aws partition the policy must be upstream's, less the statements removed on purpose, with launches conditioned on purpose.",
			params: testParams("aws", "eu-west-3"),
		},
		"China": {
			reason: "In aws-cn the policy must be upstream's with the aws-cn partition substituted, less the statements removed on purpose, with launches conditioned on purpose.",
			params: testParams("aws-cn", "cn-north-1"),
		},
		"GovCloud": {
			reason: "In aws-us-gov the policy must be upstream's with the aws-us-gov partition substituted, less the statements removed on purpose, with launches conditioned on purpose.",
			params: testParams("aws-us-gov", "us-gov-west-1"),
		},
	}
	for _, v := range versions.All {
		for name, tc := range cases {
			t.Run(v.Version+"/"+name, func(t *testing.T) {
				ref := loadReference(t, v.Reference, tc.params)
				want := withConditions(t, withoutRemoved(t, policy.NormaliseStatements(t, ref)), tc.params)

				doc := v.ControllerPolicy(tc.params, nil)
				got := policy.NormaliseStatements(t, policy.ParseJSON(t, doc.JSON()))

				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("\n%s\nKarpenter %s's policy, gates off: -upstream (less removals, with conditions), +got:\n%s", tc.reason, v.Version, diff)
				}
				if v := policy.ParseJSON(t, doc.JSON())["Version"]; v != "2012-10-17" {
					t.Errorf("\n%s\nVersion = %v, want 2012-10-17", tc.reason, v)
				}
			})
		}
	}
}

func TestControllerPartitions(t *testing.T) {
	cases := map[string]struct {
		reason    string
		partition string
		region    string
	}{
		"Commercial": {
			reason:    "Every ARN of an aws cluster's policy must be in the aws partition.",
			partition: "aws",
			region:    "eu-west-3",
		},
		"China": {
			reason:    "Every ARN of an aws-cn cluster's policy must be in aws-cn: an aws ARN there matches nothing.",
			partition: "aws-cn",
			region:    "cn-north-1",
		},
		"GovCloud": {
			reason:    "Every ARN of an aws-us-gov cluster's policy must be in aws-us-gov: an aws ARN there matches nothing.",
			partition: "aws-us-gov",
			region:    "us-gov-west-1",
		},
	}
	for _, v := range versions.All {
		for name, tc := range cases {
			t.Run(v.Version+"/"+name, func(t *testing.T) {
				doc := v.ControllerPolicy(testParams(tc.partition, tc.region), versions.AllGates())
				services := map[string]bool{}
				for _, arn := range policy.Arns(policy.ParseJSON(t, doc.JSON())) {
					parts := strings.SplitN(arn, ":", 4)
					if len(parts) < 4 || parts[1] != tc.partition {
						t.Errorf("\n%s\nController(...): ARN %q is not in partition %q", tc.reason, arn, tc.partition)
						continue
					}
					services[parts[2]] = true
				}
				// The policy scopes resources of five services; if none of a
				// service's ARNs were seen, the walk above checked nothing.
				want := map[string]bool{"ec2": true, "eks": true, "iam": true, "sqs": true, "ssm": true}
				if diff := cmp.Diff(want, services); diff != "" {
					t.Errorf("\n%s\nController(...): services with ARNs, -want, +got:\n%s", tc.reason, diff)
				}
			})
		}
	}
}

func TestControllerSize(t *testing.T) {
	// The longest cluster name the XRD allows, and a node role at the deepest
	// IAM path (512 characters) with the longest role name (64 characters).
	cluster := strings.Repeat("c", 44)
	path := "/" + strings.Repeat("platform/", 56) + strings.Repeat("p", 6) + "/"
	role := strings.Repeat("r", 64)
	if len(path) != 512 {
		t.Fatalf("test setup: role path is %d characters, want 512", len(path))
	}
	p := policy.ControllerParams{
		Partition:   "aws-us-gov",
		Region:      "us-gov-west-1",
		Account:     "123456789012",
		ClusterName: cluster,
		ClusterARN:  "arn:aws-us-gov:eks:us-gov-west-1:123456789012:cluster/" + cluster,
		QueueARN:    "arn:aws-us-gov:sqs:us-gov-west-1:123456789012:" + cluster + "-karpenter",
		NodeRoleARN: "arn:aws-us-gov:iam::123456789012:role" + path + role,
		VPC:         "vpc-0123456789abcdef0", // the longest VPC ID: 17 hex digits
	}
	// IAM counts a role's inline policies without whitespace, which is what
	// JSON() writes, against a limit of 10,240 characters.
	const limit = 10240
	for _, v := range versions.All {
		doc := v.ControllerPolicy(p, versions.AllGates())
		if n := len([]rune(doc.JSON())); n >= limit {
			t.Errorf("The policy of Karpenter %s, every gate on, for the longest names must fit the inline policy limit.\nlen(JSON()) = %d, want under %d", v.Version, n, limit)
		}
	}
}

func TestUnknownVersion(t *testing.T) {
	cases := map[string]struct {
		reason  string
		version string
	}{
		"Older": {
			reason:  "A version whose policy is not known must be refused, not served another version's policy.",
			version: "0.37.0",
		},
		"Prefixed": {
			reason:  "Versions are plain semver as the XRD enumerates them; a 'v' prefix is a different, unknown version.",
			version: "v1.15.0",
		},
		"Empty": {
			reason:  "Defaulting the version is the spec package's job; this one must not guess.",
			version: "",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v, err := versions.Get(tc.version)
			if err == nil {
				t.Fatalf("\n%s\nGet(%q): want an error, got %s", tc.reason, tc.version, v.Version)
			}
			for _, want := range []string{`"` + tc.version + `"`, "1.14.1, 1.14.3, 1.15.0, 1.15.2"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("\n%s\nGet(%q): error %q does not name %s", tc.reason, tc.version, err, want)
				}
			}
		})
	}
}

// loadReference reads the upstream reference policy and substitutes its
// CloudFormation placeholders with p.
func loadReference(t *testing.T, file string, p policy.ControllerParams) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatalf("cannot read reference: %v", err)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("cannot parse reference: %v", err)
	}
	r := strings.NewReplacer(
		"${AWS::Partition}", p.Partition,
		"${AWS::Region}", p.Region,
		"${AWS::AccountId}", p.Account,
		"${ClusterName}", p.ClusterName,
		"${KarpenterInterruptionQueue.Arn}", p.QueueARN,
		"${KarpenterNodeRole.Arn}", p.NodeRoleARN,
	)
	out := policy.ReplaceStrings(doc, r).(map[string]any)
	if left := policy.Placeholders(out); len(left) > 0 {
		t.Fatalf("reference has placeholders the test does not substitute: %v", left)
	}
	return out
}

// withoutRemoved drops the statements removed on purpose, failing if one of
// them is not in the reference: a removal that removes nothing is stale.
func withoutRemoved(t *testing.T, statements []map[string]any) []map[string]any {
	t.Helper()
	seen := map[string]bool{}
	var out []map[string]any
	for _, s := range statements {
		sid, _ := s["Sid"].(string)
		if _, ok := removedOnPurpose[sid]; ok {
			seen[sid] = true
			continue
		}
		out = append(out, s)
	}
	for sid := range removedOnPurpose {
		if !seen[sid] {
			t.Errorf("statement %q is removed on purpose but is not in the reference", sid)
		}
	}
	return out
}

// withConditions takes launchResources out of upstream's
// AllowScopedEC2InstanceAccessActions and adds conditionedOnPurpose's
// statements, failing if upstream's statement no longer grants them: a
// condition on a grant upstream dropped is stale.
func withConditions(t *testing.T, statements []map[string]any, p policy.ControllerParams) []map[string]any {
	t.Helper()
	const sid = "AllowScopedEC2InstanceAccessActions"
	moved := map[string]bool{}
	for _, r := range launchResources {
		moved["arn:"+p.Partition+":ec2:"+p.Region+":*:"+r] = true
	}
	var out []map[string]any
	found := false
	for _, s := range statements {
		if s["Sid"] != sid {
			out = append(out, s)
			continue
		}
		found = true
		var kept []any
		for _, r := range s["Resource"].([]any) {
			if moved[r.(string)] {
				delete(moved, r.(string))
				continue
			}
			kept = append(kept, r)
		}
		if len(moved) > 0 {
			t.Errorf("upstream's %s no longer grants %v, which the product conditions", sid, moved)
		}
		c := maps.Clone(s)
		c["Resource"] = kept
		out = append(out, c)
	}
	if !found {
		t.Fatalf("upstream has no statement %s", sid)
	}
	for sid, s := range conditionedOnPurpose(p) {
		c := maps.Clone(s)
		c["Sid"] = sid
		out = append(out, c)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i]["Sid"].(string) < out[j]["Sid"].(string) })
	return out
}

// TestGatedStatements: a gate adds its statements to the versions that know
// it, written out here, and nothing to the others.
func TestGatedStatements(t *testing.T) {
	p := testParams("aws", "eu-west-3")
	reboot := map[string]any{
		"Sid":      "AllowScopedInstanceReboot",
		"Effect":   "Allow",
		"Action":   []any{"ec2:RebootInstances"},
		"Resource": []any{"arn:aws:ec2:eu-west-3:*:instance/*"},
		"Condition": map[string]any{
			"StringEquals": map[string]any{"aws:ResourceTag/kubernetes.io/cluster/prod-eu": []any{"owned"}},
			"StringLike":   map[string]any{"aws:ResourceTag/karpenter.sh/nodepool": []any{"*"}},
		},
	}
	for version, added := range map[string][]map[string]any{"1.14.1": nil, "1.15.0": {reboot}} {
		v, err := versions.Get(version)
		if err != nil {
			t.Fatal(err)
		}
		base := policy.ParseJSON(t, v.ControllerPolicy(p, nil).JSON())["Statement"].([]any)
		gated := policy.ParseJSON(t, v.ControllerPolicy(p, []versions.Gate{versions.RebootForRepair}).JSON())["Statement"].([]any)
		if diff := cmp.Diff(base, gated[:len(base)]); diff != "" {
			t.Errorf("Karpenter %s: RebootForRepair changed the base statements: -base, +gated:\n%s", version, diff)
		}
		var got []map[string]any
		for _, s := range gated[len(base):] {
			got = append(got, s.(map[string]any))
		}
		if diff := cmp.Diff(added, got); diff != "" {
			t.Errorf("Karpenter %s: what RebootForRepair adds, -want, +got:\n%s", version, diff)
		}
	}
}

// TestReservations: the controller may launch into the capacity
// reservations the platform's terms select, and no other.
func TestReservations(t *testing.T) {
	launch := []any{"ec2:RunInstances", "ec2:CreateFleet"}
	cases := map[string]struct {
		reason string
		terms  []policy.Reservation
		want   []any
	}{
		"None": {
			reason: "A platform that offers no reservations grants none: upstream's grant of every reservation is gone.",
		},
		"ByID": {
			reason: "Reservations named by ID are granted by ARN, in one statement, of any account (an ID is unique; a shared reservation is its owner's).",
			terms:  []policy.Reservation{{ID: "cr-0123456789abcdef0"}, {ID: "cr-0fedcba9876543210"}},
			want: []any{map[string]any{
				"Sid": "AllowNamedCapacityReservations", "Effect": "Allow", "Action": launch,
				"Resource": []any{"arn:aws:ec2:eu-west-3:*:capacity-reservation/cr-0123456789abcdef0", "arn:aws:ec2:eu-west-3:*:capacity-reservation/cr-0fedcba9876543210"},
			}},
		},
		"ByTags": {
			reason: "A tag term is one statement requiring all its tags, in its owner's account when named; a value * is any value, as Karpenter reads it.",
			terms: []policy.Reservation{
				{Tags: map[string]string{"team": "ml", "karpenter.sh/discovery": "prod-eu"}, OwnerID: "444455556666"},
				{Tags: map[string]string{"shared-with/prod-eu": "*"}},
				{ID: "cr-0123456789abcdef0"},
			},
			want: []any{
				map[string]any{
					"Sid": "AllowNamedCapacityReservations", "Effect": "Allow", "Action": launch,
					"Resource": []any{"arn:aws:ec2:eu-west-3:*:capacity-reservation/cr-0123456789abcdef0"},
				},
				map[string]any{
					"Sid": "AllowTaggedCapacityReservations0", "Effect": "Allow", "Action": launch,
					"Resource":  []any{"arn:aws:ec2:eu-west-3:444455556666:capacity-reservation/*"},
					"Condition": map[string]any{"StringEquals": map[string]any{"ec2:ResourceTag/team": []any{"ml"}, "ec2:ResourceTag/karpenter.sh/discovery": []any{"prod-eu"}}},
				},
				map[string]any{
					"Sid": "AllowTaggedCapacityReservations1", "Effect": "Allow", "Action": launch,
					"Resource":  []any{"arn:aws:ec2:eu-west-3:*:capacity-reservation/*"},
					"Condition": map[string]any{"StringLike": map[string]any{"ec2:ResourceTag/shared-with/prod-eu": []any{"*"}}},
				},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := testParams("aws", "eu-west-3")
			p.Reservations = tc.terms
			base := policy.ParseJSON(t, policy.ControllerV1_14(testParams("aws", "eu-west-3")).JSON())["Statement"].([]any)
			all := policy.ParseJSON(t, policy.ControllerV1_14(p).JSON())["Statement"].([]any)
			if diff := cmp.Diff(base, all[:len(base)]); diff != "" {
				t.Errorf("\n%s\nthe terms changed the other statements: -without, +with:\n%s", tc.reason, diff)
			}
			var got []any
			if rest := all[len(base):]; len(rest) > 0 {
				got = rest
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nreservation statements, -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestGrantedVPC reads back the VPC a controller policy grants launches
// in, and nothing from a document that grants none.
func TestGrantedVPC(t *testing.T) {
	p := testParams("aws", "eu-west-3")
	p.VPC = "vpc-0c4a7"
	if got := policy.GrantedVPC(policy.ControllerV1_14(p).JSON()); got != "vpc-0c4a7" {
		t.Errorf("GrantedVPC: %q, want vpc-0c4a7", got)
	}
	for _, doc := range []string{"", "{", policy.InterruptionQueue("arn:aws:sqs:eu-west-3:111122223333:q", nil, "arn:aws:iam::111122223333:role/r").JSON()} {
		if got := policy.GrantedVPC(doc); got != "" {
			t.Errorf("GrantedVPC(%.40q): %q, want none", doc, got)
		}
	}
}
