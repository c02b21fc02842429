package policy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// referenceFile is Karpenter's own controller policy, copied from upstream's
// getting-started CloudFormation template with its placeholders kept; see
// testdata/README.md for where it comes from.
const referenceFile = "karpenter-1.15.0-reference.json"

// removedOnPurpose are the upstream statements the product leaves out, and why.
// Anything else missing from, added to or changed in the controller policy is
// a difference from upstream and fails the test.
var removedOnPurpose = map[string]string{
	"AllowScopedInstanceProfileCreationActions": "the nodes' instance profile already exists: Karpenter is given its name and never creates one",
	"AllowScopedInstanceProfileTagActions":      "Karpenter never creates an instance profile, so it has none of its own to tag",
	"AllowScopedInstanceProfileActions":         "Karpenter never creates an instance profile, so it never changes or deletes one",
	"AllowZonalShiftStatusReadOnly":             "the product does not enable ARC zonal shift for Karpenter, so the controller needs no zonal-shift read",
}

// testParams returns controller parameters in a partition, built by hand so
// the test does not depend on the naming package's builders.
func testParams(partition, region string) ControllerParams {
	return ControllerParams{
		Partition:   partition,
		Region:      region,
		Account:     "123456789012",
		ClusterName: "prod-eu",
		ClusterARN:  "arn:" + partition + ":eks:" + region + ":123456789012:cluster/prod-eu",
		QueueARN:    "arn:" + partition + ":sqs:" + region + ":123456789012:prod-eu-karpenter",
		NodeRoleARN: "arn:" + partition + ":iam::123456789012:role/nodes/prod-eu-node",
	}
}

func TestControllerMatchesUpstream(t *testing.T) {
	cases := map[string]struct {
		reason string
		params ControllerParams
	}{
		"Commercial": {
			reason: "In the aws partition the policy must be upstream's, less the statements removed on purpose.",
			params: testParams("aws", "eu-west-3"),
		},
		"China": {
			reason: "In aws-cn the policy must be upstream's with the aws-cn partition substituted, less the statements removed on purpose.",
			params: testParams("aws-cn", "cn-north-1"),
		},
		"GovCloud": {
			reason: "In aws-us-gov the policy must be upstream's with the aws-us-gov partition substituted, less the statements removed on purpose.",
			params: testParams("aws-us-gov", "us-gov-west-1"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ref := loadReference(t, tc.params)
			want := withoutRemoved(t, normaliseStatements(t, ref))

			doc, err := Controller("1.15.0", tc.params)
			if err != nil {
				t.Fatalf("\n%s\nController(...): unexpected error: %v", tc.reason, err)
			}
			got := normaliseStatements(t, parseJSON(t, doc.JSON()))

			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("\n%s\nController(...): -upstream (less removals), +got:\n%s", tc.reason, diff)
			}
			if v := parseJSON(t, doc.JSON())["Version"]; v != "2012-10-17" {
				t.Errorf("\n%s\nController(...): Version = %v, want 2012-10-17", tc.reason, v)
			}
		})
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
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			doc, err := Controller("1.15.0", testParams(tc.partition, tc.region))
			if err != nil {
				t.Fatalf("\n%s\nController(...): unexpected error: %v", tc.reason, err)
			}
			services := map[string]bool{}
			for _, arn := range arns(parseJSON(t, doc.JSON())) {
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

func TestControllerSize(t *testing.T) {
	// The longest cluster name the XRD allows, and a node role at the deepest
	// IAM path (512 characters) with the longest role name (64 characters).
	cluster := strings.Repeat("c", 44)
	path := "/" + strings.Repeat("platform/", 56) + strings.Repeat("p", 6) + "/"
	role := strings.Repeat("r", 64)
	if len(path) != 512 {
		t.Fatalf("test setup: role path is %d characters, want 512", len(path))
	}
	p := ControllerParams{
		Partition:   "aws-us-gov",
		Region:      "us-gov-west-1",
		Account:     "123456789012",
		ClusterName: cluster,
		ClusterARN:  "arn:aws-us-gov:eks:us-gov-west-1:123456789012:cluster/" + cluster,
		QueueARN:    "arn:aws-us-gov:sqs:us-gov-west-1:123456789012:" + cluster + "-karpenter",
		NodeRoleARN: "arn:aws-us-gov:iam::123456789012:role" + path + role,
	}
	doc, err := Controller("1.15.0", p)
	if err != nil {
		t.Fatalf("Controller(...): unexpected error: %v", err)
	}
	// IAM counts a role's inline policies without whitespace, which is what
	// JSON() writes, against a limit of 10,240 characters.
	const limit = 10240
	if n := len([]rune(doc.JSON())); n >= limit {
		t.Errorf("The policy of the longest names must fit the inline policy limit.\nlen(Controller(...).JSON()) = %d, want under %d", n, limit)
	}
}

func TestControllerUnknownVersion(t *testing.T) {
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
			reason:  "Defaulting the version is the spec package's job; the policy package must not guess.",
			version: "",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			doc, err := Controller(tc.version, testParams("aws", "eu-west-3"))
			if err == nil {
				t.Fatalf("\n%s\nController(%q, ...): want an error, got none", tc.reason, tc.version)
			}
			for _, want := range []string{`"` + tc.version + `"`, "1.15.0"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("\n%s\nController(%q, ...): error %q does not name %s", tc.reason, tc.version, err, want)
				}
			}
			if diff := cmp.Diff(Document{}, doc); diff != "" {
				t.Errorf("\n%s\nController(%q, ...): want no document, -want, +got:\n%s", tc.reason, tc.version, diff)
			}
		})
	}
}

func TestKnownVersions(t *testing.T) {
	want := []string{"1.15.0"}
	if diff := cmp.Diff(want, KnownVersions()); diff != "" {
		t.Errorf("KnownVersions() must list the versions the XRD enumerates.\n-want, +got:\n%s", diff)
	}
}

// loadReference reads the upstream reference policy and substitutes its
// CloudFormation placeholders with p.
func loadReference(t *testing.T, p ControllerParams) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", referenceFile))
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
	out := replaceStrings(doc, r).(map[string]any)
	if left := placeholders(out); len(left) > 0 {
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

// parseJSON decodes a policy document as generic JSON data.
func parseJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(s), &doc); err != nil {
		t.Fatalf("cannot parse policy %s: %v", s, err)
	}
	return doc
}

// normaliseStatements returns a document's statements in a form where two
// equivalent policies are equal: statements sorted by Sid, Action and Resource
// as sorted lists, a Principal's services as sorted lists, and every condition
// value as a list (a single string is a one-element list). The order of
// condition values is kept.
func normaliseStatements(t *testing.T, doc map[string]any) []map[string]any {
	t.Helper()
	raw, ok := doc["Statement"].([]any)
	if !ok {
		t.Fatalf("policy has no Statement list: %v", doc)
	}
	out := make([]map[string]any, 0, len(raw))
	for _, r := range raw {
		s, ok := r.(map[string]any)
		if !ok {
			t.Fatalf("statement is not an object: %v", r)
		}
		out = append(out, normaliseStatement(t, s))
	}
	sort.SliceStable(out, func(i, j int) bool {
		si, _ := out[i]["Sid"].(string)
		sj, _ := out[j]["Sid"].(string)
		return si < sj
	})
	return out
}

func normaliseStatement(t *testing.T, s map[string]any) map[string]any {
	t.Helper()
	out := make(map[string]any, len(s))
	for k, v := range s {
		switch k {
		case "Action", "NotAction", "Resource", "NotResource":
			out[k] = sortedList(t, v)
		case "Principal":
			if m, ok := v.(map[string]any); ok {
				p := make(map[string]any, len(m))
				for kind, ids := range m {
					p[kind] = sortedList(t, ids)
				}
				v = p
			}
			out[k] = v
		case "Condition":
			ops, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("Condition is not an object: %v", v)
			}
			c := make(map[string]any, len(ops))
			for op, keys := range ops {
				km, ok := keys.(map[string]any)
				if !ok {
					t.Fatalf("Condition operator %s is not an object: %v", op, keys)
				}
				n := make(map[string]any, len(km))
				for key, val := range km {
					n[key] = list(t, val)
				}
				c[op] = n
			}
			out[k] = c
		default:
			out[k] = v
		}
	}
	return out
}

// list reads a JSON string or list of strings as a list.
func list(t *testing.T, v any) []any {
	t.Helper()
	switch v := v.(type) {
	case string:
		return []any{v}
	case []any:
		for _, e := range v {
			if _, ok := e.(string); !ok {
				t.Fatalf("list element is not a string: %v", e)
			}
		}
		return append([]any(nil), v...)
	default:
		t.Fatalf("want a string or a list of strings, got %T %v", v, v)
		return nil
	}
}

func sortedList(t *testing.T, v any) []any {
	t.Helper()
	l := list(t, v)
	sort.Slice(l, func(i, j int) bool { return l[i].(string) < l[j].(string) })
	return l
}

// replaceStrings applies r to every string of v, object keys included.
func replaceStrings(v any, r *strings.Replacer) any {
	switch v := v.(type) {
	case string:
		return r.Replace(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = replaceStrings(e, r)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[r.Replace(k)] = replaceStrings(e, r)
		}
		return out
	default:
		return v
	}
}

// strs returns every string of v, object keys included.
func strs(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, strs(e)...)
		}
		return out
	case map[string]any:
		var out []string
		for k, e := range v {
			out = append(out, k)
			out = append(out, strs(e)...)
		}
		return out
	default:
		return nil
	}
}

// arns returns every string of v that is an ARN.
func arns(v any) []string {
	var out []string
	for _, s := range strs(v) {
		if strings.HasPrefix(s, "arn:") {
			out = append(out, s)
		}
	}
	return out
}

// placeholders returns every string of v that still holds a CloudFormation
// placeholder.
func placeholders(v any) []string {
	var out []string
	for _, s := range strs(v) {
		if strings.Contains(s, "${") {
			out = append(out, s)
		}
	}
	return out
}
