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
	"github.com/do-now/function-karpenter/internal/spec"
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
func preflightConfigs(t *testing.T) map[string]*spec.Config {
	t.Helper()
	return map[string]*spec.Config{
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
	for _, sid := range []string{"AllowInterruptionQueueActions", "AllowInstanceProfileReadActions", "AllowPassingInstanceRole", "AllowScopedEC2InstanceActionsWithTags", "AllowSSMReadActions"} {
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

// fakeAWS is an aws CLI that answers the preflight's calls as AWS would
// for a healthy account, except the call whose arguments contain fail,
// which it refuses with AWS's words (or, for "None", answers with no
// match).
const fakeAWS = `#!/bin/sh
args="$*"
if [ -n "$FAIL" ] && case "$args" in *"$FAIL"*) true;; *) false;; esac; then
  if [ "$ANSWER" = None ]; then echo None; exit 0; fi
  echo "$ANSWER" >&2; exit 254
fi
case "$args" in
  "sts get-caller-identity"*) echo arn:aws:sts::111122223333:assumed-role/prod-eu-karpenter/eks-prod-eu-karpenter ;;
  "sqs get-queue-url"*) echo https://sqs.eu-west-3.amazonaws.com/111122223333/prod-eu-karpenter ;;
  "iam get-instance-profile"*) echo arn:aws:iam::111122223333:role/nodes ;;
  "eks describe-cluster"*) echo 1.33 ;;
  "ec2 describe-subnets"*) echo subnet-0123 ;;
  "ec2 describe-security-groups"*) echo sg-0123 ;;
  "ssm get-parameter"*) echo ami-0123 ;;
  "ec2 run-instances"*) echo "An error occurred (DryRunOperation) when calling the RunInstances operation: Request would have succeeded, but DryRun flag is set." >&2; exit 254 ;;
  *) echo "fake aws: unexpected call: $args" >&2; exit 2 ;;
esac
`

// TestPreflightScript runs the preflight's script with /bin/sh and a fake
// aws CLI: every check passing, then each check failing in turn with AWS's
// own error, which must end the script with that check's exit code and
// leave the check's name and AWS's words as the termination message.
func TestPreflightScript(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh on this machine")
	}
	c := load(t, map[string]any{})
	script, _ := Preflight(c)
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "aws"), []byte(fakeAWS), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(fail, answer string) (int, string, string) {
		log := filepath.Join(t.TempDir(), "termination-log")
		cmd := exec.Command("sh", "-c", script)
		cmd.Env = append(os.Environ(), "PATH="+bin+":/usr/bin:/bin", "TERMINATION_LOG="+log, "FAIL="+fail, "ANSWER="+answer, "RETRY_SECONDS=0")
		out, _ := cmd.CombinedOutput()
		msg, _ := os.ReadFile(log)
		return cmd.ProcessState.ExitCode(), string(msg), string(out)
	}
	if code, msg, out := run("", ""); code != 0 || msg != "" {
		t.Fatalf("every call answered: exit %d, termination message %q\n%s", code, msg, out)
	}
	cases := []struct {
		fail, answer string
		check        Check
		says         string
	}{
		{"sts get-caller-identity", "Unable to locate credentials. You can configure credentials by running \"aws configure\".", CheckCredentials, "Unable to locate credentials"},
		{"sqs get-queue-url", "An error occurred (AWS.SimpleQueueService.NonExistentQueue) when calling the GetQueueUrl operation: The specified queue does not exist.", CheckQueue, "NonExistentQueue"},
		{"iam get-instance-profile", "An error occurred (AccessDenied) when calling the GetInstanceProfile operation: with an explicit deny in a permissions boundary", CheckProfile, "explicit deny in a permissions boundary"},
		{"ec2 describe-subnets", "None", CheckSubnets, "pool private: no subnet has the tags"},
		{"Name=group-name", "None", CheckGroups, "pool public: no security group matches Name=group-name,Values=prod-eu"},
		{"ssm get-parameter", "An error occurred (ParameterNotFound) when calling the GetParameter operation: ", CheckAMI, "ParameterNotFound"},
		{"eks describe-cluster", "An error occurred (AccessDeniedException) when calling the DescribeCluster operation: explicit deny in a service control policy", CheckAMI, "service control policy"},
		{"ec2 run-instances", "Parameter validation failed:\nInvalid type for parameter IamInstanceProfile.Name", CheckLaunch, "Parameter validation failed"},
		{"ec2 run-instances", "An error occurred (UnauthorizedOperation) when calling the RunInstances operation: You are not authorized to perform this operation. User is not authorized to perform: ec2:RunInstances with an explicit deny in a service control policy.", CheckLaunch, "UnauthorizedOperation"},
	}
	for _, tc := range cases {
		t.Run(tc.check.Name+"/"+tc.fail, func(t *testing.T) {
			code, msg, out := run(tc.fail, tc.answer)
			if code != tc.check.ExitCode {
				t.Errorf("exit %d, want %s's %d\n%s", code, tc.check.Name, tc.check.ExitCode, out)
			}
			if !strings.HasPrefix(msg, tc.check.Name+": ") || !strings.Contains(msg, tc.says) {
				t.Errorf("termination message %q, want it to name %s and say %q", msg, tc.check.Name, tc.says)
			}
		})
	}
	// The instance profile goes as JSON: a name with a comma stays one
	// name, where the CLI's shorthand would split it.
	comma := loadClaim(t, map[string]any{"nodeIdentity": map[string]any{"roleArn": "arn:aws:iam::111122223333:role/nodes", "instanceProfile": "nodes,eu"}}, map[string]any{})
	if commaScript, _ := Preflight(comma); !strings.Contains(commaScript, `'--iam-instance-profile' '{"Name":"nodes,eu"}'`) {
		t.Error("the launch does not pass the instance profile as JSON")
	}
	// A dry run that fails for another reason than permissions says
	// nothing of them: a warning, and the preflight passes.
	if code, msg, out := run("ec2 run-instances", "An error occurred (Unsupported) when calling the RunInstances operation: Your requested instance type (m5.large) is not supported in your requested Availability Zone."); code != 0 || msg != "" || !strings.Contains(out, "warning launch") {
		t.Errorf("an unsupported instance type in the dry run: exit %d, message %q\n%s", code, msg, out)
	}
}
