package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/do-now/function-karpenter/apis/v1alpha1"
)

// TestLoadInvalidClusterHalf is the catalog of bad pool values and bad
// platform settings of the cluster half, each with its exact field path.
func TestLoadInvalidClusterHalf(t *testing.T) {
	testLoadInvalid(t, map[string]invalidCase{
		"NegativeCPULimit": {
			reason: "A pool's CPU limit must be above zero.",
			spec:   xr(with("pools.private.limits", map[string]any{"cpu": "-4", "memory": "16Gi"})),
			want:   []errorID{{field.ErrorTypeInvalid, "spec.pools.private.limits.cpu"}},
		},
		"MemoryLimitOverBound": {
			reason: "A pool's memory limit is bounded by the platform.",
			spec:   xr(with("pools.public.limits", map[string]any{"cpu": "10", "memory": "41Ti"})),
			want:   []errorID{{field.ErrorTypeInvalid, "spec.pools.public.limits.memory"}},
		},
		"LimitNotAQuantity": {
			reason: "Limits are Kubernetes quantities.",
			spec:   xr(with("pools.private.limits", map[string]any{"cpu": "lots", "memory": "16Gi"})),
			want:   []errorID{{field.ErrorTypeInvalid, "spec.pools.private.limits.cpu"}},
		},
		"UnknownCapacityType": {
			reason: "Capacity types are spot, on-demand and reserved.",
			spec:   xr(with("pools.private.capacityTypes", []any{"spot", "dedicated"})),
			want:   []errorID{{field.ErrorTypeNotSupported, "spec.pools.private.capacityTypes[1]"}},
		},
		"DuplicateCapacityType": {
			reason: "A capacity type listed twice is a mistake, not a preference.",
			spec:   xr(with("pools.private.capacityTypes", []any{"spot", "spot"})),
			want:   []errorID{{field.ErrorTypeDuplicate, "spec.pools.private.capacityTypes[1]"}},
		},
		"EmptyArchitectures": {
			reason: "An explicitly empty architecture list would allow no instance at all.",
			spec:   xr(with("pools.public.architectures", []any{})),
			want:   []errorID{{field.ErrorTypeRequired, "spec.pools.public.architectures"}},
		},
		"UnknownArchitecture": {
			reason: "Architectures are arm64 and amd64.",
			spec:   xr(with("pools.private.architectures", []any{"x86_64"})),
			want:   []errorID{{field.ErrorTypeNotSupported, "spec.pools.private.architectures[0]"}},
		},
		"BadCategory": {
			reason: "Instance categories are lowercase letters.",
			spec:   xr(with("pools.private.instanceCategories", []any{"c", "M*"})),
			want:   []errorID{{field.ErrorTypeInvalid, "spec.pools.private.instanceCategories[1]"}},
		},
		"GenerationZero": {
			reason: "Instance generations start at 1.",
			spec:   xr(with("pools.private.minGeneration", 0)),
			want:   []errorID{{field.ErrorTypeInvalid, "spec.pools.private.minGeneration"}},
		},
		"ConsolidateAfterNotADuration": {
			reason: "consolidateAfter is a duration such as 5m.",
			spec:   xr(with("pools.private.consolidateAfter", "soon")),
			want:   []errorID{{field.ErrorTypeInvalid, "spec.pools.private.consolidateAfter"}},
		},
		"LatestAMINotAllowed": {
			reason: "al2023@latest floats; refused unless the platform allows it.",
			spec:   xr(with("pools.public.amiAlias", "al2023@latest")),
			want:   []errorID{{field.ErrorTypeForbidden, "spec.pools.public.amiAlias"}},
		},
		"AMINotARelease": {
			reason: "al2023@v20251117 was this function's own default, yet no EKS AMI release has that name: Karpenter resolves no image and no node ever launches.",
			spec:   xr(with("pools.private.amiAlias", "al2023@v20251117")),
			want:   []errorID{{field.ErrorTypeInvalid, "spec.pools.private.amiAlias"}},
		},
		"AMINotAL2023": {
			reason: "Only AL2023 aliases are supported: the public pool's user data is a NodeConfig.",
			spec:   xr(with("pools.private.amiAlias", "bottlerocket@v1.30.0")),
			want:   []errorID{{field.ErrorTypeInvalid, "spec.pools.private.amiAlias"}},
		},
		"PublicPoolWithoutPlatformSecurityGroup": {
			reason: "A platform without a public security group cannot serve a claim whose public pool is on.",
			spec:   xr(),
			input:  input(map[string]any{"nodes": map[string]any{"publicSecurityGroupSuffix": ""}}),
			want:   []errorID{{field.ErrorTypeRequired, "input.nodes.publicSecurityGroupSuffix"}},
		},
		"FluxSourceKind": {
			reason: "Kustomizations build from a GitRepository, an OCIRepository or a Bucket.",
			spec:   xr(),
			input:  input(map[string]any{"flux": map[string]any{"sourceRef": map[string]any{"kind": "HelmRepository"}}}),
			want:   []errorID{{field.ErrorTypeNotSupported, "input.flux.sourceRef.kind"}},
		},
		"FluxPathEscapes": {
			reason: "A base path must stay inside the source.",
			spec:   xr(),
			input:  input(map[string]any{"flux": map[string]any{"nodesPath": "./../other"}}),
			want:   []errorID{{field.ErrorTypeInvalid, "input.flux.nodesPath"}},
		},
		"FluxInterval": {
			reason: "Intervals are Go durations.",
			spec:   xr(),
			input:  input(map[string]any{"flux": map[string]any{"interval": "ten minutes"}}),
			want:   []errorID{{field.ErrorTypeInvalid, "input.flux.interval"}},
		},
		"FluxRetryIntervalUnderASecond": {
			reason: "Flux's retry interval is at least a second: a finer duration renders as 500µs, which Flux's CRD refuses.",
			spec:   xr(),
			input:  input(map[string]any{"flux": map[string]any{"retryInterval": "500us"}}),
			want:   []errorID{{field.ErrorTypeInvalid, "input.flux.retryInterval"}},
		},
		"SettledIntervalNotADuration": {
			reason: "The settled interval is a Go duration.",
			spec:   xr(),
			input:  input(map[string]any{"settledInterval": "hourly"}),
			want:   []errorID{{field.ErrorTypeInvalid, "input.settledInterval"}},
		},
		"SettledIntervalBelowTheSDKsDefault": {
			reason: "A settled claim reconciled more often than the SDK's default TTL would cost Crossplane more than it does today.",
			spec:   xr(),
			input:  input(map[string]any{"settledInterval": "30s"}),
			want:   []errorID{{field.ErrorTypeInvalid, "input.settledInterval"}},
		},
		"SettledIntervalAboveAnHour": {
			reason: "Past an hour, Crossplane's default --sync-interval reconciles it anyway.",
			spec:   xr(),
			input:  input(map[string]any{"settledInterval": "2h"}),
			want:   []errorID{{field.ErrorTypeInvalid, "input.settledInterval"}},
		},
		"TolerationOperator": {
			reason: "Tolerations use Equal or Exists.",
			spec:   xr(),
			input:  input(map[string]any{"controller": map[string]any{"tolerations": []any{map[string]any{"key": "CriticalAddonsOnly", "operator": "Matches"}}}}),
			want:   []errorID{{field.ErrorTypeNotSupported, "input.controller.tolerations[0].operator"}},
		},
		"NodeSelectorKey": {
			reason: "Node selector keys are label keys.",
			spec:   xr(),
			input:  input(map[string]any{"controller": map[string]any{"nodeSelector": map[string]any{"bad key": "x"}}}),
			want:   []errorID{{field.ErrorTypeInvalid, "input.controller.nodeSelector[bad key]"}},
		},
		"RootVolumeTooSmall": {
			reason: "AL2023 needs a root volume of at least 20Gi.",
			spec:   xr(),
			input:  input(map[string]any{"nodes": map[string]any{"rootVolumeSize": "8Gi"}}),
			want:   []errorID{{field.ErrorTypeInvalid, "input.nodes.rootVolumeSize"}},
		},
		"RootVolumeInMi": {
			reason: "EC2NodeClass takes volume sizes in whole Gi, G, Ti or T only.",
			spec:   xr(),
			input:  input(map[string]any{"nodes": map[string]any{"rootVolumeSize": "20480Mi"}}),
			want:   []errorID{{field.ErrorTypeInvalid, "input.nodes.rootVolumeSize"}},
		},
		"TagReservedByKarpenter": {
			reason: "Karpenter refuses node classes carrying tags it sets itself.",
			spec:   xr(),
			input:  input(map[string]any{"tags": map[string]any{"karpenter.sh/nodepool": "x"}}),
			want:   []errorID{{field.ErrorTypeInvalid, "input.tags[karpenter.sh/nodepool]"}},
		},
		"TagOfAClusterOwnership": {
			reason: "kubernetes.io/cluster/<name> scopes the controller policy: the platform must not set it.",
			spec:   xr(),
			input:  input(map[string]any{"tags": map[string]any{"kubernetes.io/cluster/other": "owned"}}),
			want:   []errorID{{field.ErrorTypeInvalid, "input.tags[kubernetes.io/cluster/other]"}},
		},
		"EmptySubnetTagValue": {
			reason: "Karpenter's selector terms refuse empty tag values.",
			spec:   xr(),
			input:  input(map[string]any{"nodes": map[string]any{"privateSubnetTags": map[string]any{"network": ""}}}),
			want:   []errorID{{field.ErrorTypeInvalid, "input.nodes.privateSubnetTags[network]"}},
		},
		"SubnetClusterTagNamesNoCluster": {
			reason: "A subnet tag without {cluster} in its key or value scopes the subnets to no cluster.",
			spec:   xr(),
			input:  input(map[string]any{"nodes": map[string]any{"subnetClusterTag": map[string]any{"key": "env", "value": "prod"}}}),
			want:   []errorID{{field.ErrorTypeInvalid, "input.nodes.subnetClusterTag"}},
		},
		"DeletionGuardNotAnAnnotationKey": {
			reason: "The deletion guard's confirmation is an annotation: its key must be one the API server takes.",
			spec:   xr(),
			input:  input(map[string]any{"deletionGuard": map[string]any{"annotation": "delete with nodes"}}),
			want:   []errorID{{field.ErrorTypeInvalid, "input.deletionGuard.annotation"}},
		},
		"DefaultAMINotARelease": {
			reason: "The platform's pin is checked against the releases the function knows, too.",
			spec:   xr(),
			input:  input(map[string]any{"nodes": map[string]any{"defaultAmiAlias": "al2023@v20251117"}}),
			want:   []errorID{{field.ErrorTypeInvalid, "input.nodes.defaultAmiAlias"}},
		},
		"ClusterAMINotARelease": {
			reason: "A cluster's own pin is checked as the platform-wide one, at its own path.",
			spec:   xr(),
			input:  input(map[string]any{"tenancy": tenancyWith("amiAlias", "al2023@v20251117")}),
			want:   []errorID{{field.ErrorTypeInvalid, "input.tenancy.clusters[1].amiAlias"}},
		},
		"ClusterControllerRequestsAboveLimits": {
			reason: "A cluster's controller override is checked as the platform-wide one, at its own path.",
			spec:   xr(),
			input: input(map[string]any{"tenancy": tenancyWith("controller", map[string]any{"resources": map[string]any{
				"requests": map[string]any{"cpu": "2"}, "limits": map[string]any{"cpu": "1"}}})}),
			want: []errorID{{field.ErrorTypeInvalid, "input.tenancy.clusters[1].controller.resources.requests[cpu]"}},
		},
		"TwoClustersOneRegionUnscoped": {
			reason: "Two clusters in one account and region: the load balancer role tags select both clusters' subnets, so the platform must scope them.",
			spec:   xr(),
			input: input(map[string]any{"tenancy": map[string]any{"clusters": []any{
				prodEUDeclared(),
				prodEUDeclared(with("name", "staging-eu"), with("nodeIdentity.roleArn", "arn:aws:iam::111122223333:role/staging-node")),
			}}}),
			want: []errorID{{field.ErrorTypeRequired, "input.nodes.subnetClusterTag"}},
		},
		"DefaultAMILatestNotAllowed": {
			reason: "The platform's own default AMI must be pinned unless it allows latest.",
			spec:   xr(),
			input:  input(map[string]any{"nodes": map[string]any{"defaultAmiAlias": "al2023@latest"}}),
			want:   []errorID{{field.ErrorTypeInvalid, "input.nodes.defaultAmiAlias"}},
		},
	})
}

// TestPoolDefaults checks what a pool a tenant leaves empty becomes.
func TestPoolDefaults(t *testing.T) {
	c, errs := Load(owner, xr(), input(nil))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	gen := int32(6)
	want := v1alpha1.Pools{
		Private: v1alpha1.Pool{
			CapacityTypes:      []v1alpha1.CapacityType{"spot", "on-demand"},
			Architectures:      []v1alpha1.Architecture{"arm64", "amd64"},
			InstanceCategories: []string{"c", "m", "r"},
			MinGeneration:      &gen,
			Limits:             &v1alpha1.PoolLimits{CPU: "100", Memory: "400Gi"},
			ConsolidateAfter:   "15m",
			AMIAlias:           "al2023@v20260714",
		},
		Public: v1alpha1.PublicPool{
			Pool: v1alpha1.Pool{
				CapacityTypes:      []v1alpha1.CapacityType{"spot", "on-demand"},
				Architectures:      []v1alpha1.Architecture{"arm64", "amd64"},
				InstanceCategories: []string{"c", "m", "r"},
				MinGeneration:      &gen,
				Limits:             &v1alpha1.PoolLimits{CPU: "32", Memory: "128Gi"},
				ConsolidateAfter:   "15m",
				AMIAlias:           "al2023@v20260714",
			},
		},
	}
	if diff := cmp.Diff(want, c.Spec.Pools); diff != "" {
		t.Errorf("defaulted pools (-want +got):\n%s", diff)
	}
	if !c.PublicEnabled() {
		t.Error("the public pool is on unless the claim turns it off")
	}
	c, errs = Load(owner, xr(with("pools.public.enabled", false)), input(map[string]any{"nodes": map[string]any{"publicSecurityGroupSuffix": ""}}))
	if len(errs) > 0 {
		t.Fatalf("a claim without a public pool needs no public security group: %v", errs)
	}
	if c.PublicEnabled() {
		t.Error("spec.pools.public.enabled=false turns the public pool off")
	}
}

// tenancyWith is tenancy() with one field of the tests' cluster prod-eu
// (clusters[1]) set.
func tenancyWith(key string, value any) map[string]any {
	t := tenancy(nil)
	t["clusters"].([]any)[1].(map[string]any)[key] = value
	return t
}

// TestClusterAMIPin: a cluster's own pin is its pools' default, in place of
// the platform-wide one; a pool's own pin still wins, and another
// cluster's pools keep the platform's.
func TestClusterAMIPin(t *testing.T) {
	in := input(map[string]any{"tenancy": tenancyWith("amiAlias", "al2023@v20260403"), "nodes": map[string]any{"defaultAmiAlias": "al2023@v20260610"}})
	c, errs := Load(owner, xr(with("pools.public.amiAlias", "al2023@v20260114")), in)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := c.Spec.Pools.Private.AMIAlias; got != "al2023@v20260403" {
		t.Errorf("private pool pinned %s, want the cluster's al2023@v20260403", got)
	}
	if got := c.Spec.Pools.Public.AMIAlias; got != "al2023@v20260114" {
		t.Errorf("public pool pinned %s, want its own al2023@v20260114", got)
	}
	other, errs := Load(owner, xr(with("cluster.name", "prod-us")), in)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := other.Spec.Pools.Private.AMIAlias; got != "al2023@v20260610" {
		t.Errorf("prod-us's private pool pinned %s, want the platform's al2023@v20260610 (not the newest release known)", got)
	}
}

// TestSubnetScope: clusters that share an account and region are admitted
// once the platform scopes subnets to their cluster, and clusters that
// share neither need no scope.
func TestSubnetScope(t *testing.T) {
	staging := prodEUDeclared(with("name", "staging-eu"), with("nodeIdentity.roleArn", "arn:aws:iam::111122223333:role/staging-node"))
	scoped := map[string]any{"key": "kubernetes.io/cluster/{cluster}"}
	if _, errs := Load(owner, xr(), input(map[string]any{
		"nodes":   map[string]any{"subnetClusterTag": scoped},
		"tenancy": map[string]any{"clusters": []any{prodEUDeclared(), staging}},
	})); len(errs) > 0 {
		t.Errorf("scoped: %v", errs)
	}
	otherRegion := prodEUDeclared(with("name", "staging-us"), with("region", "us-east-1"), with("nodeIdentity.roleArn", "arn:aws:iam::111122223333:role/staging-node"))
	if _, errs := Load(owner, xr(), input(map[string]any{
		"tenancy": map[string]any{"clusters": []any{prodEUDeclared(), otherRegion}},
	})); len(errs) > 0 {
		t.Errorf("two regions: %v", errs)
	}
}

// TestAMIsServeTheCluster: once AWS reports the cluster's Kubernetes
// version, a pin the function knows serves no AMI for it is refused at the
// pool's path, the platform's pin as much as a tenant's; before, nothing
// is refused for it.
func TestAMIsServeTheCluster(t *testing.T) {
	c, errs := Load(owner, xr(with("pools.private.amiAlias", "al2023@v20251120")), input(nil))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if errs := c.CheckAMIsServe(); len(errs) > 0 {
		t.Errorf("version not observed yet: %v", errs)
	}
	c.ClusterVersion = "1.34"
	if errs := c.CheckAMIsServe(); len(errs) > 0 {
		t.Errorf("v20251120 serves 1.34: %v", errs)
	}
	c.ClusterVersion = "1.35"
	errs = c.CheckAMIsServe()
	if len(errs) != 1 || errs[0].Field != "spec.pools.private.amiAlias" || !strings.Contains(errs[0].Detail, `cluster "prod-eu" runs Kubernetes 1.35: serves no Kubernetes 1.35 AMI`) {
		t.Errorf("v20251120 on a 1.35 cluster: %v, want one refusal at spec.pools.private.amiAlias", errs)
	}
	c.ClusterVersion = "1.29" // below what the default (v20260714: 1.30 to 1.36) serves
	said := false
	for _, e := range c.CheckAMIsServe() {
		said = said || e.Field == "spec.pools.public.amiAlias" && strings.Contains(e.Detail, "the platform's pin")
	}
	if !said {
		t.Errorf("the platform's default on a 1.29 cluster: %v, want it refused as the platform's pin", c.CheckAMIsServe())
	}
}

// TestMinimumAMI: the platform's minimum release (platform-wide, or a
// cluster's own) refuses a tenant's older pin at its field path, saying what
// to move to, and refuses a platform pin below it; newer pins and latest
// (where allowed) pass.
func TestMinimumAMI(t *testing.T) {
	floor := map[string]any{"defaultAmiAlias": "al2023@v20260714", "minAmiAlias": "al2023@v20260505"}
	for name, tc := range map[string]struct {
		spec map[string]any
		in   map[string]any
	}{
		"AtTheMinimum":  {spec: xr(with("pools.private.amiAlias", "al2023@v20260505")), in: map[string]any{"nodes": floor}},
		"AboveIt":       {spec: xr(with("pools.private.amiAlias", "al2023@v20260610")), in: map[string]any{"nodes": floor}},
		"NoPin":         {spec: xr(), in: map[string]any{"nodes": floor}},
		"LatestAllowed": {spec: xr(with("pools.public.amiAlias", "al2023@latest")), in: map[string]any{"nodes": map[string]any{"defaultAmiAlias": "al2023@v20260714", "minAmiAlias": "al2023@v20260505", "allowLatestAmi": true}}},
		"AnotherClustersMinimum": {
			spec: xr(with("pools.private.amiAlias", "al2023@v20260403")),
			in: map[string]any{"tenancy": func() map[string]any {
				t := tenancy(nil)
				t["clusters"].([]any)[0].(map[string]any)["minAmiAlias"] = "al2023@v20260505" // not prod-eu
				return t
			}()},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if _, errs := Load(owner, tc.spec, input(tc.in)); len(errs) > 0 {
				t.Errorf("want accepted, got %v", errs)
			}
		})
	}

	_, errs := Load(owner, xr(with("pools.private.amiAlias", "al2023@v20260403")), input(map[string]any{"nodes": floor}))
	want := field.ErrorList{field.Invalid(field.NewPath("spec", "pools", "private", "amiAlias"), "al2023@v20260403",
		`is older than the platform's minimum al2023@v20260505 for cluster "prod-eu": pin al2023@v20260505 or later, or remove the pin to run the platform's al2023@v20260714`)}
	if diff := cmp.Diff(want.ToAggregate().Error(), errs.ToAggregate().Error()); diff != "" {
		t.Errorf("a tenant's pin below the minimum (-want +got):\n%s", diff)
	}

	testLoadInvalid(t, map[string]invalidCase{
		"ClusterMinimumWins": {
			reason: "A cluster's own minimum refuses a pin the platform-wide one would let through.",
			spec:   xr(with("pools.public.amiAlias", "al2023@v20260610")),
			input: input(map[string]any{"nodes": floor, "tenancy": map[string]any{"clusters": []any{
				prodEUDeclared(with("minAmiAlias", "al2023@v20260618"), with("amiAlias", "al2023@v20260714")),
			}}}),
			want: []errorID{{field.ErrorTypeInvalid, "spec.pools.public.amiAlias"}},
		},
		"PlatformPinBelowTheMinimum": {
			reason: "The platform cannot pin below its own minimum.",
			spec:   xr(),
			input:  input(map[string]any{"nodes": map[string]any{"defaultAmiAlias": "al2023@v20260403", "minAmiAlias": "al2023@v20260505"}}),
			want:   []errorID{{field.ErrorTypeInvalid, "input.nodes.defaultAmiAlias"}},
		},
		"ClusterPinBelowItsMinimum": {
			reason: "A cluster's pin below its own minimum is refused at the cluster's pin.",
			spec:   xr(),
			input: input(map[string]any{"tenancy": map[string]any{"clusters": []any{
				prodEUDeclared(with("minAmiAlias", "al2023@v20260618"), with("amiAlias", "al2023@v20260610")),
			}}}),
			want: []errorID{{field.ErrorTypeInvalid, "input.tenancy.clusters[0].amiAlias"}},
		},
		"ClusterMinimumAbovePlatformPin": {
			reason: "A cluster that pins nothing of its own runs the platform's pin, which must meet the cluster's minimum.",
			spec:   xr(),
			input: input(map[string]any{"nodes": map[string]any{"defaultAmiAlias": "al2023@v20260610"}, "tenancy": map[string]any{"clusters": []any{
				prodEUDeclared(with("minAmiAlias", "al2023@v20260618")),
			}}}),
			want: []errorID{{field.ErrorTypeInvalid, "input.nodes.defaultAmiAlias"}},
		},
		"MinimumFloats": {
			reason: "A minimum of latest would refuse every pin each time AWS releases.",
			spec:   xr(),
			input:  input(map[string]any{"nodes": map[string]any{"minAmiAlias": "al2023@latest", "allowLatestAmi": true}}),
			want:   []errorID{{field.ErrorTypeInvalid, "input.nodes.minAmiAlias"}},
		},
	})
}
