package config

import (
	"sort"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/do-now/function-karpenter/apis/input/v1beta1"
	"github.com/do-now/function-karpenter/apis/v1alpha1"
	"github.com/do-now/function-karpenter/internal/config/configtest"
	"github.com/do-now/function-karpenter/internal/naming"
)

const (
	nodeRole    = "arn:aws:iam::123456789012:role/prod-eu-node"
	inputAPI    = "karpenter.fn.socle.do-now.io/v1beta1"
	inputKind   = "Input"
	maxCluster  = "c234567890123456789012345678901234567890abcd"  // 44 characters
	overCluster = "c234567890123456789012345678901234567890abcde" // 45 characters
)

// owner is the claim the tests' XRs belong to.
var owner = Owner{Namespace: "team-a", Name: "karpenter"}

// xr returns a valid XR spec for cluster prod-eu in eu-west-3, with the given
// changes applied: a dotted path set to a value, or removed when it is nil.
func xr(changes ...change) map[string]any {
	s := map[string]any{
		"cluster": map[string]any{
			"name":   "prod-eu",
			"region": "eu-west-3",
		},
		"nodeIdentity": map[string]any{
			"roleArn":         nodeRole,
			"instanceProfile": "prod-eu-node",
		},
	}
	for _, c := range changes {
		set(s, c.path, c.value)
	}
	return s
}

// input returns a function input with the given fields and the pins every
// input holds (configtest.Pinned: a pin set to nil is left out). A tenancy
// cluster that has no region key is given the facts the platform declares of
// it (declare), so cases write only what they test.
func input(fields map[string]any) *structpb.Struct {
	fields = configtest.Pinned(fields)
	if t, ok := fields["tenancy"].(map[string]any); ok {
		for _, cl := range t["clusters"].([]any) {
			if m := cl.(map[string]any); m["region"] == nil {
				declare(m)
			}
		}
	}
	s, err := structpb.NewStruct(fields)
	if err != nil {
		panic(err)
	}
	return s
}

// declare sets a tenancy cluster's region and node identity: prod-eu's
// are the tests' XR's, any other cluster is in us-east-1 with a node role of
// its name, both in the cluster's account.
func declare(cl map[string]any) {
	name, _ := cl["name"].(string)
	acct, _ := cl["account"].(string)
	cl["region"] = "us-east-1"
	if name == "prod-eu" {
		cl["region"] = "eu-west-3"
	}
	cl["nodeIdentity"] = map[string]any{"roleArn": "arn:aws:iam::" + acct + ":role/" + name + "-node", "instanceProfile": name + "-node"}
}

// prodEUDeclared is prod-eu as the tenancy declares it, in account
// 111122223333, with the given changes.
func prodEUDeclared(changes ...change) map[string]any {
	cl := map[string]any{"name": "prod-eu", "account": "111122223333"}
	declare(cl)
	for _, c := range changes {
		set(cl, c.path, c.value)
	}
	return cl
}

type change struct {
	path  string
	value any
}

func with(path string, value any) change { return change{path: path, value: value} }

// set sets the dotted path in m to v, creating the objects on its way, or
// removes it when v is nil. Values are stored as JSON would decode them:
// Load reads the spec through JSON, and the input is a structpb.Struct.
func set(m map[string]any, path string, v any) {
	p := fieldpath.Pave(m)
	var err error
	if v == nil {
		err = p.DeleteField(path)
	} else {
		err = p.SetValue(path, v)
	}
	if err != nil {
		panic(err)
	}
}

// errorID is what identifies a field error, without its wording.
type errorID struct {
	Type  field.ErrorType
	Field string
}

func ids(errs field.ErrorList) []errorID {
	var out []errorID
	for _, e := range errs {
		out = append(out, errorID{Type: e.Type, Field: e.Field})
	}
	// Tags are a map: their errors come in no fixed order.
	sort.Slice(out, func(i, j int) bool {
		if out[i].Field != out[j].Field {
			return out[i].Field < out[j].Field
		}
		return out[i].Type < out[j].Type
	})
	return out
}

func tags(n int) map[string]any {
	t := make(map[string]any, n)
	for i := range n {
		t["tag-"+string(rune('a'+i/26))+string(rune('a'+i%26))] = "value"
	}
	return t
}

func TestLoadInvalid(t *testing.T) {
	invalid := func(f string) errorID { return errorID{Type: field.ErrorTypeInvalid, Field: f} }
	required := func(f string) errorID { return errorID{Type: field.ErrorTypeRequired, Field: f} }
	notSupported := func(f string) errorID { return errorID{Type: field.ErrorTypeNotSupported, Field: f} }

	testLoadInvalid(t, map[string]invalidCase{
		"EmptySpec": {
			reason: "The cluster's name is the one tenant field required: its region and node identity are the platform's.",
			spec:   map[string]any{},
			want:   []errorID{required("spec.cluster.name")},
		},
		"SpecNotDecodable": {
			reason: "A spec whose fields have the wrong JSON types cannot be read at all.",
			spec:   xr(with("cluster.name", 42.0)),
			want:   []errorID{invalid("spec")},
		},
		"MissingClusterName": {
			reason: "The cluster name is required: every AWS name derives from it.",
			spec:   xr(with("cluster.name", nil)),
			want:   []errorID{required("spec.cluster.name")},
		},
		"ClusterNameWithQuote": {
			reason: "A quote is not allowed in an EKS cluster name, and would end a JSON string in a policy.",
			spec:   xr(with("cluster.name", `prod"eu`)),
			want:   []errorID{invalid("spec.cluster.name")},
		},
		"ClusterNameWithWildcard": {
			reason: "A '*' in the cluster name would widen every tag condition of the controller policy.",
			spec:   xr(with("cluster.name", "prod-*")),
			want:   []errorID{invalid("spec.cluster.name")},
		},
		"ClusterNameStartsWithDash": {
			reason: "An EKS cluster name starts with a letter or digit.",
			spec:   xr(with("cluster.name", "-prod")),
			want:   []errorID{invalid("spec.cluster.name")},
		},
		"ClusterNameWithSlash": {
			reason: "A '/' in the cluster name would add a level to the role path.",
			spec:   xr(with("cluster.name", "prod/eu")),
			want:   []errorID{invalid("spec.cluster.name")},
		},
		"ClusterNameOverAWSLimits": {
			reason: "A valid EKS name of 45 characters makes a rule name one over EventBridge's limit; the error is still the cluster name's.",
			spec:   xr(with("cluster.name", overCluster)),
			want:   []errorID{invalid("spec.cluster.name")},
		},
		"ClusterNameOverEKSLimit": {
			reason: "An EKS cluster name is at most 100 characters.",
			spec:   xr(with("cluster.name", strings.Repeat("c", 101))),
			want:   []errorID{invalid("spec.cluster.name")},
		},
		"MissingRegion": {
			reason: "The platform declares each cluster's region: the queue, rules and ARNs are regional.",
			spec:   xr(),
			input:  input(map[string]any{"tenancy": map[string]any{"clusters": []any{prodEUDeclared(with("region", ""))}}}),
			want:   []errorID{required("input.tenancy.clusters[0].region")},
		},
		"RegionUppercase": {
			reason: "AWS region names are lowercase.",
			spec:   xr(with("cluster.region", "EU-WEST-3")),
			want:   []errorID{invalid("spec.cluster.region")},
		},
		"RegionAvailabilityZone": {
			reason: "An availability zone is not a region.",
			spec:   xr(with("cluster.region", "eu-west-3a")),
			want:   []errorID{invalid("spec.cluster.region")},
		},
		"ChinaRoleEuropeanRegion": {
			reason: "A node role in aws-cn cannot serve a cluster in eu-west-3: every ARN would be in the wrong partition.",
			spec:   xr(),
			input:  input(map[string]any{"tenancy": map[string]any{"clusters": []any{prodEUDeclared(with("nodeIdentity.roleArn", "arn:aws-cn:iam::111122223333:role/prod-eu-node"))}}}),
			want:   []errorID{invalid("input.tenancy.clusters[0].region")},
		},
		"GovCloudRoleEuropeanRegion": {
			reason: "A node role in aws-us-gov cannot serve a cluster in eu-west-3.",
			spec:   xr(),
			input:  input(map[string]any{"tenancy": map[string]any{"clusters": []any{prodEUDeclared(with("nodeIdentity.roleArn", "arn:aws-us-gov:iam::111122223333:role/prod-eu-node"))}}}),
			want:   []errorID{invalid("input.tenancy.clusters[0].region")},
		},
		"CommercialRoleChinaRegion": {
			reason: "A node role in aws cannot serve a cluster in cn-north-1 either: the mismatch is wrong both ways.",
			spec:   xr(),
			input:  input(map[string]any{"tenancy": map[string]any{"clusters": []any{prodEUDeclared(with("region", "cn-north-1"))}}}),
			want:   []errorID{invalid("input.tenancy.clusters[0].region")},
		},
		"CommercialRoleGovCloudRegion": {
			reason: "A node role in aws cannot serve a cluster in us-gov-west-1.",
			spec:   xr(),
			input:  input(map[string]any{"tenancy": map[string]any{"clusters": []any{prodEUDeclared(with("region", "us-gov-west-1"))}}}),
			want:   []errorID{invalid("input.tenancy.clusters[0].region")},
		},
		"MissingRoleARN": {
			reason: "The platform declares each cluster's node role: the only role the controller may pass.",
			spec:   xr(),
			input:  input(map[string]any{"tenancy": map[string]any{"clusters": []any{prodEUDeclared(with("nodeIdentity.roleArn", nil))}}}),
			want:   []errorID{required("input.tenancy.clusters[0].nodeIdentity.roleArn")},
		},
		"RoleARNWrongService": {
			reason: "An STS assumed-role ARN is not an IAM role ARN.",
			spec:   xr(with("nodeIdentity.roleArn", "arn:aws:sts::123456789012:assumed-role/prod-eu-node/i-0123456789abcdef0")),
			want:   []errorID{invalid("spec.nodeIdentity.roleArn")},
		},
		"RoleARNShortAccount": {
			reason: "An account ID is 12 digits.",
			spec:   xr(with("nodeIdentity.roleArn", "arn:aws:iam::12345678901:role/prod-eu-node")),
			want:   []errorID{invalid("spec.nodeIdentity.roleArn")},
		},
		"MissingInstanceProfile": {
			reason: "The platform declares each cluster's instance profile: Karpenter creates none.",
			spec:   xr(),
			input:  input(map[string]any{"tenancy": map[string]any{"clusters": []any{prodEUDeclared(with("nodeIdentity.instanceProfile", nil))}}}),
			want:   []errorID{required("input.tenancy.clusters[0].nodeIdentity.instanceProfile")},
		},
		"InstanceProfileWithSpace": {
			reason: "IAM names have no spaces.",
			spec:   xr(with("nodeIdentity.instanceProfile", "prod eu node")),
			want:   []errorID{invalid("spec.nodeIdentity.instanceProfile")},
		},
		"InstanceProfileTooLong": {
			reason: "An instance profile name is at most 128 characters.",
			spec:   xr(with("nodeIdentity.instanceProfile", strings.Repeat("p", 129))),
			want:   []errorID{invalid("spec.nodeIdentity.instanceProfile")},
		},
		"UnknownVersion": {
			reason: "A Karpenter version whose controller policy is unknown is refused.",
			spec:   xr(with("version", "0.37.0")),
			want:   []errorID{notSupported("spec.version")},
		},
		"InputUnknownField": {
			reason: "A misspelt platform setting must fail instead of silently falling back to its default.",
			spec:   xr(),
			input:  input(map[string]any{"iamPathPrefx": "/platform/"}),
			want:   []errorID{invalid("input")},
		},
		"InputNotDecodable": {
			reason: "Tags are a map of strings, not a list.",
			spec:   xr(),
			input:  input(map[string]any{"tags": []any{"team=platform"}}),
			want:   []errorID{invalid("input")},
		},
		"InputWrongKind": {
			reason: "An input of another kind is another function's input.",
			spec:   xr(),
			input:  input(map[string]any{"apiVersion": inputAPI, "kind": "Resources"}),
			want:   []errorID{notSupported("input.kind")},
		},
		"InputWrongAPIVersion": {
			reason: "An input of another API version is not read as this one.",
			spec:   xr(),
			input:  input(map[string]any{"apiVersion": "karpenter.fn.socle.do-now.io/v1alpha1", "kind": inputKind}),
			want:   []errorID{notSupported("input.apiVersion")},
		},
		"PathPrefixWithoutTrailingSlash": {
			reason: "An IAM path ends with '/'.",
			spec:   xr(),
			input:  input(map[string]any{"iamPathPrefix": "/socle"}),
			want:   []errorID{invalid("input.iamPathPrefix")},
		},
		"PathPrefixWithoutLeadingSlash": {
			reason: "An IAM path starts with '/'.",
			spec:   xr(),
			input:  input(map[string]any{"iamPathPrefix": "socle/"}),
			want:   []errorID{invalid("input.iamPathPrefix")},
		},
		"PathPrefixEmptySegment": {
			reason: "An IAM path has no empty segment.",
			spec:   xr(),
			input:  input(map[string]any{"iamPathPrefix": "/socle//"}),
			want:   []errorID{invalid("input.iamPathPrefix")},
		},
		"BoundaryNotAPolicy": {
			reason: "A permissions boundary is a managed policy; a role ARN cannot be one.",
			spec:   xr(),
			input:  input(map[string]any{"permissionsBoundaryArn": "arn:aws:iam::123456789012:role/boundary"}),
			want:   []errorID{invalid("input.permissionsBoundaryArn")},
		},
		"BoundaryOtherPartition": {
			reason: "A boundary in aws-cn cannot be attached to a role in aws.",
			spec:   xr(),
			input:  input(map[string]any{"permissionsBoundaryArn": "arn:aws-cn:iam::123456789012:policy/boundary"}),
			want:   []errorID{invalid("input.permissionsBoundaryArn")},
		},
		"ProviderConfigUppercase": {
			reason: "A ProviderConfig name is a DNS subdomain: lowercase.",
			spec:   xr(),
			input:  input(map[string]any{"providerConfigName": "Default"}),
			want:   []errorID{invalid("input.providerConfigName")},
		},
		"ClusterDeliveryNamesInvalid": {
			reason: "A cluster's ProviderConfig and Flux source are object names: DNS subdomains.",
			spec:   xr(),
			input: input(map[string]any{"tenancy": map[string]any{"clusters": []any{map[string]any{
				"name": "prod-eu", "account": "111122223333", "kubernetesProviderConfig": "Prod_EU",
				"flux": map[string]any{"sourceRef": map[string]any{"name": "platform/eu"}},
			}}}}),
			want: []errorID{
				invalid("input.tenancy.clusters[0].flux.sourceRef.name"),
				invalid("input.tenancy.clusters[0].kubernetesProviderConfig"),
			},
		},
		"TenancyClusterDeclaredTwice": {
			reason: "Two declarations of one cluster would leave it unclear which namespaces may claim it.",
			spec:   xr(),
			input: input(map[string]any{"tenancy": map[string]any{"clusters": []any{
				map[string]any{"name": "prod-eu", "account": "111122223333"},
				map[string]any{"name": "prod-eu", "account": "444455556666"},
			}}}),
			want: []errorID{{Type: field.ErrorTypeDuplicate, Field: "input.tenancy.clusters[1].name"}},
		},
		"NodeRoleOfAnotherAccount": {
			reason: "A cluster's node role must be in the cluster's account: it is the role its nodes run as.",
			spec:   xr(),
			input:  input(map[string]any{"tenancy": map[string]any{"clusters": []any{prodEUDeclared(with("nodeIdentity.roleArn", "arn:aws:iam::444455556666:role/prod-eu-node"))}}}),
			want:   []errorID{invalid("input.tenancy.clusters[0].nodeIdentity.roleArn")},
		},
		"AWSProviderConfigUppercase": {
			reason: "A cluster's provider-aws ProviderConfig is an object name: a DNS subdomain.",
			spec:   xr(),
			input:  input(map[string]any{"tenancy": map[string]any{"clusters": []any{prodEUDeclared(with("awsProviderConfig", "Prod_EU"))}}}),
			want:   []errorID{invalid("input.tenancy.clusters[0].awsProviderConfig")},
		},
		"ClusterNamesCollide": {
			reason: "Prod_EU and prod-eu are one name to their label, their ProviderConfig and IAM: the pair is refused, naming both.",
			spec:   xr(),
			input: input(map[string]any{"tenancy": map[string]any{"clusters": []any{
				map[string]any{"name": "prod-eu", "account": "111122223333"},
				map[string]any{"name": "Prod_EU", "account": "444455556666"},
			}}}),
			want: []errorID{invalid("input.tenancy.clusters[1].name")},
		},
		"ProviderConfigShared": {
			reason: "Two clusters applied through one provider-kubernetes ProviderConfig would let one claim manage, and delete, the other cluster's namespace: the second is refused.",
			spec:   xr(),
			input: input(map[string]any{"tenancy": map[string]any{"clusters": []any{
				map[string]any{"name": "prod-eu", "account": "111122223333", "kubernetesProviderConfig": "shared"},
				map[string]any{"name": "prod-us", "account": "444455556666", "kubernetesProviderConfig": "shared"},
			}}}),
			want: []errorID{invalid("input.tenancy.clusters[1].kubernetesProviderConfig")},
		},
		"ProviderConfigSharedWithADefault": {
			reason: "A cluster that names no ProviderConfig is applied through the one named after it: another cluster naming that one shares it.",
			spec:   xr(),
			input: input(map[string]any{"tenancy": map[string]any{"clusters": []any{
				map[string]any{"name": "prod-eu", "account": "111122223333"},
				map[string]any{"name": "prod-us", "account": "444455556666", "kubernetesProviderConfig": "prod-eu"},
			}}}),
			want: []errorID{invalid("input.tenancy.clusters[1].kubernetesProviderConfig")},
		},
		"DefaultProviderConfigTaken": {
			reason: "The default, the cluster's name, is refused too when an earlier cluster named it as its own.",
			spec:   xr(),
			input: input(map[string]any{"tenancy": map[string]any{"clusters": []any{
				map[string]any{"name": "prod-eu", "account": "111122223333", "kubernetesProviderConfig": "prod-us"},
				map[string]any{"name": "prod-us", "account": "444455556666"},
			}}}),
			want: []errorID{invalid("input.tenancy.clusters[1].kubernetesProviderConfig")},
		},
		"MinRunIntervalTooShort": {
			reason: "A re-run a few seconds after a pass would let the annotation flood the account with checks again.",
			spec:   xr(),
			input:  input(map[string]any{"accessCheck": map[string]any{"minRunInterval": "10s"}}),
			want:   []errorID{invalid("input.accessCheck.minRunInterval")},
		},
		"MinRunIntervalNotADuration": {
			reason: "The interval is a Go duration.",
			spec:   xr(),
			input:  input(map[string]any{"accessCheck": map[string]any{"minRunInterval": "an hour"}}),
			want:   []errorID{invalid("input.accessCheck.minRunInterval")},
		},
		"FluxServiceAccountInvalid": {
			reason: "The ServiceAccount kustomize-controller impersonates is an object name: a DNS subdomain.",
			spec:   xr(),
			input:  input(map[string]any{"flux": map[string]any{"serviceAccountName": "Karpenter Flux"}}),
			want:   []errorID{invalid("input.flux.serviceAccountName")},
		},
		"TenancyAccountNotAnAccount": {
			reason: "A cluster's account is what node roles are checked against: 12 digits.",
			spec:   xr(),
			input: input(map[string]any{"tenancy": map[string]any{"clusters": []any{
				map[string]any{"name": "prod-eu", "account": "1111-2222-3333"},
			}}}),
			// The node role declared for it is then in another account.
			want: []errorID{invalid("input.tenancy.clusters[0].account"), invalid("input.tenancy.clusters[0].nodeIdentity.roleArn")},
		},
		"NamespaceInvalid": {
			reason: "A namespace is a DNS label: no dots, no uppercase.",
			spec:   xr(),
			input:  input(map[string]any{"podIdentity": map[string]any{"namespace": "kube.karpenter"}}),
			want:   []errorID{invalid("input.podIdentity.namespace")},
		},
		"MonitoringInvalid": {
			reason: "The monitoring objects' namespace is a DNS label, their labels are labels, and the near-limits ratio a plain decimal in (0, 1].",
			spec:   xr(),
			input: input(map[string]any{"monitoring": map[string]any{
				"namespace": "Monitoring", "labels": map[string]any{"release": "kube prometheus"}, "nearLimitsRatio": "90%",
			}}),
			want: []errorID{invalid("input.monitoring.labels[release]"), invalid("input.monitoring.namespace"), invalid("input.monitoring.nearLimitsRatio")},
		},
		"NearLimitsRatioAboveOne": {
			reason: "A pool cannot be near its limits past them.",
			spec:   xr(),
			input:  input(map[string]any{"monitoring": map[string]any{"nearLimitsRatio": "1.5"}}),
			want:   []errorID{invalid("input.monitoring.nearLimitsRatio")},
		},
		"NearLimitsRatioZero": {
			reason: "A ratio of zero would call every pool near its limits.",
			spec:   xr(),
			input:  input(map[string]any{"monitoring": map[string]any{"nearLimitsRatio": "0.0"}}),
			want:   []errorID{invalid("input.monitoring.nearLimitsRatio")},
		},
		"ServiceAccountInvalid": {
			reason: "A service account name is a DNS subdomain: no spaces.",
			spec:   xr(),
			input:  input(map[string]any{"podIdentity": map[string]any{"serviceAccount": "karpenter controller"}}),
			want:   []errorID{invalid("input.podIdentity.serviceAccount")},
		},
		"TagKeyAWSPrefix": {
			reason: "The aws: tag prefix is reserved by AWS.",
			spec:   xr(),
			input:  input(map[string]any{"tags": map[string]any{"aws:owner": "platform"}}),
			want:   []errorID{invalid("input.tags[aws:owner]")},
		},
		"TagKeyAWSPrefixUppercase": {
			reason: "AWS reserves the aws: prefix whatever its case.",
			spec:   xr(),
			input:  input(map[string]any{"tags": map[string]any{"AWS:Owner": "platform"}}),
			want:   []errorID{invalid("input.tags[AWS:Owner]")},
		},
		"TagKeyWildcard": {
			reason: "'*' is not a tag character.",
			spec:   xr(),
			input:  input(map[string]any{"tags": map[string]any{"team*": "platform"}}),
			want:   []errorID{invalid("input.tags[team*]")},
		},
		"TagKeyTooLong": {
			reason: "A tag key is at most 128 characters.",
			spec:   xr(),
			input:  input(map[string]any{"tags": map[string]any{strings.Repeat("k", 129): "platform"}}),
			want:   []errorID{invalid("input.tags[" + strings.Repeat("k", 129) + "]")},
		},
		"TagValueTooLong": {
			reason: "A tag value is at most 256 characters.",
			spec:   xr(),
			input:  input(map[string]any{"tags": map[string]any{"team": strings.Repeat("v", 257)}}),
			want:   []errorID{invalid("input.tags[team]")},
		},
		"TooManyTags": {
			reason: "More than 40 platform tags are refused, as one error on the tags map rather than one per tag.",
			spec:   xr(),
			input:  input(map[string]any{"tags": tags(41)}),
			want:   []errorID{{Type: field.ErrorTypeTooMany, Field: "input.tags"}},
		},
		"SpecAndInputTogether": {
			reason: "Spec and input errors are reported together, so one round trip shows every problem.",
			spec:   xr(with("cluster.region", "EU-WEST-3")),
			input:  input(map[string]any{"providerConfigName": "Default"}),
			want: []errorID{
				invalid("input.providerConfigName"),
				invalid("spec.cluster.region"),
			},
		},
	})
}

// invalidCase is a claim and a platform input Load must refuse, and the
// errors, by type and field path, it must refuse them with.
type invalidCase struct {
	reason string
	spec   map[string]any
	input  *structpb.Struct
	want   []errorID
}

// testLoadInvalid runs a catalog of refusals: each case is refused with
// exactly its errors, and with no config.
func testLoadInvalid(t *testing.T, cases map[string]invalidCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := tc.input
			if in == nil {
				in = input(nil)
			}
			c, errs := Load(owner, tc.spec, in)
			if diff := cmp.Diff(tc.want, ids(errs)); diff != "" {
				t.Errorf("\n%s\nLoad(...): -want, +got errors:\n%s\n(all: %v)", tc.reason, diff, errs)
			}
			if c != nil {
				t.Errorf("\n%s\nLoad(...): want no config with errors, got %+v", tc.reason, c)
			}
		})
	}
}

func TestLoadValid(t *testing.T) {
	type want struct {
		config *Config
		// rolePath is where the controller role is created.
		rolePath string
	}
	defaults := v1beta1.Input{
		IAMPathPrefix:      "/socle/",
		ProviderConfigName: "default",
		PodIdentity:        v1beta1.PodIdentity{Namespace: "karpenter", ServiceAccount: "karpenter"},
		// Every known version allowed, the newest the default.
		Versions: v1beta1.Versions{Allowed: []string{"1.14.1", "1.14.3", "1.15.0", "1.15.2"}, Default: "1.15.2"},
		// The SDK's default TTL (fn/cache_test.go holds it there).
		SettledInterval: "1m",
	}
	prodEU := v1alpha1.XKarpenterSpec{
		Cluster:      v1alpha1.Cluster{Name: "prod-eu", Region: "eu-west-3"},
		NodeIdentity: v1alpha1.NodeIdentity{RoleARN: nodeRole, InstanceProfile: "prod-eu-node"},
		Version:      "1.15.2",
	}
	prodEURole := naming.RoleARN{ARN: nodeRole, Partition: "aws", Account: "123456789012", Path: "/", Name: "prod-eu-node"}
	prodEUAccount := naming.Account{Partition: "aws", ID: "123456789012", Region: "eu-west-3"}

	cases := map[string]struct {
		reason string
		spec   map[string]any
		input  *structpb.Struct
		want   want
	}{
		"PinsOnly": {
			reason: "An input of the platform's pins alone: every other input field takes its default, and the claim the pinned version.",
			spec:   xr(),
			input:  input(nil),
			want: want{
				config:   &Config{Spec: prodEU, Input: defaults, NodeRole: prodEURole, Account: prodEUAccount},
				rolePath: "/socle/prod-eu/",
			},
		},
		"EmptyInput": {
			reason: "An input with only its apiVersion and kind takes every default.",
			spec:   xr(),
			input:  input(map[string]any{"apiVersion": inputAPI, "kind": inputKind}),
			want: want{
				config: &Config{
					Spec:     prodEU,
					Input:    func() v1beta1.Input { i := defaults; i.APIVersion = inputAPI; i.Kind = inputKind; return i }(),
					NodeRole: prodEURole,
					Account:  prodEUAccount,
				},
				rolePath: "/socle/prod-eu/",
			},
		},
		"InputKept": {
			reason: "Platform settings that are given are kept, not overwritten by defaults.",
			spec:   xr(),
			input: input(map[string]any{
				"iamPathPrefix":          "/platform/karpenter/",
				"permissionsBoundaryArn": "arn:aws:iam::aws:policy/PowerUserAccess",
				"providerConfigName":     "aws-prod",
				"tags":                   map[string]any{"team": "platform", "cost-center": "é" + strings.Repeat("x", 255)},
				"podIdentity":            map[string]any{"namespace": "autoscaling", "serviceAccount": "karpenter-controller"},
				"settledInterval":        "15m",
			}),
			want: want{
				config: &Config{
					Spec: prodEU,
					Input: v1beta1.Input{
						IAMPathPrefix:          "/platform/karpenter/",
						PermissionsBoundaryARN: "arn:aws:iam::aws:policy/PowerUserAccess",
						ProviderConfigName:     "aws-prod",
						Tags:                   map[string]string{"team": "platform", "cost-center": "é" + strings.Repeat("x", 255)},
						PodIdentity:            v1beta1.PodIdentity{Namespace: "autoscaling", ServiceAccount: "karpenter-controller"},
						Versions:               defaults.Versions,
						SettledInterval:        "15m",
					},
					NodeRole: prodEURole,
					Account:  prodEUAccount,
				},
				rolePath: "/platform/karpenter/prod-eu/",
			},
		},
		"CrossplaneFieldsIgnored": {
			reason: "Crossplane adds its own fields to an XR's spec; they are not the tenant's and must not fail decoding.",
			spec: xr(
				with("crossplane.compositionRef.name", "karpenter"),
				with("crossplane.resourceRefs", []any{}),
			),
			want: want{
				config:   &Config{Spec: prodEU, Input: defaults, NodeRole: prodEURole, Account: prodEUAccount},
				rolePath: "/socle/prod-eu/",
			},
		},
		"China": {
			reason: "A cluster in cn-north-1 with an aws-cn node role builds every ARN in aws-cn.",
			spec: xr(
				with("cluster.region", "cn-north-1"),
				with("nodeIdentity.roleArn", "arn:aws-cn:iam::123456789012:role/nodes/prod-eu-node"),
			),
			input: input(map[string]any{"permissionsBoundaryArn": "arn:aws-cn:iam::123456789012:policy/boundary"}),
			want: want{
				config: &Config{
					Spec: v1alpha1.XKarpenterSpec{
						Cluster:      v1alpha1.Cluster{Name: "prod-eu", Region: "cn-north-1"},
						NodeIdentity: v1alpha1.NodeIdentity{RoleARN: "arn:aws-cn:iam::123456789012:role/nodes/prod-eu-node", InstanceProfile: "prod-eu-node"},
						Version:      "1.15.2",
					},
					Input: func() v1beta1.Input {
						i := defaults
						i.PermissionsBoundaryARN = "arn:aws-cn:iam::123456789012:policy/boundary"
						return i
					}(),
					NodeRole: naming.RoleARN{ARN: "arn:aws-cn:iam::123456789012:role/nodes/prod-eu-node", Partition: "aws-cn", Account: "123456789012", Path: "/nodes/", Name: "prod-eu-node"},
					Account:  naming.Account{Partition: "aws-cn", ID: "123456789012", Region: "cn-north-1"},
				},
				rolePath: "/socle/prod-eu/",
			},
		},
		"GovCloud": {
			reason: "A cluster in us-gov-west-1 with an aws-us-gov node role builds every ARN in aws-us-gov.",
			spec: xr(
				with("cluster.region", "us-gov-west-1"),
				with("nodeIdentity.roleArn", "arn:aws-us-gov:iam::123456789012:role/prod-eu-node"),
			),
			want: want{
				config: &Config{
					Spec: v1alpha1.XKarpenterSpec{
						Cluster:      v1alpha1.Cluster{Name: "prod-eu", Region: "us-gov-west-1"},
						NodeIdentity: v1alpha1.NodeIdentity{RoleARN: "arn:aws-us-gov:iam::123456789012:role/prod-eu-node", InstanceProfile: "prod-eu-node"},
						Version:      "1.15.2",
					},
					Input:    defaults,
					NodeRole: naming.RoleARN{ARN: "arn:aws-us-gov:iam::123456789012:role/prod-eu-node", Partition: "aws-us-gov", Account: "123456789012", Path: "/", Name: "prod-eu-node"},
					Account:  naming.Account{Partition: "aws-us-gov", ID: "123456789012", Region: "us-gov-west-1"},
				},
				rolePath: "/socle/prod-eu/",
			},
		},
		"LongestNameAndFortyTags": {
			reason: "The longest cluster name the XRD allows and 40 tags, the maximum, are accepted.",
			spec:   xr(with("cluster.name", maxCluster), with("version", "1.15.0")),
			input:  input(map[string]any{"tags": tags(40)}),
			want: want{
				config: &Config{
					Spec: v1alpha1.XKarpenterSpec{
						Cluster:      v1alpha1.Cluster{Name: maxCluster, Region: "eu-west-3"},
						NodeIdentity: prodEU.NodeIdentity,
						Version:      "1.15.0",
					},
					Input: func() v1beta1.Input {
						i := defaults
						i.Tags = map[string]string{}
						for k, v := range tags(40) {
							i.Tags[k] = v.(string)
						}
						return i
					}(),
					NodeRole: prodEURole,
					Account:  prodEUAccount,
				},
				rolePath: "/socle/" + maxCluster + "/",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := tc.input
			if in == nil {
				in = input(nil)
			}
			c, errs := Load(owner, tc.spec, in)
			if len(errs) > 0 {
				t.Fatalf("\n%s\nLoad(...): unexpected errors: %v", tc.reason, errs)
			}
			// The cluster half of the input and the pools have their own tests
			// (TestClusterDefaults in cluster_test.go, TestPoolDefaults and
			// TestPoolPolicy), the owner is the tests' own.
			ignore := cmp.Options{
				cmpopts.IgnoreFields(Config{}, "Names", "Owner", "Pools", "VersionDefaulted", "Requested"), // TestVersions and TestPlatformFacts check them
				cmpopts.IgnoreFields(v1alpha1.XKarpenterSpec{}, "Pools"),
				cmpopts.IgnoreFields(v1beta1.Input{}, "Flux", "Controller", "AccessCheck", "Monitoring", "Nodes", "Pools"),
			}
			if diff := cmp.Diff(tc.want.config, c, ignore); diff != "" {
				t.Errorf("\n%s\nLoad(...): -want, +got:\n%s", tc.reason, diff)
			}
			if c.Names.RolePath != tc.want.rolePath {
				t.Errorf("\n%s\nLoad(...): Names.RolePath = %q, want %q", tc.reason, c.Names.RolePath, tc.want.rolePath)
			}
			if want := tc.want.config.Spec.Cluster.Name + "-karpenter"; c.Names.Role != want {
				t.Errorf("\n%s\nLoad(...): Names.Role = %q, want %q", tc.reason, c.Names.Role, want)
			}
		})
	}
}
