package cluster

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/do-now/function-karpenter/internal/nodepools"
	"github.com/do-now/function-karpenter/internal/spec"
)

// A Check is one thing the preflight proves before the controller starts,
// under the controller's own ServiceAccount. A failed check exits with its
// code and writes its name and AWS's own error text as the Pod's
// termination message, which the claim's AccessCheckReady condition shows.
type Check struct {
	Name     string
	ExitCode int
	// Proves is what a pass means, as the README lists it.
	Proves string
}

// The checks, in the order they run.
var (
	CheckCredentials = Check{"credentials", 10, "the Pod Identity credentials arrive (sts get-caller-identity, which needs no permission)"}
	CheckQueue       = Check{"interruption-queue", 11, "the interruption queue is reachable: sqs get-queue-url, as Karpenter does at startup"}
	CheckProfile     = Check{"instance-profile", 12, "the nodes' instance profile is readable and carries the node role (iam get-instance-profile)"}
	CheckSubnets     = Check{"subnets", 13, "each pool's subnet selector matches a subnet (ec2 describe-subnets with the EC2NodeClass's tags)"}
	CheckGroups      = Check{"security-groups", 14, "each pool's security-group selector matches a group (ec2 describe-security-groups, likewise)"}
	CheckAMI         = Check{"ami", 15, "each pool's pinned AMI alias resolves, for each architecture it allows (eks describe-cluster for the Kubernetes version, ssm get-parameter as Karpenter resolves the alias)"}
	CheckLaunch      = Check{"launch", 16, "a dry-run launch with the nodes' instance profile and the launch tags is authorized (ec2 run-instances --dry-run: DryRunOperation, not UnauthorizedOperation), so no permissions boundary or SCP refuses it"}
	Checks           = []Check{CheckCredentials, CheckQueue, CheckProfile, CheckSubnets, CheckGroups, CheckAMI, CheckLaunch}
)

// An Authorization is one request IAM evaluates for a call: an action on a
// resource, with the request's context keys.
type Authorization struct {
	Action   string
	Resource string
	Context  map[string][]string
}

// A Call is one AWS CLI call of the preflight and what IAM evaluates for
// it; none for sts get-caller-identity.
type Call struct {
	Check Check
	// Args follow `aws`: service, operation, parameters.
	Args           []string
	Authorizations []Authorization
}

// Launch instance types by architecture: any type of the architecture
// proves the authorization; these are offered in every commercial region.
var launchType = map[string]string{"amd64": "m5.large", "arm64": "m6g.large"}

// amiArch is how AL2023's SSM parameters spell an architecture.
var amiArch = map[string]string{"amd64": "x86_64", "arm64": "arm64"}

// A preflight is the script being written and the calls it makes.
type preflight struct {
	c     *spec.Config
	b     strings.Builder
	calls []Call
}

// Preflight returns the access check's script and every AWS call it
// makes. Each check's selectors and tags are read from the EC2NodeClasses
// the pools are patched with, so it proves what Karpenter will look for.
func Preflight(c *spec.Config) (string, []Call) {
	p := &preflight{c: c}
	p.line(`set -u`)
	p.line(`log=${TERMINATION_LOG:-/dev/termination-log}`)
	p.line(`# fail CHECK CODE TEXT: the check's name and AWS's own words, as the Pod's termination message.`)
	p.line(`fail() { printf '%s: %.3500s\n' "$1" "$3" >"$log"; printf 'FAILED %s: %s\n' "$1" "$3" >&2; exit "$2"; }`)
	p.line(`pass() { printf 'ok %s: %s\n' "$1" "$2"; }`)

	p.line(`# ` + CheckCredentials.Name + `: Pod Identity may take a few seconds to serve the first credentials.`)
	p.line(`i=0`)
	p.line(`until out=$(aws sts get-caller-identity --query Arn --output text 2>&1); do`)
	p.line(`  i=$((i+1)); [ "$i" -ge 6 ] && fail ` + CheckCredentials.Name + ` ` + fmt.Sprint(CheckCredentials.ExitCode) + ` "$out"; sleep "${RETRY_SECONDS:-5}"`)
	p.line(`done`)
	p.line(`pass ` + CheckCredentials.Name + ` "$out"`)
	p.calls = append(p.calls, Call{Check: CheckCredentials, Args: []string{"sts", "get-caller-identity"}})

	acct := c.Account
	p.call("", CheckQueue, []Authorization{{Action: "sqs:GetQueueUrl", Resource: acct.QueueARN(c.Names.Queue)}},
		"QueueUrl", "sqs", "get-queue-url", "--queue-name", c.Names.Queue)

	profile := c.Spec.NodeIdentity.InstanceProfile
	p.call("role", CheckProfile, []Authorization{{Action: "iam:GetInstanceProfile", Resource: fmt.Sprintf("arn:%s:iam::%s:instance-profile/%s", acct.Partition, acct.ID, profile)}},
		"InstanceProfile.Roles[0].Arn", "iam", "get-instance-profile", "--instance-profile-name", profile)
	p.line(fmt.Sprintf(`[ "$role" = %s ] || fail %s %d %s"$role"`, quote(c.NodeRole.ARN), CheckProfile.Name, CheckProfile.ExitCode,
		quote(fmt.Sprintf("instance profile %s does not carry the node role %s but ", profile, c.NodeRole.ARN))))

	regional := map[string][]string{"aws:RequestedRegion": {acct.Region}}
	clusterName := c.Spec.Cluster.Name
	p.call("k8s", CheckAMI, []Authorization{{Action: "eks:DescribeCluster", Resource: acct.ClusterARN(clusterName)}},
		"cluster.version", "eks", "describe-cluster", "--name", clusterName)
	for _, s := range nodepools.Selections(c) {
		sv := shellName(s.Pool)
		subnetFilters := filters("tag:", s.SubnetTags)
		p.call("subnet_"+sv, CheckSubnets, []Authorization{{Action: "ec2:DescribeSubnets", Resource: "*", Context: regional}},
			"Subnets[0].SubnetId", append([]string{"ec2", "describe-subnets", "--filters"}, subnetFilters...)...)
		p.none("subnet_"+sv, CheckSubnets, fmt.Sprintf("pool %s: no subnet has the tags %s", s.Pool, strings.Join(subnetFilters, " ")))

		groupFilters := filters("tag:", s.SecurityGroupTags)
		if s.SecurityGroupName != "" {
			groupFilters = []string{"Name=group-name,Values=" + s.SecurityGroupName}
		}
		p.call("group_"+sv, CheckGroups, []Authorization{{Action: "ec2:DescribeSecurityGroups", Resource: "*", Context: regional}},
			"SecurityGroups[0].GroupId", append([]string{"ec2", "describe-security-groups", "--filters"}, groupFilters...)...)
		p.none("group_"+sv, CheckGroups, fmt.Sprintf("pool %s: no security group matches %s", s.Pool, strings.Join(groupFilters, " ")))

		version := strings.TrimPrefix(s.AMIAlias, "al2023@")
		for i, arch := range s.Architectures {
			name := `amazon-eks-node-al2023-` + amiArch[arch] + `-standard-${k8s}-` + version
			if version == "latest" {
				name = "recommended"
			}
			param := `/aws/service/eks/optimized-ami/${k8s}/amazon-linux-2023/` + amiArch[arch] + `/standard/` + name + `/image_id`
			ami := "ami_" + sv + "_" + amiArch[arch]
			p.call(ami, CheckAMI, []Authorization{{Action: "ssm:GetParameter", Resource: fmt.Sprintf("arn:%s:ssm:%s::parameter%s", acct.Partition, acct.Region, param)}},
				"Parameter.Value", "ssm", "get-parameter", "--name", param)
			if i == 0 {
				p.launch(s, arch, ami, "subnet_"+sv, "group_"+sv)
			}
		}
	}
	p.line(`pass all "every check passed"`)
	return p.b.String(), p.calls
}

// call writes one AWS CLI call of check, keeping the text it prints
// (--query) in the shell variable v, or failing the check with AWS's
// error. The script's own variables in args (${k8s} and such) expand;
// nothing else does.
func (p *preflight) call(v string, check Check, auth []Authorization, query string, args ...string) {
	p.calls = append(p.calls, Call{Check: check, Args: args, Authorizations: auth})
	if v == "" {
		v = "out"
	}
	words := []string{"aws"}
	for _, a := range args {
		words = append(words, shellWord(a))
	}
	p.line(fmt.Sprintf(`%s=$(%s --query %s --output text 2>&1) || fail %s %d "$%s"`, v, strings.Join(words, " "), quote(query), check.Name, check.ExitCode, v))
	p.line(fmt.Sprintf(`pass %s "$%s"`, check.Name, v))
}

// none fails check when the query in v selected nothing (the CLI prints
// None).
func (p *preflight) none(v string, check Check, why string) {
	p.line(fmt.Sprintf(`[ "$%s" != None ] || fail %s %d %s`, v, check.Name, check.ExitCode, quote(why)))
}

// launch writes the dry-run launch of pool s: the image, subnet and group
// found, the nodes' instance profile, and the tags Karpenter launches with.
func (p *preflight) launch(s nodepools.Selection, arch, ami, subnet, group string) {
	c := p.c
	acct := c.Account
	tags := maps.Clone(s.Tags)
	maps.Copy(tags, map[string]string{
		"kubernetes.io/cluster/" + c.Spec.Cluster.Name: "owned",
		"eks:eks-cluster-name":                         c.Spec.Cluster.Name,
		"karpenter.sh/nodepool":                        s.Pool,
		"karpenter.k8s.aws/ec2nodeclass":               s.Pool,
	})
	resourceTypes := []string{"instance", "volume", "network-interface"}
	type tag struct{ Key, Value string }
	type tagSpec struct {
		ResourceType string
		Tags         []tag
	}
	var specs []tagSpec
	keys := slices.Sorted(maps.Keys(tags))
	for _, rt := range resourceTypes {
		ts := tagSpec{ResourceType: rt}
		for _, k := range keys {
			ts.Tags = append(ts.Tags, tag{k, tags[k]})
		}
		specs = append(specs, ts)
	}
	tagJSON, _ := json.Marshal(specs) // strings only: always marshals
	// As JSON, not the CLI's shorthand: a profile's name may hold a comma.
	profileJSON, _ := json.Marshal(map[string]string{"Name": c.Spec.NodeIdentity.InstanceProfile})

	context := map[string][]string{"aws:TagKeys": keys}
	for k, v := range tags {
		context["aws:RequestTag/"+k] = []string{v}
	}
	ec2 := func(r string) string {
		return fmt.Sprintf("arn:%s:ec2:%s:%s:%s", acct.Partition, acct.Region, acct.ID, r)
	}
	var auth []Authorization
	for _, r := range []string{
		fmt.Sprintf("arn:%s:ec2:%s::image/${%s}", acct.Partition, acct.Region, ami),
		ec2("subnet/${" + subnet + "}"), ec2("security-group/${" + group + "}"),
	} {
		auth = append(auth, Authorization{Action: "ec2:RunInstances", Resource: r})
	}
	for _, rt := range resourceTypes {
		auth = append(auth,
			Authorization{Action: "ec2:RunInstances", Resource: ec2(rt + "/*"), Context: context},
			Authorization{Action: "ec2:CreateTags", Resource: ec2(rt + "/*"), Context: merged(context, map[string][]string{"ec2:CreateAction": {"RunInstances"}})})
	}
	auth = append(auth, Authorization{Action: "iam:PassRole", Resource: c.NodeRole.ARN, Context: map[string][]string{"iam:PassedToService": {"ec2.amazonaws.com"}}})
	args := []string{"ec2", "run-instances", "--dry-run",
		"--image-id", "${" + ami + "}", "--instance-type", launchType[arch],
		"--subnet-id", "${" + subnet + "}", "--security-group-ids", "${" + group + "}",
		"--iam-instance-profile", string(profileJSON),
		"--tag-specifications", string(tagJSON)}
	p.calls = append(p.calls, Call{Check: CheckLaunch, Args: args, Authorizations: auth})
	words := []string{"aws"}
	for _, a := range args {
		words = append(words, shellWord(a))
	}
	// A dry run never succeeds: AWS answers DryRunOperation when it would
	// have launched. A refusal fails the check, and so does a call the CLI
	// itself rejects (it proved nothing); anything else (a capacity or
	// offering error) says nothing of permissions.
	p.line(fmt.Sprintf(`out=$(%s 2>&1)`, strings.Join(words, " ")))
	p.line(`case "$out" in`)
	p.line(fmt.Sprintf(`  *DryRunOperation*) pass %s %s ;;`, CheckLaunch.Name, quote("pool "+s.Pool+": AWS would launch it")))
	p.line(fmt.Sprintf(`  *UnauthorizedOperation*|*AccessDenied*|*"not authorized"*|*"Parameter validation failed"*|*"Unknown options"*) fail %s %d %s"$out" ;;`, CheckLaunch.Name, CheckLaunch.ExitCode, quote("pool "+s.Pool+": ")))
	p.line(fmt.Sprintf(`  *) printf 'warning %s: pool %s: the dry run proved nothing of permissions: %%s\n' "$out" ;;`, CheckLaunch.Name, s.Pool))
	p.line(`esac`)
}

func (p *preflight) line(s string) { p.b.WriteString(s + "\n") }

// filters are EC2 filters matching every tag, sorted by key.
func filters(prefix string, tags map[string]string) []string {
	out := make([]string, 0, len(tags))
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		out = append(out, fmt.Sprintf("Name=%s%s,Values=%s", prefix, k, tags[k]))
	}
	return out
}

func merged(a, b map[string][]string) map[string][]string {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

// shellName is a pool name as part of a shell variable name.
func shellName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, s)
}

// shellWord is a as one shell word: quoted, except the script's own
// variables in it (${name}, as the preflight writes them), which expand.
// Nothing else in a expands, whatever it holds.
func shellWord(a string) string {
	var b strings.Builder
	last := 0
	for _, m := range scriptVar.FindAllStringIndex(a, -1) {
		if last < m[0] {
			b.WriteString(quote(a[last:m[0]]))
		}
		b.WriteString(`"` + a[m[0]:m[1]] + `"`)
		last = m[1]
	}
	if last < len(a) || last == 0 {
		b.WriteString(quote(a[last:]))
	}
	return b.String()
}

// scriptVar is how the preflight refers to its own variables: lower case,
// so no platform or tenant value can name one of the environment's.
var scriptVar = regexp.MustCompile(`\$\{(k8s|(?:subnet|group|ami)_[a-z0-9_]+)\}`)

// quote is s as one single-quoted shell word.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
