package cluster

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A stand-in for the AWS CLI and for AWS behind it, for the preflight's
// script (TestPreflightScript, TestPreflightAsksWhatKarpenterAsks) and the
// final check's (TestFinalCheckScript). The
// test binary is the fake: linked as bin/aws, it answers as AWS answers a
// healthy account, and refuses what the service control policies in
// FAKE_SCPS refuse, evaluating each request's context as IAM would from
// what the request carries (fakeContexts). It is no emulator: nothing but
// the calls the preflight makes is answered.
//
// The e2e suite runs it too, built with `go test -c` (hack/e2e.mk), as the
// AWS behind the access check's Pods in its claimed clusters: there the
// cluster is any of the tenancy's, its VPC the one the e2e's provider-aws
// reports (FAKE_VPC), its subnets in its region's zones (AWS_REGION), and
// the identity the one its Pod Identity stand-in serves (FAKE_IDENTITY).
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "aws" {
		os.Exit(fakeAWS(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// The healthy account the fake answers for: the tests' cluster prod-eu.
const (
	fakeAccount = "111122223333"
	fakeVPC     = "vpc-0fa4e"
	fakeSession = "arn:aws:sts::111122223333:assumed-role/prod-eu-karpenter/eks-prod-eu-karpenter-0123"
	fakeK8s     = "1.34"
)

// The service control policies the fake enforces, as organisations write
// them (FAKE_SCPS, comma-separated):
//   - imdsv2: deny ec2:RunInstances of an instance whose
//     ec2:MetadataHttpTokens is not "required";
//   - encryption: deny ec2:RunInstances of a volume whose ec2:Encrypted is
//     false;
//   - tags=KEY: deny ec2:RunInstances of an instance, volume or network
//     interface without aws:RequestTag/KEY;
//   - regions=R1/R2: deny every call outside those regions
//     (aws:RequestedRegion), as a region-deny SCP does;
//   - nospot: deny ec2:RunInstances of a spot instance request, as an
//     organisation that forbids Spot does.
type scps []string

func (s scps) has(name string) (string, bool) {
	for _, p := range s {
		k, v, _ := strings.Cut(p, "=")
		if k == name {
			return v, true
		}
	}
	return "", false
}

// A request is what IAM evaluates of one authorization: the action, the
// resource type and its context.
type request struct {
	Action, ResourceType string
	Context              map[string]string
}

// denied is the SCP statement that denies r, or "".
func (s scps) denied(r request) string {
	if allowed, ok := s.has("regions"); ok && !slices.Contains(strings.Split(allowed, "/"), r.Context["aws:RequestedRegion"]) {
		return "regions"
	}
	if r.Action != "ec2:RunInstances" {
		return ""
	}
	if _, ok := s.has("imdsv2"); ok && r.ResourceType == "instance" && r.Context["ec2:MetadataHttpTokens"] != "required" {
		return "imdsv2"
	}
	if _, ok := s.has("encryption"); ok && r.ResourceType == "volume" && r.Context["ec2:Encrypted"] != "true" {
		return "encryption"
	}
	if _, ok := s.has("nospot"); ok && r.ResourceType == "spot-instances-request" {
		return "nospot"
	}
	if key, ok := s.has("tags"); ok && slices.Contains([]string{"instance", "volume", "network-interface"}, r.ResourceType) {
		if _, tagged := r.Context["aws:RequestTag/"+key]; !tagged {
			return "tags"
		}
	}
	return ""
}

// A template is the part of a launch template the requests' contexts read.
type template struct {
	ImageID         string `json:"ImageId"`
	MetadataOptions *struct {
		HTTPTokens string `json:"HttpTokens"`
	}
	BlockDeviceMappings []struct {
		Ebs *struct {
			Encrypted *bool
		}
	}
	TagSpecifications []tagSpec
}

// fakeContexts are the ec2:RunInstances authorizations of launching from
// lt with the request's own tag specifications, as the stand-in models
// IAM: the instance's metadata options and each volume's encryption come
// from the launch template (what will be launched); aws:RequestTag are the
// request's own tags of that resource type only. The launch template's own
// tag specifications are applied by EC2 at launch, not evaluated as the
// request's: that is the trap PRODUCT.md §5 recounts, where an SCP
// requiring tags on RunInstances refused every Karpenter launch whose
// tags went through the launch template.
func fakeContexts(lt template, requestTags []tagSpec, region string) []request {
	tagsOf := func(rt string) map[string]string {
		ctx := map[string]string{"aws:RequestedRegion": region}
		for _, ts := range requestTags {
			if ts.ResourceType == rt {
				for _, t := range ts.Tags {
					ctx["aws:RequestTag/"+t.Key] = t.Value
				}
			}
		}
		return ctx
	}
	instance := tagsOf("instance")
	instance["ec2:MetadataHttpTokens"] = "optional" // EC2's default without metadata options
	if m := lt.MetadataOptions; m != nil && m.HTTPTokens != "" {
		instance["ec2:MetadataHttpTokens"] = m.HTTPTokens
	}
	out := []request{{Action: "ec2:RunInstances", ResourceType: "instance", Context: instance}}
	for _, b := range lt.BlockDeviceMappings {
		volume := tagsOf("volume")
		volume["ec2:Encrypted"] = strconv.FormatBool(b.Ebs != nil && b.Ebs.Encrypted != nil && *b.Ebs.Encrypted)
		out = append(out, request{Action: "ec2:RunInstances", ResourceType: "volume", Context: volume})
	}
	return append(out, request{Action: "ec2:RunInstances", ResourceType: "network-interface", Context: tagsOf("network-interface")})
}

// fakeAWS answers one CLI call; its exit code is the CLI's (254 for an
// error AWS answered).
func fakeAWS(args []string) int {
	if len(args) < 2 {
		return usage(args)
	}
	service, op, flags := args[0], args[1], cliFlags(args[2:])
	call := service + " " + op
	state := os.Getenv("FAKE_AWS_STATE")
	if call == "ec2 describe-instances" {
		// The final check's calls, kept, one JSON list a line, failed
		// ones too.
		b, _ := json.Marshal(args)
		if f, err := os.OpenFile(filepath.Join(state, "describe-instances"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintln(f, string(b))
			f.Close()
		}
	}
	if fail := os.Getenv("FAIL"); fail != "" && strings.Contains(strings.Join(args, " "), fail) {
		if os.Getenv("ANSWER") == "None" {
			fmt.Println("None")
			return 0
		}
		fmt.Fprintln(os.Stderr, os.Getenv("ANSWER"))
		return 254
	}
	region := os.Getenv("AWS_REGION")
	if r, ok := flags["--region"]; ok {
		region = r[0]
	}
	policies := scps(strings.Split(os.Getenv("FAKE_SCPS"), ","))
	if policies.denied(request{Action: service + ":" + op, Context: map[string]string{"aws:RequestedRegion": region}}) != "" {
		fmt.Fprintf(os.Stderr, "An error occurred (AccessDeniedException) when calling the %s operation: User: %s is not authorized to perform: %s with an explicit deny in a service control policy\n", operation(op), fakeSession, service+":"+operation(op))
		return 254
	}
	query := strings.Join(flags["--query"], "")
	vpc := cmp.Or(os.Getenv("FAKE_VPC"), fakeVPC)
	_, dryRun := flags["--dry-run"]
	switch call {
	case "sts get-caller-identity":
		// FAKE_NO_CREDENTIALS calls find no credentials yet, as before
		// Pod Identity serves them; FAKE_IDENTITY answers another
		// identity (a node role reached through IMDS).
		if n, _ := strconv.Atoi(os.Getenv("FAKE_NO_CREDENTIALS")); count(state, "sts") <= n {
			fmt.Fprintln(os.Stderr, "Unable to locate credentials. You can configure credentials by running \"aws configure\".")
			return 253
		}
		fmt.Println(cmp.Or(os.Getenv("FAKE_IDENTITY"), fakeSession))
	case "sqs get-queue-url":
		fmt.Printf("https://sqs.%s.amazonaws.com/%s/%s\n", region, fakeAccount, flags["--queue-name"][0])
	case "sqs receive-message":
		if flags["--visibility-timeout"][0] != "0" {
			fmt.Fprintln(os.Stderr, "fake aws: a receive that hides messages from the controller")
			return 2
		}
		fmt.Println("0")
	case "iam get-instance-profile":
		fmt.Println(cmp.Or(os.Getenv("FAKE_PROFILE_ROLE"), "arn:aws:iam::111122223333:role/nodes"))
	case "eks describe-cluster":
		switch query {
		case "cluster.version":
			fmt.Println(fakeK8s)
		case "cluster.resourcesVpcConfig.vpcId":
			fmt.Println(vpc)
		default:
			return usage(args)
		}
	case "ec2 describe-subnets":
		// By default one subnet in each of the region's first three zones.
		subnets := fmt.Sprintf("subnet-0a %s %sa;subnet-0b %s %sb;subnet-0c %s %sc", vpc, region, vpc, region, vpc, region)
		fmt.Print(strings.ReplaceAll(cmp.Or(os.Getenv("FAKE_SUBNETS"), subnets), ";", "\n") + "\n")
	case "ec2 describe-security-groups":
		fmt.Print(strings.ReplaceAll(cmp.Or(os.Getenv("FAKE_GROUPS"), "sg-0a "+vpc), ";", "\n") + "\n")
	case "ssm get-parameter":
		if !strings.Contains(flags["--name"][0], "/"+fakeK8s+"/") {
			fmt.Fprintln(os.Stderr, "fake aws: a parameter of another Kubernetes version than the cluster's")
			return 2
		}
		fmt.Println("ami-0123")
	case "ec2 create-launch-template":
		var lt template
		if err := json.Unmarshal([]byte(flags["--launch-template-data"][0]), &lt); err != nil || lt.ImageID != "ami-0123" {
			fmt.Fprintf(os.Stderr, "fake aws: launch template data %v: %v\n", flags["--launch-template-data"], err)
			return 252
		}
		if dryRun {
			return dryRunOperation("CreateLaunchTemplate")
		}
		id := fmt.Sprintf("lt-%04d", count(state, "lt"))
		write(state, id, flags["--launch-template-data"][0])
		fmt.Println(id)
	case "ec2 create-fleet":
		var configs []struct {
			LaunchTemplateSpecification struct {
				LaunchTemplateID string `json:"LaunchTemplateId"`
			}
		}
		var tags []tagSpec
		_ = json.Unmarshal([]byte(flags["--launch-template-configs"][0]), &configs)
		_ = json.Unmarshal([]byte(flags["--tag-specifications"][0]), &tags)
		b, err := os.ReadFile(filepath.Join(state, configs[0].LaunchTemplateSpecification.LaunchTemplateID))
		if err != nil {
			fmt.Fprintln(os.Stderr, "An error occurred (InvalidLaunchTemplateId.NotFound) when calling the CreateFleet operation: no such launch template")
			return 254
		}
		var lt template
		_ = json.Unmarshal(b, &lt)
		var capacity struct{ DefaultTargetCapacityType string }
		_ = json.Unmarshal([]byte(flags["--target-capacity-specification"][0]), &capacity)
		requests := fakeContexts(lt, tags, region)
		if capacity.DefaultTargetCapacityType == "spot" {
			requests = append(requests, request{Action: "ec2:RunInstances", ResourceType: "spot-instances-request", Context: map[string]string{"aws:RequestedRegion": region}})
		}
		for _, r := range requests {
			if why := policies.denied(r); why != "" {
				fmt.Fprintf(os.Stderr, "An error occurred (UnauthorizedOperation) when calling the CreateFleet operation: You are not authorized to perform this operation. User: %s is not authorized to perform: ec2:RunInstances on resource: arn:aws:ec2:%s:%s:%s/* with an explicit deny in a service control policy. (fake: %s)\n", fakeSession, region, fakeAccount, r.ResourceType, why)
				return 254
			}
		}
		return dryRunOperation("CreateFleet")
	case "ec2 delete-launch-template":
		if err := os.Remove(filepath.Join(state, flags["--launch-template-id"][0])); err != nil {
			fmt.Fprintln(os.Stderr, "An error occurred (InvalidLaunchTemplateId.NotFound) when calling the DeleteLaunchTemplate operation")
			return 254
		}
	case "pricing get-products":
		fmt.Println("1")
	case "ec2 describe-instances":
		// The final check's: the instances listed, FAKE_INSTANCES
		// (space-separated), as the CLI's text output prints a list of
		// IDs.
		if ids := os.Getenv("FAKE_INSTANCES"); ids != "" {
			fmt.Println(strings.ReplaceAll(ids, " ", "\t"))
		}
	default:
		return usage(args)
	}
	return 0
}

func dryRunOperation(op string) int {
	fmt.Fprintf(os.Stderr, "An error occurred (DryRunOperation) when calling the %s operation: Request would have succeeded, but DryRun flag is set.\n", op)
	return 254
}

func usage(args []string) int {
	fmt.Fprintf(os.Stderr, "fake aws: unexpected call: %q\n", args)
	return 2
}

// cliFlags are the call's --flags and their values (none for a switch such
// as --dry-run, several for --filters).
func cliFlags(args []string) map[string][]string {
	out := map[string][]string{}
	flag := ""
	for _, a := range args {
		if strings.HasPrefix(a, "--") {
			flag = a
			out[flag] = nil
			continue
		}
		out[flag] = append(out[flag], a)
	}
	return out
}

// count is how many times key was counted in the state directory,
// this time included.
func count(dir, key string) int {
	b, _ := os.ReadFile(filepath.Join(dir, "count-"+key))
	n, _ := strconv.Atoi(string(b))
	n++
	write(dir, "count-"+key, strconv.Itoa(n))
	return n
}

func write(dir, name, content string) {
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
		panic(err)
	}
}
