package cluster

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/do-now/function-karpenter/internal/ami"
	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/nodepools"
)

// A Check is one thing the preflight proves before the controller starts,
// under the controller's own ServiceAccount. A failed check exits with its
// code and writes its name and AWS's own error text as the Pod's
// termination message, which the claim's AccessCheckReady condition shows.
type Check struct {
	Name     string
	ExitCode int
	// Proves is what a pass means, as docs/operating.md lists it.
	Proves string
}

// The checks, in the order they run. Their exit codes are API: the claim
// shows them, and they never change meaning.
var (
	CheckCredentials = Check{"credentials", 10, "the Pod runs as the controller role (sts get-caller-identity answers assumed-role/<cluster>-karpenter/...), not as no one and not as the node role reached through IMDS"}
	CheckQueue       = Check{"interruption-queue", 11, "the interruption queue is readable as Karpenter reads it: sqs get-queue-url, then sqs receive-message with a visibility timeout of 0, which hides no message from the controller"}
	CheckProfile     = Check{"instance-profile", 12, "the nodes' instance profile is readable and carries the node role (iam get-instance-profile)"}
	CheckCluster     = Check{"cluster", 17, "the EKS cluster is readable: its Kubernetes version (which AMIs serve it) and its VPC (eks describe-cluster)"}
	CheckSubnets     = Check{"subnets", 13, "each pool's subnet selector matches subnets, every one in the cluster's VPC, one in each zone the pool allows (ec2 describe-subnets with the EC2NodeClass's tags)"}
	CheckGroups      = Check{"security-groups", 14, "each pool's security-group selector matches groups, every one in the cluster's VPC (ec2 describe-security-groups, likewise)"}
	CheckAMI         = Check{"ami", 15, "each pool's pinned AMI alias resolves for the cluster's Kubernetes version, for each architecture it allows (ssm get-parameter, the parameter Karpenter resolves the alias to)"}
	CheckTemplate    = Check{"launch-template", 16, "each pool's launch template is created as Karpenter creates it (ec2 create-launch-template, dry run then for real: IMDSv2 with hop limit 1, the encrypted gp3 root volume, the network interface and launch template tags), so no boundary or SCP refuses it"}
	CheckFleet       = Check{"fleet", 18, "each pool launches as Karpenter launches (ec2 create-fleet --dry-run, instant, on the launch template, an instance type the pool may use, with Karpenter's instance, volume and fleet tags), on-demand and, for a pool that may buy Spot, Spot: DryRunOperation, and nothing else, passes"}
	Checks           = []Check{CheckCredentials, CheckQueue, CheckProfile, CheckCluster, CheckSubnets, CheckGroups, CheckAMI, CheckTemplate, CheckFleet}
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

// A preflight is the script being written and the calls it makes.
type preflight struct {
	c     *config.Config
	b     strings.Builder
	calls []Call
}

// Preflight returns the access check's script and every AWS call it
// makes. Each check's selectors and tags are read from the EC2NodeClasses
// the pools are patched with, and each launch call has the shape Karpenter's
// own has, so it proves what Karpenter will ask.
func Preflight(c *config.Config) (string, []Call) {
	p := &preflight{c: c}
	p.line(`set -u`)
	p.line(`log=${TERMINATION_LOG:-/dev/termination-log}`)
	p.line(`warnings=`)
	p.line(`# fail CHECK CODE TEXT: the check's name and AWS's own words, as the Pod's termination message.`)
	p.line(`fail() { printf '%s: %.3500s\n' "$1" "$3" >"$log"; printf 'FAILED %s: %s\n' "$1" "$3" >&2; exit "$2"; }`)
	p.line(`pass() { printf 'ok %s: %s\n' "$1" "$2"; }`)
	p.line(`# warn CHECK TEXT: what Karpenter would silently degrade on; the Pod still succeeds, and says so.`)
	p.line(`warn() { printf 'warning %s: %s\n' "$1" "$2"; warnings="${warnings}warning $1: $2; "; }`)
	p.line(`# The launch templates the preflight creates go, whatever happens.`)
	p.line(`templates=`)
	p.line(`cleanup() { for t in $templates; do aws ec2 delete-launch-template --launch-template-id "$t" >/dev/null 2>&1; done; }`)
	p.line(`trap cleanup EXIT`)

	p.credentials()
	acct := c.Account
	p.call("url", CheckQueue, []Authorization{{Action: "sqs:GetQueueUrl", Resource: acct.QueueARN(c.Names.Queue)}},
		"QueueUrl", "sqs", "get-queue-url", "--queue-name", c.Names.Queue)
	// A visibility timeout of 0: a message received here stays visible to
	// the controller.
	p.call("", CheckQueue, []Authorization{{Action: "sqs:ReceiveMessage", Resource: acct.QueueARN(c.Names.Queue)}},
		"length(Messages || `[]`)", "sqs", "receive-message", "--queue-url", "${url}",
		"--max-number-of-messages", "1", "--visibility-timeout", "0", "--wait-time-seconds", "0")

	profile := c.Spec.NodeIdentity.InstanceProfile
	p.call("role", CheckProfile, []Authorization{{Action: "iam:GetInstanceProfile", Resource: fmt.Sprintf("arn:%s:iam::%s:instance-profile/%s", acct.Partition, acct.ID, profile)}},
		"InstanceProfile.Roles[0].Arn", "iam", "get-instance-profile", "--instance-profile-name", profile)
	p.line(fmt.Sprintf(`[ "$role" = %s ] || fail %s %d %s"$role"`, quote(c.NodeRole.ARN), CheckProfile.Name, CheckProfile.ExitCode,
		quote(fmt.Sprintf("instance profile %s does not carry the node role %s but ", profile, c.NodeRole.ARN))))

	clusterName := c.Spec.Cluster.Name
	p.call("k8s", CheckCluster, []Authorization{{Action: "eks:DescribeCluster", Resource: acct.ClusterARN(clusterName)}},
		"cluster.version", "eks", "describe-cluster", "--name", clusterName)
	p.call("vpc", CheckCluster, []Authorization{{Action: "eks:DescribeCluster", Resource: acct.ClusterARN(clusterName)}},
		"cluster.resourcesVpcConfig.vpcId", "eks", "describe-cluster", "--name", clusterName)

	for _, s := range nodepools.Selections(c) {
		p.pool(s)
	}
	p.pricing()
	p.line(`[ -z "$warnings" ] || printf 'passed, with %s\n' "$warnings" >"$log"`)
	p.line(`pass all "every check passed"`)
	return p.b.String(), p.calls
}

// credentials proves the Pod runs as the controller role. Pod Identity
// may take a few seconds to serve the first credentials; until it does,
// the CLI finds none (IMDS is out of reach at hop limit 1) or, where IMDS
// is reachable, the node role's: either is retried, then fails.
func (p *preflight) credentials() {
	c := p.c
	session := fmt.Sprintf("arn:%s:sts::%s:assumed-role/%s/", c.Account.Partition, c.Account.ID, c.Names.Role)
	p.line(`# ` + CheckCredentials.Name + `: the controller role's session, once Pod Identity serves it.`)
	p.line(`i=0`)
	p.line(`while :; do`)
	p.line(`  out=$(aws sts get-caller-identity --query Arn --output text 2>&1) && case "$out" in ` + shellPattern(session) + `*) break ;; esac`)
	p.line(fmt.Sprintf(`  i=$((i+1)); [ "$i" -ge 6 ] && fail %s %d "$out"; sleep "${RETRY_SECONDS:-5}"`, CheckCredentials.Name, CheckCredentials.ExitCode))
	p.line(`done`)
	p.line(`pass ` + CheckCredentials.Name + ` "$out"`)
	p.calls = append(p.calls, Call{Check: CheckCredentials, Args: []string{"sts", "get-caller-identity"}})
}

// pool writes the checks of one pool: its subnets and groups in the
// cluster's VPC, its AMIs, then the launch template and the fleet
// Karpenter would ask for.
func (p *preflight) pool(s nodepools.Selection) {
	c := p.c
	acct := c.Account
	sv := shellName(s.Pool)
	regional := map[string][]string{"aws:RequestedRegion": {acct.Region}}

	subnetFilters := filters("tag:", s.SubnetTags)
	subnets := "subnets_" + sv
	p.call(subnets, CheckSubnets, []Authorization{{Action: "ec2:DescribeSubnets", Resource: "*", Context: regional}},
		"Subnets[].[SubnetId,VpcId,AvailabilityZone]", append([]string{"ec2", "describe-subnets", "--filters"}, subnetFilters...)...)
	p.none(subnets, CheckSubnets, fmt.Sprintf("pool %s: no subnet has the tags %s", s.Pool, strings.Join(subnetFilters, " ")))
	p.line(fmt.Sprintf(`subnet_%s=; zones_%s=`, sv, sv))
	p.line(`while read -r id v z; do`)
	p.line(fmt.Sprintf(`  [ "$v" = "$vpc" ] || fail %s %d "pool %s: subnet $id is in $v, not in the cluster's VPC $vpc"`, CheckSubnets.Name, CheckSubnets.ExitCode, s.Pool))
	p.line(fmt.Sprintf(`  [ -n "$subnet_%s" ] || subnet_%s=$id; zones_%s="$zones_%s $z"`, sv, sv, sv, sv))
	p.line(`done <<EOF`)
	p.line(`$` + subnets)
	p.line(`EOF`)
	for _, z := range s.Zones {
		p.line(fmt.Sprintf(`case "$zones_%s " in *" "%s" "*) ;; *) fail %s %d %s ;; esac`, sv, quote(z), CheckSubnets.Name, CheckSubnets.ExitCode,
			quote(fmt.Sprintf("pool %s may launch in %s, where none of its subnets is", s.Pool, z))))
	}
	p.line(fmt.Sprintf(`pass %s "pool %s: $subnet_%s and the others in $vpc"`, CheckSubnets.Name, s.Pool, sv))

	groupFilters := filters("tag:", s.SecurityGroupTags)
	if s.SecurityGroupName != "" {
		groupFilters = []string{"Name=group-name,Values=" + s.SecurityGroupName}
	}
	groups := "groups_" + sv
	p.call(groups, CheckGroups, []Authorization{{Action: "ec2:DescribeSecurityGroups", Resource: "*", Context: regional}},
		"SecurityGroups[].[GroupId,VpcId]", append([]string{"ec2", "describe-security-groups", "--filters"}, groupFilters...)...)
	p.none(groups, CheckGroups, fmt.Sprintf("pool %s: no security group matches %s", s.Pool, strings.Join(groupFilters, " ")))
	p.line(fmt.Sprintf(`group_%s=; group_ids_%s=`, sv, sv))
	p.line(`while read -r id v; do`)
	p.line(fmt.Sprintf(`  [ "$v" = "$vpc" ] || fail %s %d "pool %s: security group $id is in $v, not in the cluster's VPC $vpc"`, CheckGroups.Name, CheckGroups.ExitCode, s.Pool))
	p.line(fmt.Sprintf(`  [ -n "$group_%s" ] || group_%s=$id; group_ids_%s="$group_ids_%s\"$id\","`, sv, sv, sv, sv))
	p.line(`done <<EOF`)
	p.line(`$` + groups)
	p.line(`EOF`)
	p.line(fmt.Sprintf(`group_ids_%s="[${group_ids_%s%%,}]"`, sv, sv))
	p.line(fmt.Sprintf(`pass %s "pool %s: $group_ids_%s in $vpc"`, CheckGroups.Name, s.Pool, sv))

	version := strings.TrimPrefix(s.AMIAlias, ami.Prefix)
	for i, arch := range s.Architectures {
		name := `amazon-eks-node-al2023-` + ami.Arch(arch) + `-standard-${k8s}-` + version
		if version == "latest" {
			name = "recommended"
		}
		param := `/aws/service/eks/optimized-ami/${k8s}/amazon-linux-2023/` + ami.Arch(arch) + `/standard/` + name + `/image_id`
		image := "ami_" + sv + "_" + ami.Arch(arch)
		p.call(image, CheckAMI, []Authorization{{Action: "ssm:GetParameter", Resource: fmt.Sprintf("arn:%s:ssm:%s::parameter%s", acct.Partition, acct.Region, param)}},
			"Parameter.Value", "ssm", "get-parameter", "--name", param)
		if i == 0 {
			p.launch(s, arch, image)
		}
	}
}

// Tags are what Karpenter tags a pool's launch template, instances,
// volumes, network interfaces and fleets with: the EC2NodeClass's own and
// the four it adds (karpenter-provider-aws v1.15.0 pkg/utils/utils.go,
// GetTags).
func Tags(c *config.Config, s nodepools.Selection) map[string]string {
	tags := maps.Clone(s.Tags)
	maps.Copy(tags, map[string]string{
		"kubernetes.io/cluster/" + c.Spec.Cluster.Name: "owned",
		"eks:eks-cluster-name":                         c.Spec.Cluster.Name,
		"karpenter.sh/nodepool":                        s.Pool,
		"karpenter.k8s.aws/ec2nodeclass":               s.Pool,
	})
	return tags
}

type tag struct{ Key, Value string }

type tagSpec struct {
	ResourceType string
	Tags         []tag
}

// tagSpecs tags each resource type with tags, keys sorted.
func tagSpecs(tags map[string]string, types ...string) []tagSpec {
	var out []tagSpec
	for _, rt := range types {
		ts := tagSpec{ResourceType: rt}
		for _, k := range slices.Sorted(maps.Keys(tags)) {
			ts.Tags = append(ts.Tags, tag{k, tags[k]})
		}
		out = append(out, ts)
	}
	return out
}

// The resource types Karpenter v1.15.0 tags in each request: the launch
// template itself (CreateLaunchTemplateInput.TagSpecifications), what the
// launch template's data tags (the network interface; spot requests too,
// for spot templates), and what CreateFleet tags (instance, volume, fleet:
// pkg/providers/instance/types.go, NewCreateFleetInputBuilder).
var (
	templateTagged     = []string{"launch-template"}
	templateDataTagged = []string{"network-interface"}
	fleetTagged        = []string{"instance", "volume", "fleet"}
)

// LaunchTemplateName is the name of the launch template the preflight
// creates for pool, apart from Karpenter's own (karpenter.k8s.aws/<hash>).
func LaunchTemplateName(c *config.Config, pool string) string {
	return "karpenter-preflight/" + c.Spec.Cluster.Name + "/" + pool
}

// launch writes the launch calls of pool s, on the AMI of its first
// architecture: the launch template as Karpenter creates it, first as a
// dry run, then for real (a fleet names an existing template), and a
// dry-run instant fleet on it, as Karpenter launches. The template is
// deleted on exit.
func (p *preflight) launch(s nodepools.Selection, arch, image string) {
	c := p.c
	acct := c.Account
	sv := shellName(s.Pool)
	tags := Tags(c, s)
	shape := nodepools.Launch(c)
	size := resource.MustParse(shape.VolumeSize) // validated as input
	publicIP := s.PublicIP

	data := map[string]any{
		"ImageId":            "${" + image + "}",
		"IamInstanceProfile": map[string]string{"Name": c.Spec.NodeIdentity.InstanceProfile},
		"Monitoring":         map[string]bool{"Enabled": false},
		"MetadataOptions": map[string]any{
			"HttpEndpoint": shape.HTTPEndpoint, "HttpProtocolIpv6": shape.HTTPProtocolIPv6,
			"HttpPutResponseHopLimit": shape.HTTPPutResponseHopLimit, "HttpTokens": shape.HTTPTokens,
			"InstanceMetadataTags": "disabled",
		},
		"BlockDeviceMappings": []any{map[string]any{
			"DeviceName": shape.RootDevice,
			"Ebs": map[string]any{
				"DeleteOnTermination": shape.DeleteOnTermination, "Encrypted": shape.Encrypted, "VolumeType": shape.VolumeType,
				// GiB, rounded up, as Karpenter converts the quantity.
				"VolumeSize": int32(math.Ceil(size.AsApproximateFloat64() / math.Pow(2, 30))),
			},
		}},
		// Karpenter puts the groups on the one network interface it
		// always describes, and the public IP choice with them.
		"NetworkInterfaces": []any{map[string]any{"DeviceIndex": 0, "Groups": "${group_ids_" + sv + "}", "AssociatePublicIpAddress": publicIP}},
		"TagSpecifications": tagSpecs(tags, templateDataTagged...),
		"Placement":         map[string]string{"Tenancy": "default"},
	}
	dataJSON := marshal(data)
	// The groups are a JSON list the script assembled: unquote its
	// reference so it stands as the list.
	dataJSON = strings.Replace(dataJSON, `"${group_ids_`+sv+`}"`, "${group_ids_"+sv+"}", 1)
	name := LaunchTemplateName(c, s.Pool)
	templateTags := marshal(tagSpecs(tags, templateTagged...))

	context := func(extra map[string][]string) map[string][]string {
		out := map[string][]string{"aws:TagKeys": slices.Sorted(maps.Keys(tags))}
		for k, v := range tags {
			out["aws:RequestTag/"+k] = []string{v}
		}
		maps.Copy(out, extra)
		return out
	}
	ec2 := func(r string) string {
		return fmt.Sprintf("arn:%s:ec2:%s:%s:%s", acct.Partition, acct.Region, acct.ID, r)
	}
	templateAuth := []Authorization{
		{Action: "ec2:CreateLaunchTemplate", Resource: ec2("launch-template/*"), Context: context(nil)},
		{Action: "ec2:CreateTags", Resource: ec2("launch-template/*"), Context: context(map[string][]string{"ec2:CreateAction": {"CreateLaunchTemplate"}})},
	}
	templateArgs := []string{"ec2", "create-launch-template", "--launch-template-name", name,
		"--launch-template-data", dataJSON, "--tag-specifications", templateTags}
	p.dryRun(CheckTemplate, s.Pool, templateAuth, templateArgs)
	lt := "lt_" + sv
	p.call(lt, CheckTemplate, templateAuth, "LaunchTemplate.LaunchTemplateId", templateArgs...)
	p.line(fmt.Sprintf(`templates="$templates $%s"`, lt))

	instanceType := LaunchType(s, arch)
	config := []any{map[string]any{
		"LaunchTemplateSpecification": map[string]string{"LaunchTemplateId": "${" + lt + "}", "Version": "$Latest"},
		"Overrides":                   []any{map[string]string{"InstanceType": instanceType, "SubnetId": "${subnet_" + sv + "}"}},
	}}
	// fleet is the instant fleet of one Karpenter asks for, of capacity,
	// with that capacity's allocation options.
	fleet := func(capacity, optionsFlag, strategy string) []string {
		return []string{"ec2", "create-fleet", "--type", "instant",
			"--launch-template-configs", marshal(config),
			"--target-capacity-specification", marshal(map[string]any{"TotalTargetCapacity": 1, "DefaultTargetCapacityType": capacity}),
			optionsFlag, marshal(map[string]string{"AllocationStrategy": strategy}),
			"--tag-specifications", marshal(tagSpecs(tags, fleetTagged...))}
	}
	fleetArgs := fleet("on-demand", "--on-demand-options", "lowest-price")
	var fleetAuth []Authorization
	fleetAuth = append(fleetAuth, Authorization{Action: "ec2:CreateFleet", Resource: ec2("fleet/*"), Context: context(nil)})
	// The subnet and the security group are in the cluster's VPC (the
	// subnets and security-groups checks fail otherwise), which is the VPC
	// the controller policy grants.
	inVPC := map[string][]string{"ec2:Vpc": {ec2("vpc/" + c.ClusterVPC)}}
	for _, r := range []struct {
		arn     string
		context map[string][]string
	}{
		{fmt.Sprintf("arn:%s:ec2:%s::image/${%s}", acct.Partition, acct.Region, image), nil},
		{ec2("subnet/${subnet_" + sv + "}"), inVPC}, {ec2("security-group/${group_" + sv + "}"), inVPC},
	} {
		fleetAuth = append(fleetAuth,
			Authorization{Action: "ec2:CreateFleet", Resource: r.arn, Context: r.context},
			Authorization{Action: "ec2:RunInstances", Resource: r.arn, Context: r.context})
	}
	// The launch template, by the tags it was created with.
	resourceTags := map[string][]string{}
	for k, v := range tags {
		resourceTags["aws:ResourceTag/"+k] = []string{v}
	}
	fleetAuth = append(fleetAuth,
		Authorization{Action: "ec2:CreateFleet", Resource: ec2("launch-template/${" + lt + "}"), Context: resourceTags},
		Authorization{Action: "ec2:RunInstances", Resource: ec2("launch-template/${" + lt + "}"), Context: resourceTags})
	for _, rt := range []string{"instance", "volume"} {
		fleetAuth = append(fleetAuth,
			Authorization{Action: "ec2:RunInstances", Resource: ec2(rt + "/*"), Context: context(nil)},
			Authorization{Action: "ec2:CreateTags", Resource: ec2(rt + "/*"), Context: context(map[string][]string{"ec2:CreateAction": {"CreateFleet"}})})
	}
	fleetAuth = append(fleetAuth,
		Authorization{Action: "ec2:CreateTags", Resource: ec2("fleet/*"), Context: context(map[string][]string{"ec2:CreateAction": {"CreateFleet"}})},
		Authorization{Action: "iam:PassRole", Resource: c.NodeRole.ARN, Context: map[string][]string{"iam:PassedToService": {"ec2.amazonaws.com"}}})
	p.dryRun(CheckFleet, s.Pool, fleetAuth, fleetArgs)
	if s.Spot {
		// A pool that may buy Spot is proven buying it too, as Karpenter
		// asks (karpenter-provider-aws v1.15.0
		// pkg/providers/instance/types.go, CreateFleetInputBuilder: spot
		// capacity, SpotAllocationStrategyPriceCapacityOptimized, which
		// aws-sdk-go-v2 service/ec2 v1.296.0 types/enums.go spells
		// "price-capacity-optimized", the same tags): an SCP may refuse
		// Spot alone, and the pools prefer it.
		spotArgs := fleet("spot", "--spot-options", "price-capacity-optimized")
		spotAuth := append(slices.Clone(fleetAuth),
			Authorization{Action: "ec2:RunInstances", Resource: ec2("spot-instances-request/*"), Context: context(nil)})
		p.dryRun(CheckFleet, s.Pool+" (spot)", spotAuth, spotArgs)
	}
	// The template goes now, not only on exit: a pass leaves nothing behind.
	p.calls = append(p.calls, Call{Check: CheckTemplate, Args: []string{"ec2", "delete-launch-template", "--launch-template-id", "${" + lt + "}"},
		Authorizations: []Authorization{{Action: "ec2:DeleteLaunchTemplate", Resource: ec2("launch-template/${" + lt + "}"), Context: resourceTags}}})
	p.line(fmt.Sprintf(`aws ec2 delete-launch-template --launch-template-id "$%s" >/dev/null 2>&1 || :`, lt))
}

// dryRun writes a dry run of args for check: AWS answers DryRunOperation
// when it would have done it, and only that passes. Anything else, a
// refusal, a call the CLI rejects or an answer of any other kind, fails
// the check with AWS's own words: none of them proves the call would pass.
func (p *preflight) dryRun(check Check, pool string, auth []Authorization, args []string) {
	withDryRun := append(append([]string{}, args[:2]...), append([]string{"--dry-run"}, args[2:]...)...)
	p.calls = append(p.calls, Call{Check: check, Args: withDryRun, Authorizations: auth})
	p.line(fmt.Sprintf(`out=$(%s 2>&1)`, words(withDryRun)))
	p.line(`case "$out" in`)
	p.line(fmt.Sprintf(`  *"(DryRunOperation)"*) pass %s %s ;;`, check.Name, quote("pool "+pool+": AWS would do it")))
	p.line(fmt.Sprintf(`  *) fail %s %d %s"$out" ;;`, check.Name, check.ExitCode, quote("pool "+pool+": ")))
	p.line(`esac`)
}

// pricing reports, without failing, whether the pricing API answers from
// the region Karpenter asks it in (karpenter-provider-aws v1.15.0
// pkg/providers/pricing/pricing.go, NewAPI): where it does not (a
// region-deny SCP), Karpenter falls back to the prices it was built with
// and chooses on stale prices, saying so only in its logs.
func (p *preflight) pricing() {
	region := PricingRegion(p.c.Spec.Cluster.Region)
	args := []string{"pricing", "get-products", "--region", region, "--service-code", "AmazonEC2", "--max-items", "1"}
	p.calls = append(p.calls, Call{Check: Check{Name: "pricing"}, Args: args, Authorizations: []Authorization{{Action: "pricing:GetProducts", Resource: "*", Context: map[string][]string{"aws:RequestedRegion": {region}}}}})
	p.line(fmt.Sprintf(`out=$(%s --query 'length(PriceList)' --output text 2>&1) || warn pricing %s"$out"`, words(args),
		quote(fmt.Sprintf("Karpenter reads prices in %s and cannot: it will choose instances on the prices it was built with: ", region))))
}

// PricingRegion is where Karpenter v1.15.0 calls the pricing API from a
// cluster in region (pkg/providers/pricing/pricing.go, NewAPI).
func PricingRegion(region string) string {
	switch {
	case strings.HasPrefix(region, "ap-"):
		return "ap-south-1"
	case strings.HasPrefix(region, "cn-"):
		return "cn-northwest-1"
	case strings.HasPrefix(region, "eu-"):
		return "eu-central-1"
	}
	return "us-east-1"
}

// LaunchType is the instance type the preflight's fleet asks for in pool
// s: one the pool may launch, of its first category at its minimum
// generation, on Graviton ("g") for arm64 and Intel ("i") for amd64,
// 2xlarge so its memory is above the platform's floor. test/flux holds
// the names against the instance types Karpenter knows.
func LaunchType(s nodepools.Selection, arch string) string {
	gen := max(s.MinGeneration, 6) // the first generation with both an i and a g type
	suffix := "i"
	if arch == "arm64" {
		suffix = "g"
	}
	return fmt.Sprintf("%s%d%s.2xlarge", s.Categories[0], gen, suffix)
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
	p.line(fmt.Sprintf(`%s=$(%s --query %s --output text 2>&1) || fail %s %d "$%s"`, v, words(args), quote(query), check.Name, check.ExitCode, v))
	p.line(fmt.Sprintf(`pass %s "$%s"`, check.Name, v))
}

// words is `aws` and args as shell words.
func words(args []string) string {
	out := []string{"aws"}
	for _, a := range args {
		out = append(out, shellWord(a))
	}
	return strings.Join(out, " ")
}

// none fails check when the query in v selected nothing (the CLI prints
// None, or nothing for an empty list).
func (p *preflight) none(v string, check Check, why string) {
	p.line(fmt.Sprintf(`[ -n "$%s" ] && [ "$%s" != None ] || fail %s %d %s`, v, v, check.Name, check.ExitCode, quote(why)))
}

func (p *preflight) line(s string) { p.b.WriteString(s + "\n") }

// marshal is v as JSON: the CLI takes every structure as JSON, never its
// shorthand, so a value holding a comma stays one value.
func marshal(v any) string {
	b, _ := json.Marshal(v) // strings, numbers and booleans only: always marshals
	return string(b)
}

// filters are EC2 filters matching every tag, sorted by key.
func filters(prefix string, tags map[string]string) []string {
	out := make([]string, 0, len(tags))
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		out = append(out, fmt.Sprintf("Name=%s%s,Values=%s", prefix, k, tags[k]))
	}
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

// shellPattern is s as a case pattern matching itself literally.
func shellPattern(s string) string { return quote(s) }

// scriptVar is how the preflight refers to its own variables: lower case,
// so no platform or tenant value can name one of the environment's.
var scriptVar = regexp.MustCompile(`\$\{(k8s|url|(?:subnet|group|group_ids|ami|lt)_[a-z0-9_]+)\}`)

// quote is s as one single-quoted shell word.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
