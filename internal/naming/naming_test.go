package naming

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// clusterOf returns a valid cluster name of n characters.
func clusterOf(n int) string {
	return "c" + strings.Repeat("x", n-1)
}

// namesOf are the names For must give cluster under /socle/, written out.
func namesOf(cluster string) Names {
	return Names{
		Role:                 cluster + "-karpenter",
		RolePath:             "/socle/" + cluster + "/",
		RolePolicy:           cluster + "-karpenter-controller",
		FinalCheckRole:       cluster + "-karpenter-final",
		FinalCheckRolePolicy: cluster + "-karpenter-final-check",
		Queue:                cluster + "-karpenter",
		Rules: map[string]string{
			"health":               cluster + "-karpenter-health",
			"spot-interruption":    cluster + "-karpenter-spot",
			"rebalance":            cluster + "-karpenter-rebalance",
			"state-change":         cluster + "-karpenter-state",
			"capacity-reservation": cluster + "-karpenter-capacity",
		},
	}
}

func TestFor(t *testing.T) {
	type want struct {
		names Names
		// errs are the errors of Check, without their detail.
		errs []errorID
		// details are what each error's detail must name, in order.
		details [][]string
	}
	long := clusterOf(45)
	cases := map[string]struct {
		reason     string
		cluster    string
		pathPrefix string
		want       want
	}{
		"Normal": {
			reason:     "Every name is the cluster name, -karpenter and a suffix; the role lives under <prefix><cluster>/.",
			cluster:    "prod-eu",
			pathPrefix: "/socle/",
			want: want{
				names: Names{
					Role:                 "prod-eu-karpenter",
					RolePath:             "/socle/prod-eu/",
					RolePolicy:           "prod-eu-karpenter-controller",
					FinalCheckRole:       "prod-eu-karpenter-final",
					FinalCheckRolePolicy: "prod-eu-karpenter-final-check",
					Queue:                "prod-eu-karpenter",
					Rules: map[string]string{
						"health":               "prod-eu-karpenter-health",
						"spot-interruption":    "prod-eu-karpenter-spot",
						"rebalance":            "prod-eu-karpenter-rebalance",
						"state-change":         "prod-eu-karpenter-state",
						"capacity-reservation": "prod-eu-karpenter-capacity",
					},
				},
			},
		},
		"MaxLength": {
			reason:     "A 44-character cluster name, the XRD's maximum, must fit every AWS limit: its longest rule name is exactly 64 characters.",
			cluster:    clusterOf(44),
			pathPrefix: "/socle/",
			want: want{
				names: namesOf(clusterOf(44)),
			},
		},
		"OneOverMaxLength": {
			reason:     "A 45-character cluster name makes the rebalance rule name 65 characters, one over EventBridge's limit: the error is on spec.cluster.name, names the rule and the limit.",
			cluster:    long,
			pathPrefix: "/socle/",
			want: want{
				names:   namesOf(long),
				errs:    []errorID{{Type: field.ErrorTypeInvalid, Field: "spec.cluster.name", BadValue: long}},
				details: [][]string{{"EventBridge rule", long + "-karpenter-rebalance", "65", "64"}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := For(tc.cluster, tc.pathPrefix)
			if diff := cmp.Diff(tc.want.names, got); diff != "" {
				t.Errorf("\n%s\nFor(%q, %q): -want, +got:\n%s", tc.reason, tc.cluster, tc.pathPrefix, diff)
			}
			errs := got.Check(field.NewPath("spec", "cluster", "name"))
			if diff := cmp.Diff(tc.want.errs, ids(errs)); diff != "" {
				t.Errorf("\n%s\nCheck(): -want, +got:\n%s", tc.reason, diff)
			}
			for i, words := range tc.want.details {
				if i >= len(errs) {
					break
				}
				for _, w := range words {
					if !strings.Contains(errs[i].Detail, w) {
						t.Errorf("\n%s\nCheck(): error %d detail %q does not name %q", tc.reason, i, errs[i].Detail, w)
					}
				}
			}
		})
	}
}

// errorID is what identifies a field error, without its wording.
type errorID struct {
	Type     field.ErrorType
	Field    string
	BadValue any
}

func ids(errs field.ErrorList) []errorID {
	var out []errorID
	for _, e := range errs {
		out = append(out, errorID{Type: e.Type, Field: e.Field, BadValue: e.BadValue})
	}
	return out
}

// parseCase is an ARN given to a parser and what the parser must return:
// want, with an error quoting the ARN when err (want is then the zero value).
type parseCase[T any] struct {
	reason string
	arn    string
	want   T
	err    bool
}

// testParse runs parse, named name, on every case, and then more, if any,
// on each result returned without an error.
func testParse[T any](t *testing.T, name string, parse func(string) (T, error), cases map[string]parseCase[T], more func(t *testing.T, tc parseCase[T], got T)) {
	t.Helper()
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			got, err := parse(tc.arn)
			if (err != nil) != tc.err {
				t.Fatalf("\n%s\n%s(%q): error = %v, want error: %t", tc.reason, name, tc.arn, err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\n%s(%q): -want, +got:\n%s", tc.reason, name, tc.arn, diff)
			}
			if err != nil {
				if !strings.Contains(err.Error(), `"`+tc.arn+`"`) {
					t.Errorf("\n%s\n%s(%q): error %q does not quote the input", tc.reason, name, tc.arn, err)
				}
				return
			}
			if more != nil {
				more(t, tc, got)
			}
		})
	}
}

func TestParseRoleARN(t *testing.T) {
	cases := map[string]parseCase[RoleARN]{
		"Plain": {
			reason: "A role at the root has path /.",
			arn:    "arn:aws:iam::123456789012:role/prod-eu-node",
			want: RoleARN{
				ARN: "arn:aws:iam::123456789012:role/prod-eu-node", Partition: "aws", Account: "123456789012", Path: "/", Name: "prod-eu-node",
			},
		},
		"WithPath": {
			reason: "A role's path is everything between role and the last slash, both slashes included.",
			arn:    "arn:aws:iam::123456789012:role/eks/nodes/prod-eu-node",
			want: RoleARN{
				ARN: "arn:aws:iam::123456789012:role/eks/nodes/prod-eu-node", Partition: "aws", Account: "123456789012", Path: "/eks/nodes/", Name: "prod-eu-node",
			},
		},
		"China": {
			reason: "A role in aws-cn is in partition aws-cn.",
			arn:    "arn:aws-cn:iam::123456789012:role/prod-cn-node",
			want: RoleARN{
				ARN: "arn:aws-cn:iam::123456789012:role/prod-cn-node", Partition: "aws-cn", Account: "123456789012", Path: "/", Name: "prod-cn-node",
			},
		},
		"GovCloud": {
			reason: "A role in aws-us-gov is in partition aws-us-gov.",
			arn:    "arn:aws-us-gov:iam::210987654321:role/platform/prod-gov-node",
			want: RoleARN{
				ARN: "arn:aws-us-gov:iam::210987654321:role/platform/prod-gov-node", Partition: "aws-us-gov", Account: "210987654321", Path: "/platform/", Name: "prod-gov-node",
			},
		},
		"ShortAccount": {
			reason: "An account ID is exactly 12 digits.",
			arn:    "arn:aws:iam::12345678901:role/prod-eu-node",
			err:    true,
		},
		"LongAccount": {
			reason: "An account ID is exactly 12 digits.",
			arn:    "arn:aws:iam::1234567890123:role/prod-eu-node",
			err:    true,
		},
		"WrongService": {
			reason: "An STS assumed-role ARN is a session, not a role that can be passed to EC2.",
			arn:    "arn:aws:sts::123456789012:assumed-role/prod-eu-node/i-0123456789abcdef0",
			err:    true,
		},
		"PolicyGivenAsRole": {
			reason: "A policy ARN is not a role ARN.",
			arn:    "arn:aws:iam::123456789012:policy/prod-eu-node",
			err:    true,
		},
		"InstanceProfileGivenAsRole": {
			reason: "An instance profile ARN is not a role ARN, though nodes use both.",
			arn:    "arn:aws:iam::123456789012:instance-profile/prod-eu-node",
			err:    true,
		},
		"UnknownPartition": {
			reason: "Only the aws, aws-cn and aws-us-gov partitions are supported.",
			arn:    "arn:aws-iso:iam::123456789012:role/prod-eu-node",
			err:    true,
		},
		"NameTooLong": {
			reason: "IAM role names are at most 64 characters.",
			arn:    "arn:aws:iam::123456789012:role/" + strings.Repeat("n", 65),
			err:    true,
		},
		"NoName": {
			reason: "A path alone names no role.",
			arn:    "arn:aws:iam::123456789012:role/nodes/",
			err:    true,
		},
		"Empty": {
			reason: "An empty string is no ARN.",
			arn:    "",
			err:    true,
		},
	}
	testParse(t, "ParseRoleARN", ParseRoleARN, cases, func(t *testing.T, tc parseCase[RoleARN], got RoleARN) {
		// The parts must rebuild the ARN the builders would write.
		a := Account{Partition: got.Partition, ID: got.Account}
		if rebuilt := a.RoleARN(got.Path, got.Name); rebuilt != tc.arn {
			t.Errorf("\n%s\nAccount.RoleARN(parts of %q) = %q, want the input back", tc.reason, tc.arn, rebuilt)
		}
	})
}

func TestParsePolicyARN(t *testing.T) {
	cases := map[string]parseCase[Partition]{
		"AWSManaged": {
			reason: "AWS managed policies have account 'aws' instead of an account ID.",
			arn:    "arn:aws:iam::aws:policy/PowerUserAccess",
			want:   "aws",
		},
		"AWSManagedWithPath": {
			reason: "AWS managed policies may have a path.",
			arn:    "arn:aws:iam::aws:policy/service-role/AmazonEC2ContainerServiceforEC2Role",
			want:   "aws",
		},
		"CustomerManaged": {
			reason: "A customer managed policy has the account ID.",
			arn:    "arn:aws:iam::123456789012:policy/socle-boundary",
			want:   "aws",
		},
		"ChinaWithPath": {
			reason: "A policy in aws-cn is in partition aws-cn, path or not.",
			arn:    "arn:aws-cn:iam::123456789012:policy/boundaries/socle-boundary",
			want:   "aws-cn",
		},
		"GovCloud": {
			reason: "A policy in aws-us-gov is in partition aws-us-gov.",
			arn:    "arn:aws-us-gov:iam::123456789012:policy/socle-boundary",
			want:   "aws-us-gov",
		},
		"RoleGivenAsPolicy": {
			reason: "A role ARN cannot be a permissions boundary.",
			arn:    "arn:aws:iam::123456789012:role/socle-boundary",
			err:    true,
		},
		"ShortAccount": {
			reason: "An account ID is exactly 12 digits.",
			arn:    "arn:aws:iam::1234:policy/socle-boundary",
			err:    true,
		},
		"Empty": {
			reason: "An empty string is no ARN.",
			arn:    "",
			err:    true,
		},
	}
	testParse(t, "ParsePolicyARN", ParsePolicyARN, cases, nil)
}

func TestAccount(t *testing.T) {
	type want struct {
		role, queue, queueURL, rule, cluster string
	}
	cases := map[string]struct {
		reason  string
		account Account
		want    want
	}{
		"Commercial": {
			reason:  "In aws, ARNs carry the aws partition and endpoints end in amazonaws.com.",
			account: Account{Partition: "aws", ID: "123456789012", Region: "eu-west-3"},
			want: want{
				role:     "arn:aws:iam::123456789012:role/socle/prod/prod-karpenter",
				queue:    "arn:aws:sqs:eu-west-3:123456789012:prod-karpenter",
				queueURL: "https://sqs.eu-west-3.amazonaws.com/123456789012/prod-karpenter",
				rule:     "arn:aws:events:eu-west-3:123456789012:rule/prod-karpenter-health",
				cluster:  "arn:aws:eks:eu-west-3:123456789012:cluster/prod",
			},
		},
		"China": {
			reason:  "In aws-cn, ARNs carry the aws-cn partition and endpoints end in amazonaws.com.cn.",
			account: Account{Partition: "aws-cn", ID: "123456789012", Region: "cn-north-1"},
			want: want{
				role:     "arn:aws-cn:iam::123456789012:role/socle/prod/prod-karpenter",
				queue:    "arn:aws-cn:sqs:cn-north-1:123456789012:prod-karpenter",
				queueURL: "https://sqs.cn-north-1.amazonaws.com.cn/123456789012/prod-karpenter",
				rule:     "arn:aws-cn:events:cn-north-1:123456789012:rule/prod-karpenter-health",
				cluster:  "arn:aws-cn:eks:cn-north-1:123456789012:cluster/prod",
			},
		},
		"GovCloud": {
			reason:  "In aws-us-gov, ARNs carry the aws-us-gov partition and endpoints end in amazonaws.com.",
			account: Account{Partition: "aws-us-gov", ID: "123456789012", Region: "us-gov-west-1"},
			want: want{
				role:     "arn:aws-us-gov:iam::123456789012:role/socle/prod/prod-karpenter",
				queue:    "arn:aws-us-gov:sqs:us-gov-west-1:123456789012:prod-karpenter",
				queueURL: "https://sqs.us-gov-west-1.amazonaws.com/123456789012/prod-karpenter",
				rule:     "arn:aws-us-gov:events:us-gov-west-1:123456789012:rule/prod-karpenter-health",
				cluster:  "arn:aws-us-gov:eks:us-gov-west-1:123456789012:cluster/prod",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := tc.account
			got := want{
				role:     a.RoleARN("/socle/prod/", "prod-karpenter"),
				queue:    a.QueueARN("prod-karpenter"),
				queueURL: a.QueueURL("prod-karpenter"),
				rule:     a.RuleARN("prod-karpenter-health"),
				cluster:  a.ClusterARN("prod"),
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\nAccount builders: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
