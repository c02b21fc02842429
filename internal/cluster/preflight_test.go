package cluster

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/do-now/function-karpenter/internal/awsres"
	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/nodepools"
)

// A statement of a policy document, as IAM reads it.
type statement struct {
	Sid       string
	Effect    string
	Action    oneOrMore
	Resource  oneOrMore
	Condition map[string]map[string]oneOrMore
}

// oneOrMore is a policy value that may be one string or a list of them.
type oneOrMore []string

func (o *oneOrMore) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*o = []string{one}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(o))
}

// glob matches IAM's wildcards: * any run, ? one character.
func glob(pattern, s string, fold bool) bool {
	if fold {
		pattern, s = strings.ToLower(pattern), strings.ToLower(s)
	}
	re := "^" + strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(pattern)) + "$"
	return regexp.MustCompile(re).MatchString(s)
}

// authorizes says which Allow statement of doc grants a, with IAM's
// rules for the condition operators the controller policy uses; "" when
// none does. The preflight's own variables in a's resource stand for the
// identifiers AWS returned.
func authorizes(t *testing.T, doc string, region string, a Authorization) string {
	t.Helper()
	var d struct{ Statement []statement }
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		t.Fatalf("policy: %v", err)
	}
	resource := scriptVar.ReplaceAllString(a.Resource, "id-0123456789abcdef0")
	ctx := map[string][]string{"aws:RequestedRegion": {region}}
	for k, v := range a.Context {
		ctx[k] = v
	}
	for _, s := range d.Statement {
		if s.Effect != "Allow" || !anyGlob(s.Action, a.Action, true) || !anyGlob(s.Resource, resource, false) {
			continue
		}
		if conditionsHold(t, s.Condition, ctx) {
			return s.Sid
		}
	}
	return ""
}

func anyGlob(patterns []string, s string, fold bool) bool {
	for _, p := range patterns {
		if glob(p, s, fold) {
			return true
		}
	}
	return false
}

func conditionsHold(t *testing.T, cond map[string]map[string]oneOrMore, ctx map[string][]string) bool {
	t.Helper()
	for op, keys := range cond {
		for key, want := range keys {
			got, present := ctx[key]
			ok := false
			switch op {
			case "StringEquals":
				ok = present && all(got, func(g string) bool { return anyEqual(want, g) })
			case "StringLike":
				ok = present && all(got, func(g string) bool { return anyGlob(want, g, false) })
			case "StringEqualsIfExists":
				ok = !present || all(got, func(g string) bool { return anyEqual(want, g) })
			case "ArnLike":
				ok = present && all(got, func(g string) bool { return anyArn(want, g) })
			case "ForAllValues:StringEquals":
				ok = all(got, func(g string) bool { return anyEqual(want, g) })
			default:
				t.Fatalf("the test does not evaluate condition operator %s", op)
			}
			if !ok {
				return false
			}
		}
	}
	return true
}

// anyArn matches an ARN with IAM's ArnLike: each of its six colon-separated
// parts on its own.
func anyArn(patterns []string, arn string) bool {
	a := strings.SplitN(arn, ":", 6)
	for _, p := range patterns {
		if pp := strings.SplitN(p, ":", 6); len(pp) == 6 && len(a) == 6 {
			match := true
			for i := range pp {
				match = match && glob(pp[i], a[i], false)
			}
			if match {
				return true
			}
		}
	}
	return false
}

func all(vs []string, f func(string) bool) bool {
	for _, v := range vs {
		if !f(v) {
			return false
		}
	}
	return true
}

func anyEqual(vs []string, s string) bool {
	for _, v := range vs {
		if v == s {
			return true
		}
	}
	return false
}

// preflightConfigs are claims whose preflights differ: both pools or only
// the private one, security groups by tag and by name, a pinned and the
// latest AMI, one architecture or two, a feature gate on.
func preflightConfigs(t *testing.T) map[string]*config.Config {
	t.Helper()
	return map[string]*config.Config{
		"Defaults": load(t, map[string]any{}),
		"PrivateOnlyLatestAMI": loadClaim(t, map[string]any{
			"pools": map[string]any{
				"private": map[string]any{"amiAlias": "al2023@latest", "architectures": []any{"arm64"}},
				"public":  map[string]any{"enabled": false},
			},
		}, map[string]any{"nodes": map[string]any{"allowLatestAmi": true}}),
		"GateOn": load(t, map[string]any{"controller": map[string]any{"featureGates": []any{"NodeRepair", "RebootForRepair"}}}),
	}
}

// TestPreflightNeedsOnlyWhatKarpenterIsGranted holds every AWS call of the
// preflight against the controller policy the claim gets: each request IAM
// evaluates for it is allowed by a statement, so the preflight passes
// under least privilege. And the action is the one the CLI call names:
// `aws sqs get-queue-url` is sqs:GetQueueUrl.
func TestPreflightNeedsOnlyWhatKarpenterIsGranted(t *testing.T) {
	for name, c := range preflightConfigs(t) {
		t.Run(name, func(t *testing.T) {
			doc, err := awsres.ControllerPolicy(c)
			if err != nil {
				t.Fatal(err)
			}
			_, calls := Preflight(c)
			checks := map[string]bool{}
			for _, call := range calls {
				checks[call.Check.Name] = true
				named := call.Args[0] + ":" + operation(call.Args[1])
				if call.Args[0] == "sts" {
					if len(call.Authorizations) != 0 {
						t.Errorf("%s needs no permission, yet declares %v", named, call.Authorizations)
					}
					continue
				}
				if len(call.Authorizations) == 0 || call.Authorizations[0].Action != named {
					t.Errorf("aws %s %s: first authorization %v, want %s", call.Args[0], call.Args[1], call.Authorizations, named)
				}
				for _, a := range call.Authorizations {
					if sid := authorizes(t, doc, c.Spec.Cluster.Region, a); sid == "" {
						t.Errorf("check %s: %s on %s (context %v) is granted by no statement of the controller policy", call.Check.Name, a.Action, a.Resource, a.Context)
					}
				}
			}
			for _, ch := range Checks {
				if !checks[ch.Name] {
					t.Errorf("check %s makes no call", ch.Name)
				}
			}
		})
	}
}

// TestPreflightCatchesAMissingGrant: the evaluator refuses what the policy
// does not grant, so the test above can fail — here for a policy without
// each statement the preflight relies on.
func TestPreflightCatchesAMissingGrant(t *testing.T) {
	c := load(t, map[string]any{})
	doc, err := awsres.ControllerPolicy(c)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	_ = json.Unmarshal([]byte(doc), &d)
	_, calls := Preflight(c)
	for _, sid := range []string{"AllowInterruptionQueueActions", "AllowInstanceProfileReadActions", "AllowPassingInstanceRole", "AllowScopedEC2InstanceActionsWithTags", "AllowScopedEC2InstanceAccessActionsInClusterVPC", "AllowSSMReadActions"} {
		var kept []any
		for _, s := range d["Statement"].([]any) {
			if s.(map[string]any)["Sid"] != sid {
				kept = append(kept, s)
			}
		}
		b, _ := json.Marshal(map[string]any{"Version": d["Version"], "Statement": kept})
		refused := false
		for _, call := range calls {
			for _, a := range call.Authorizations {
				refused = refused || authorizes(t, string(b), c.Spec.Cluster.Region, a) == ""
			}
		}
		if !refused {
			t.Errorf("without %s every preflight call is still granted: the preflight does not exercise it", sid)
		}
	}
}

// operation is a CLI operation as IAM names it: get-queue-url, GetQueueUrl.
func operation(cli string) string {
	var b strings.Builder
	for _, w := range strings.Split(cli, "-") {
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}

// runPreflight runs c's preflight script with /bin/sh and the fake aws
// (fakeaws_test.go) under env, and returns its exit code, termination
// message and output, and the launch templates it left behind.
func runPreflight(t *testing.T, c *config.Config, env ...string) (code int, msg, out string, left []string) {
	t.Helper()
	script, _ := Preflight(c)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, state := t.TempDir(), t.TempDir()
	if err := os.Symlink(self, filepath.Join(bin, "aws")); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "termination-log")
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = append([]string{"PATH=" + bin + ":/usr/bin:/bin", "TERMINATION_LOG=" + log, "RETRY_SECONDS=0",
		"FAKE_AWS_STATE=" + state, "AWS_REGION=" + c.Spec.Cluster.Region}, env...)
	b, _ := cmd.CombinedOutput()
	m, _ := os.ReadFile(log)
	entries, _ := os.ReadDir(state)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "lt-") {
			left = append(left, e.Name())
		}
	}
	return cmd.ProcessState.ExitCode(), string(m), string(b), left
}

// TestPreflightScript runs the preflight's script with /bin/sh and the
// fake aws: every check passing, then each check failing in turn with
// AWS's own error, which must end the script with that check's exit code
// and leave the check's name and AWS's words as the termination message,
// and no launch template behind.
func TestPreflightScript(t *testing.T) {
	c := load(t, map[string]any{})
	if code, msg, out, left := runPreflight(t, c); code != 0 || msg != "" || len(left) > 0 {
		t.Fatalf("every call answered: exit %d, termination message %q, templates left %v\n%s", code, msg, left, out)
	}
	cases := []struct {
		fail, answer string
		env          []string
		check        Check
		says         string
	}{
		{fail: "sts get-caller-identity", answer: "Unable to locate credentials. You can configure credentials by running \"aws configure\".", check: CheckCredentials, says: "Unable to locate credentials"},
		{env: []string{"FAKE_IDENTITY=arn:aws:sts::111122223333:assumed-role/nodes/i-0123"}, check: CheckCredentials, says: "assumed-role/nodes/i-0123"},
		{env: []string{"FAKE_NO_CREDENTIALS=6"}, check: CheckCredentials, says: "Unable to locate credentials"},
		{fail: "sqs get-queue-url", answer: "An error occurred (AWS.SimpleQueueService.NonExistentQueue) when calling the GetQueueUrl operation: The specified queue does not exist.", check: CheckQueue, says: "NonExistentQueue"},
		{fail: "sqs receive-message", answer: "An error occurred (AccessDenied) when calling the ReceiveMessage operation: explicit deny in a resource-based policy", check: CheckQueue, says: "ReceiveMessage"},
		{fail: "iam get-instance-profile", answer: "An error occurred (AccessDenied) when calling the GetInstanceProfile operation: with an explicit deny in a permissions boundary", check: CheckProfile, says: "explicit deny in a permissions boundary"},
		{env: []string{"FAKE_PROFILE_ROLE=arn:aws:iam::111122223333:role/admin"}, check: CheckProfile, says: "does not carry the node role"},
		{fail: "eks describe-cluster", answer: "An error occurred (AccessDeniedException) when calling the DescribeCluster operation: explicit deny in a service control policy", check: CheckCluster, says: "service control policy"},
		{fail: "ec2 describe-subnets", answer: "None", check: CheckSubnets, says: "pool private: no subnet has the tags"},
		{env: []string{"FAKE_SUBNETS=subnet-0a " + fakeVPC + " eu-west-3a;subnet-0e vpc-0other eu-west-3b"}, check: CheckSubnets, says: "subnet subnet-0e is in vpc-0other, not in the cluster's VPC " + fakeVPC},
		{fail: "Name=group-name", answer: "None", check: CheckGroups, says: "pool public: no security group matches Name=group-name,Values=prod-eu"},
		{env: []string{"FAKE_GROUPS=sg-0a vpc-0other"}, check: CheckGroups, says: "security group sg-0a is in vpc-0other"},
		{fail: "ssm get-parameter", answer: "An error occurred (ParameterNotFound) when calling the GetParameter operation: ", check: CheckAMI, says: "ParameterNotFound"},
		{fail: "ec2 create-launch-template --dry-run", answer: "An error occurred (UnauthorizedOperation) when calling the CreateLaunchTemplate operation: You are not authorized to perform this operation.", check: CheckTemplate, says: "UnauthorizedOperation"},
		{fail: "ec2 create-fleet", answer: "Parameter validation failed:\nInvalid type for parameter LaunchTemplateConfigs", check: CheckFleet, says: "Parameter validation failed"},
		// Not a refusal, and not DryRunOperation either: it proves nothing, so it fails.
		{fail: "ec2 create-fleet", answer: "An error occurred (Unsupported) when calling the CreateFleet operation: Your requested instance type (m6i.2xlarge) is not supported in your requested Availability Zone.", check: CheckFleet, says: "Unsupported"},
	}
	for _, tc := range cases {
		t.Run(tc.check.Name+"/"+tc.fail+strings.Join(tc.env, ","), func(t *testing.T) {
			env := append([]string{"FAIL=" + tc.fail, "ANSWER=" + tc.answer}, tc.env...)
			if tc.fail == "" {
				env = tc.env
			}
			code, msg, out, left := runPreflight(t, c, env...)
			if code != tc.check.ExitCode {
				t.Errorf("exit %d, want %s's %d\n%s", code, tc.check.Name, tc.check.ExitCode, out)
			}
			if !strings.HasPrefix(msg, tc.check.Name+": ") || !strings.Contains(msg, tc.says) {
				t.Errorf("termination message %q, want it to name %s and say %q", msg, tc.check.Name, tc.says)
			}
			if len(left) > 0 {
				t.Errorf("launch templates %v left behind", left)
			}
		})
	}
}

// TestPreflightChecksWhatThePoolMayUse: a zone a pool may launch in
// without a subnet fails the subnets check; the first credentials missing,
// as Pod Identity propagates, are waited for.
func TestPreflightChecksWhatThePoolMayUse(t *testing.T) {
	zoned := loadClaim(t, map[string]any{"pools": map[string]any{"private": map[string]any{"zones": []any{"eu-west-3a", "eu-west-3c"}}}},
		map[string]any{"pools": map[string]any{"allowed": map[string]any{"zones": []any{"eu-west-3a", "eu-west-3b", "eu-west-3c"}}}})
	code, msg, out, _ := runPreflight(t, zoned, "FAKE_SUBNETS=subnet-0a "+fakeVPC+" eu-west-3a;subnet-0b "+fakeVPC+" eu-west-3b")
	if code != CheckSubnets.ExitCode || !strings.Contains(msg, "pool private may launch in eu-west-3c, where none of its subnets is") {
		t.Errorf("a zone without a subnet: exit %d, %q\n%s", code, msg, out)
	}
	if code, msg, out, _ := runPreflight(t, load(t, map[string]any{}), "FAKE_NO_CREDENTIALS=2"); code != 0 {
		t.Errorf("credentials served on the third try: exit %d, %q\n%s", code, msg, out)
	}
}

// TestPreflightReportsPricing: where a region-deny SCP keeps Karpenter
// from the pricing API's region, the preflight passes and says so in its
// termination message, which the Pod keeps.
func TestPreflightReportsPricing(t *testing.T) {
	c := load(t, map[string]any{})
	code, msg, out, _ := runPreflight(t, c, "FAKE_SCPS=regions=eu-west-3")
	if code != 0 || !strings.HasPrefix(msg, "passed, with warning pricing: Karpenter reads prices in eu-central-1 and cannot") {
		t.Errorf("pricing out of reach: exit %d, termination message %q\n%s", code, msg, out)
	}
}

// TestPreflightProvesSpot: an organisation that forbids Spot lets the
// on-demand fleet through; the pools may buy Spot and prefer it, so the
// preflight fails on the Spot fleet, naming the pool. A claim whose pools
// buy on-demand only passes under the same SCP.
func TestPreflightProvesSpot(t *testing.T) {
	c := load(t, map[string]any{})
	code, msg, out, left := runPreflight(t, c, "FAKE_SCPS=nospot")
	if code != CheckFleet.ExitCode || !strings.HasPrefix(msg, "fleet: pool private (spot): ") || !strings.Contains(msg, "spot-instances-request") {
		t.Errorf("Spot forbidden: exit %d, termination message %q; want %d, the private pool's Spot fleet refused\n%s", code, msg, CheckFleet.ExitCode, out)
	}
	if len(left) > 0 {
		t.Errorf("launch templates left behind: %v", left)
	}
	onDemand := loadClaim(t, map[string]any{"pools": map[string]any{
		"private": map[string]any{"capacityTypes": []any{"on-demand"}},
		"public":  map[string]any{"capacityTypes": []any{"on-demand"}},
	}}, map[string]any{})
	if code, msg, out, _ := runPreflight(t, onDemand, "FAKE_SCPS=nospot"); code != 0 {
		t.Errorf("on-demand pools under an SCP forbidding Spot: exit %d, %q\n%s", code, msg, out)
	}
}

// TestPreflightAsksWhatKarpenterAsks holds the preflight's launch against
// Karpenter's own, under the service control policies organisations
// write: the preflight passes exactly where Karpenter's launch passes. The
// fake evaluates the script's create-fleet on the template the script
// created; Karpenter's launch is modelled here from its v1.15.0 source:
// the EC2NodeClass's metadata options and root volume in the launch
// template (pkg/providers/launchtemplate/types.go, Build, of the base's
// EC2NodeClass, which test/flux holds nodepools.Launch against), and
// CreateFleet tagging the instance, the volume and the fleet with the
// pool's tags (pkg/providers/instance/types.go, NewCreateFleetInputBuilder).
func TestPreflightAsksWhatKarpenterAsks(t *testing.T) {
	c := load(t, map[string]any{})
	yes := true
	shape := nodepools.Launch(c)
	for _, tc := range []struct {
		scps      string
		karpenter bool // whether Karpenter's launch passes, as this test knows AWS
	}{
		{scps: "", karpenter: true},
		{scps: "imdsv2", karpenter: true},
		{scps: "encryption", karpenter: true},
		{scps: "imdsv2,encryption", karpenter: true},
		// The trap: the network interface is tagged through the launch
		// template only, so a tag required on RunInstances is missing.
		{scps: "tags=socle.do-now.io/tenant", karpenter: false},
		{scps: "tags=CostCenter", karpenter: false},
	} {
		t.Run(tc.scps, func(t *testing.T) {
			policies := scps(strings.Split(tc.scps, ","))
			karpenterPasses := true
			for _, s := range nodepools.Selections(c) {
				lt := template{MetadataOptions: &struct {
					HTTPTokens string `json:"HttpTokens"`
				}{shape.HTTPTokens}}
				lt.BlockDeviceMappings = append(lt.BlockDeviceMappings, struct{ Ebs *struct{ Encrypted *bool } }{&struct{ Encrypted *bool }{&yes}})
				var fleetTags []tagSpec
				for _, rt := range []string{"instance", "volume", "fleet"} {
					ts := tagSpec{ResourceType: rt}
					for k, v := range Tags(c, s) {
						ts.Tags = append(ts.Tags, tag{k, v})
					}
					fleetTags = append(fleetTags, ts)
				}
				for _, r := range fakeContexts(lt, fleetTags, c.Spec.Cluster.Region) {
					karpenterPasses = karpenterPasses && policies.denied(r) == ""
				}
			}
			if karpenterPasses != tc.karpenter {
				t.Fatalf("Karpenter's launch passes: %v, the case says %v", karpenterPasses, tc.karpenter)
			}
			code, msg, out, left := runPreflight(t, c, "FAKE_SCPS="+tc.scps)
			if (code == 0) != karpenterPasses {
				t.Errorf("the preflight exits %d (%q) where Karpenter's launch passes: %v\n%s", code, msg, karpenterPasses, out)
			}
			if !karpenterPasses && (code != CheckFleet.ExitCode || !strings.Contains(msg, "with an explicit deny in a service control policy")) {
				t.Errorf("refused: exit %d, %q, want the fleet check with AWS's words", code, msg)
			}
			if len(left) > 0 {
				t.Errorf("launch templates %v left behind", left)
			}
		})
	}
}
