package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/do-now/function-karpenter/apis/input/v1beta1"
	"github.com/do-now/function-karpenter/apis/v1alpha1"
)

// tenancy declares prod-us, with a pool override of its own, and the tests'
// cluster prod-eu with the given pool override.
func tenancy(prodEUPools map[string]any) map[string]any {
	eu := map[string]any{"name": "prod-eu", "account": "123456789012", "namespaces": []any{"team-a"}}
	if prodEUPools != nil {
		eu["pools"] = prodEUPools
	}
	return map[string]any{"clusters": []any{
		map[string]any{"name": "prod-us", "account": "123456789012", "pools": map[string]any{"maxLimits": map[string]any{"cpu": "5000"}}},
		eu,
	}}
}

// TestPoolPolicyDefaults pins the function's own pool policy, written out
// here rather than read from the Default* constants: PRODUCT.md §5's
// consolidation delay, memory floor, budget and expiry.
func TestPoolPolicyDefaults(t *testing.T) {
	c, errs := Load(owner, xr(), input(nil))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	gen, maxPods := int32(6), int32(0)
	want := v1beta1.Pools{
		Allowed: v1beta1.AllowedPools{
			InstanceCategories: []string{"c", "m", "r"},
			CapacityTypes:      []string{"spot", "on-demand"},
			Architectures:      []string{"arm64", "amd64"},
			Zones:              []string{},
		},
		MinGeneration:       &gen,
		MinMemory:           "8Gi",
		MaxLimits:           v1beta1.MaxLimits{CPU: "200", Memory: "800Gi"},
		MaxClusterLimits:    v1beta1.MaxLimits{CPU: "200", Memory: "800Gi"},
		MinConsolidateAfter: "15m",
		Defaults: v1beta1.PoolDefaults{
			ConsolidateAfter: "15m",
			ExpireAfter:      "720h",
			DisruptionBudget: "20%",
		},
		KubeletMaxPods: &maxPods,
	}
	if diff := cmp.Diff(want, c.Pools); diff != "" {
		t.Errorf("the function's pool policy: -want, +got:\n%s", diff)
	}
	if got := c.MinMemoryMiB(); got != 8192 {
		t.Errorf("MinMemoryMiB() = %d, want 8192", got)
	}
}

// TestPoolPolicyLayers checks that input.pools overrides the function's
// defaults and the claimed cluster's override wins over both, field by
// field, while another cluster's override does not apply.
func TestPoolPolicyLayers(t *testing.T) {
	platform := map[string]any{
		"allowed":             map[string]any{"instanceCategories": []any{"c", "m"}, "zones": []any{"eu-west-3a", "eu-west-3b"}},
		"minGeneration":       7,
		"minMemory":           "16Gi",
		"maxLimits":           map[string]any{"cpu": "400", "memory": "1600Gi"},
		"minConsolidateAfter": "10m",
		"defaults":            map[string]any{"expireAfter": "336h", "disruptionBudget": "10%"},
		"kubeletMaxPods":      110,
	}
	cases := map[string]struct {
		reason   string
		override map[string]any
		want     func(*v1beta1.Pools)
	}{
		"PlatformOnly": {
			reason: "Without an override for the cluster, input.pools decides and the function's defaults fill the rest.",
		},
		"OverrideFieldByField": {
			reason: "The cluster's override wins where it sets a field and inherits where it does not.",
			override: map[string]any{
				"allowed":          map[string]any{"capacityTypes": []any{"on-demand"}, "zones": []any{}},
				"maxLimits":        map[string]any{"memory": "100Gi"},
				"maxClusterLimits": map[string]any{"memory": "200Gi"},
				"defaults":         map[string]any{"terminationGracePeriod": "2h", "disruptionBudget": "1"},
				"kubeletMaxPods":   0,
			},
			want: func(p *v1beta1.Pools) {
				p.Allowed.CapacityTypes = []string{"on-demand"}
				p.Allowed.Zones = []string{}
				p.MaxLimits.Memory = "100Gi"
				p.MaxClusterLimits.Memory = "200Gi"
				p.Defaults.TerminationGracePeriod = "2h"
				p.Defaults.DisruptionBudget = "1"
				zero := int32(0)
				p.KubeletMaxPods = &zero
			},
		},
		"ReservationsOfferReserved": {
			reason: "Capacity reservations selected for the cluster add reserved to the default capacity types.",
			override: map[string]any{
				"capacityReservationSelectorTerms": []any{map[string]any{"tags": map[string]any{"team": "a"}, "ownerID": "123456789012"}},
			},
			want: func(p *v1beta1.Pools) {
				p.Allowed.CapacityTypes = []string{"spot", "on-demand", "reserved"}
				p.CapacityReservationSelectorTerms = []v1beta1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "a"}, OwnerID: "123456789012"}}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, errs := Load(owner, xr(), input(map[string]any{"pools": platform, "tenancy": tenancy(tc.override)}))
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			gen, maxPods := int32(7), int32(110)
			want := v1beta1.Pools{
				Allowed: v1beta1.AllowedPools{
					InstanceCategories: []string{"c", "m"},
					CapacityTypes:      []string{"spot", "on-demand"},
					Architectures:      []string{"arm64", "amd64"},
					Zones:              []string{"eu-west-3a", "eu-west-3b"},
				},
				MinGeneration:       &gen,
				MinMemory:           "16Gi",
				MaxLimits:           v1beta1.MaxLimits{CPU: "400", Memory: "1600Gi"},
				MaxClusterLimits:    v1beta1.MaxLimits{CPU: "400", Memory: "1600Gi"},
				MinConsolidateAfter: "10m",
				Defaults: v1beta1.PoolDefaults{
					ConsolidateAfter: "15m",
					ExpireAfter:      "336h",
					DisruptionBudget: "10%",
				},
				KubeletMaxPods: &maxPods,
			}
			if tc.want != nil {
				tc.want(&want)
			}
			if diff := cmp.Diff(want, c.Pools); diff != "" {
				t.Errorf("\n%s\npool policy of prod-eu: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestPoolsTakePlatformDefaults checks that what a tenant leaves unset comes
// from the platform's input, not from constants in the code.
func TestPoolsTakePlatformDefaults(t *testing.T) {
	in := input(map[string]any{
		"pools": map[string]any{
			"allowed":          map[string]any{"capacityTypes": []any{"on-demand"}, "architectures": []any{"amd64"}, "instanceCategories": []any{"m"}},
			"minGeneration":    8,
			"maxLimits":        map[string]any{"cpu": "16", "memory": "64Gi"},
			"maxClusterLimits": map[string]any{"cpu": "24", "memory": "96Gi"},
			"defaults":         map[string]any{"consolidateAfter": "30m"},
		},
		"tenancy": tenancy(map[string]any{"allowed": map[string]any{"zones": []any{"eu-west-3c"}}}),
	})
	c, errs := Load(owner, xr(with("pools.public.limits", map[string]any{"cpu": "8", "memory": "32Gi"})), in)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	gen := int32(8)
	want := v1alpha1.Pool{
		CapacityTypes:      []v1alpha1.CapacityType{"on-demand"},
		Architectures:      []v1alpha1.Architecture{"amd64"},
		InstanceCategories: []string{"m"},
		Zones:              []string{"eu-west-3c"},
		MinGeneration:      &gen,
		// The function's default 100/400Gi, cut to the platform's ceiling.
		Limits:           &v1alpha1.PoolLimits{CPU: "16", Memory: "64Gi"},
		ConsolidateAfter: "30m",
		AMIAlias:         "al2023@v20260714",
	}
	if diff := cmp.Diff(want, c.Spec.Pools.Private); diff != "" {
		t.Errorf("private pool: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(&v1alpha1.PoolLimits{CPU: "8", Memory: "32Gi"}, c.Spec.Pools.Public.Limits); diff != "" {
		t.Errorf("public pool limits the tenant set: -want, +got:\n%s", diff)
	}
}

// TestPoolBounds is the catalog of claims outside the platform's bounds:
// each is refused with its exact field path and the bound it breaks.
func TestPoolBounds(t *testing.T) {
	cases := map[string]struct {
		reason string
		spec   map[string]any
		input  map[string]any
		want   []string
	}{
		"CPUOverCeiling": {
			reason: "A pool's CPU limit above the platform's ceiling is refused, naming the ceiling and the cluster.",
			spec:   xr(with("pools.public.limits", map[string]any{"cpu": "500", "memory": "100Gi"})),
			want:   []string{`spec.pools.public.limits.cpu: Invalid value: "500": exceeds the platform's ceiling 200 for cluster "prod-eu"`},
		},
		"MemoryOverClusterCeiling": {
			reason: "The cluster's own ceiling wins over the platform-wide one.",
			spec:   xr(with("pools.private.limits", map[string]any{"cpu": "10", "memory": "200Gi"})),
			input:  map[string]any{"tenancy": tenancy(map[string]any{"maxLimits": map[string]any{"memory": "128Gi"}})},
			want:   []string{`spec.pools.private.limits.memory: Invalid value: "200Gi": exceeds the platform's ceiling 128Gi for cluster "prod-eu"`},
		},
		"AnotherClustersCeiling": {
			reason: "Another cluster's override does not raise this cluster's ceiling.",
			spec:   xr(with("pools.private.limits", map[string]any{"cpu": "300", "memory": "100Gi"})),
			input:  map[string]any{"tenancy": tenancy(nil)},
			want:   []string{`spec.pools.private.limits.cpu: Invalid value: "300": exceeds the platform's ceiling 200 for cluster "prod-eu"`},
		},
		"CategoryNotAllowed": {
			reason: "A tenant may narrow the instance categories, never widen them.",
			spec:   xr(with("pools.private.instanceCategories", []any{"p", "c"})),
			want:   []string{`spec.pools.private.instanceCategories[0]: Unsupported value: "p": the platform allows c, m, r`},
		},
		"ReservedWithoutReservations": {
			reason: "reserved capacity is refused unless the platform selects reservations.",
			spec:   xr(with("pools.private.capacityTypes", []any{"reserved", "on-demand"})),
			want:   []string{`spec.pools.private.capacityTypes[0]: Unsupported value: "reserved": the platform offers no capacity reservations for cluster "prod-eu"`},
		},
		"CapacityTypeNotAllowed": {
			reason: "A platform that allows on-demand only refuses spot.",
			spec:   xr(with("pools.public.capacityTypes", []any{"spot"})),
			input:  map[string]any{"pools": map[string]any{"allowed": map[string]any{"capacityTypes": []any{"on-demand"}}}},
			want:   []string{`spec.pools.public.capacityTypes[0]: Unsupported value: "spot": the platform allows on-demand`},
		},
		"ArchitectureNotAllowed": {
			reason: "A Graviton-only platform refuses amd64.",
			spec:   xr(with("pools.private.architectures", []any{"arm64", "amd64"})),
			input:  map[string]any{"pools": map[string]any{"allowed": map[string]any{"architectures": []any{"arm64"}}}},
			want:   []string{`spec.pools.private.architectures[1]: Unsupported value: "amd64": the platform allows arm64`},
		},
		"ZoneNotAllowed": {
			reason: "Where the platform confines pools to zones, a tenant's zones are a subset of them.",
			spec:   xr(with("pools.private.zones", []any{"eu-west-3a", "eu-west-3c"})),
			input:  map[string]any{"tenancy": tenancy(map[string]any{"allowed": map[string]any{"zones": []any{"eu-west-3a", "eu-west-3b"}}})},
			want:   []string{`spec.pools.private.zones[1]: Unsupported value: "eu-west-3c": the platform allows eu-west-3a, eu-west-3b`},
		},
		"ZoneOfAnotherRegion": {
			reason: "Where the platform allows any zone, a tenant's zone must be one of the cluster's region.",
			spec:   xr(with("pools.public.zones", []any{"eu-west-1a"})),
			want:   []string{`spec.pools.public.zones[0]: Invalid value: "eu-west-1a": is not a zone of the cluster's region eu-west-3`},
		},
		"GenerationBelowMinimum": {
			reason: "A tenant's minGeneration below the platform's is refused.",
			spec:   xr(with("pools.private.minGeneration", 5)),
			want:   []string{`spec.pools.private.minGeneration: Invalid value: 5: is below the platform's minimum generation 6 for cluster "prod-eu"`},
		},
		"ConsolidationBelowMinimum": {
			reason: "A consolidation delay under the platform's floor raced the CNI's startup taint.",
			spec:   xr(with("pools.public.consolidateAfter", "1m")),
			want: []string{`spec.pools.public.consolidateAfter: Invalid value: "1m": is below the platform's minimum 15m for cluster "prod-eu": ` +
				`a new node waits for its CNI before it takes pods`},
		},
		"PoolsOverClusterCeiling": {
			reason: "Two pools each within maxLimits may not add up past the cluster's ceiling (by default, a pool's): both figures are named.",
			spec: xr(with("pools.private.limits", map[string]any{"cpu": "150", "memory": "100Gi"}),
				with("pools.public.limits", map[string]any{"cpu": "100", "memory": "100Gi"})),
			want: []string{`spec.pools: Invalid value: "cpu 250": the pools' cpu limits add up to 250 (150 + 100), ` +
				`above the platform's ceiling 200 for cluster "prod-eu" (pools.maxClusterLimits.cpu)`},
		},
		"PoolsOverClusterCeilingByAMillicore": {
			reason: "Limits in other units add up exactly: 150 CPU and 50001m are one millicore over the ceiling.",
			spec: xr(with("pools.private.limits", map[string]any{"cpu": "150", "memory": "100Gi"}),
				with("pools.public.limits", map[string]any{"cpu": "50001m", "memory": "100Gi"})),
			want: []string{`spec.pools: Invalid value: "cpu 200001m": the pools' cpu limits add up to 200001m (150 + 50001m), ` +
				`above the platform's ceiling 200 for cluster "prod-eu" (pools.maxClusterLimits.cpu)`},
		},
		"PoolsOverTheClustersOwnCeiling": {
			reason: "The cluster's own maxClusterLimits wins; the public pool's default limits count.",
			spec:   xr(with("pools.private.limits", map[string]any{"cpu": "10", "memory": "200Gi"})),
			input:  map[string]any{"tenancy": tenancy(map[string]any{"maxClusterLimits": map[string]any{"memory": "300Gi"}})},
			want: []string{`spec.pools: Invalid value: "memory 328Gi": the pools' memory limits add up to 328Gi (200Gi + 128Gi), ` +
				`above the platform's ceiling 300Gi for cluster "prod-eu" (pools.maxClusterLimits.memory)`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, errs := Load(owner, tc.spec, input(tc.input))
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nLoad(...) errors: -want, +got:\n%s", tc.reason, diff)
			}
			if c != nil {
				t.Errorf("\n%s\nLoad(...): want no config with errors", tc.reason)
			}
		})
	}
}

// TestPoolPolicyInvalid is the catalog of bad pool policy, at each layer's
// own path.
func TestPoolPolicyInvalid(t *testing.T) {
	const eu = "input.tenancy.clusters[1].pools" // prod-eu's override
	cases := map[string]struct {
		reason string
		input  map[string]any
		want   []errorID
	}{
		"UnknownCapacityType": {
			reason: "Capacity types are spot, on-demand and reserved.",
			input:  map[string]any{"pools": map[string]any{"allowed": map[string]any{"capacityTypes": []any{"spot", "dedicated"}}}},
			want:   []errorID{{field.ErrorTypeInvalid, "input.pools.allowed.capacityTypes[1]"}},
		},
		"EmptyArchitectures": {
			reason: "An empty allowed set would allow no instance at all.",
			input:  map[string]any{"tenancy": tenancy(map[string]any{"allowed": map[string]any{"architectures": []any{}}})},
			want:   []errorID{{field.ErrorTypeRequired, eu + ".allowed.architectures"}},
		},
		"BadZone": {
			reason: "Zones are availability zone names.",
			input:  map[string]any{"pools": map[string]any{"allowed": map[string]any{"zones": []any{"euw3-az1"}}}},
			want:   []errorID{{field.ErrorTypeInvalid, "input.pools.allowed.zones[0]"}},
		},
		"ZoneOfAnotherRegion": {
			reason: "A cluster's allowed zones must be in the claimed cluster's region, else no node could ever launch.",
			input:  map[string]any{"tenancy": tenancy(map[string]any{"allowed": map[string]any{"zones": []any{"us-east-1a"}}})},
			want:   []errorID{{field.ErrorTypeInvalid, eu + ".allowed.zones[0]"}},
		},
		"GenerationZero": {
			reason: "Generations start at 1.",
			input:  map[string]any{"pools": map[string]any{"minGeneration": 0}},
			want:   []errorID{{field.ErrorTypeInvalid, "input.pools.minGeneration"}},
		},
		"MinMemoryNotWholeMiB": {
			reason: "Karpenter labels instance memory in MiB.",
			input:  map[string]any{"pools": map[string]any{"minMemory": "8000000000"}},
			want:   []errorID{{field.ErrorTypeInvalid, "input.pools.minMemory"}},
		},
		"CeilingOverAbsoluteBound": {
			reason: "The platform's ceiling is itself bounded.",
			input:  map[string]any{"pools": map[string]any{"maxLimits": map[string]any{"cpu": "20000"}}},
			want:   []errorID{{field.ErrorTypeInvalid, "input.pools.maxLimits.cpu"}},
		},
		"GraceTooLong": {
			reason: "The termination grace period bounds an uninstall: at most 24h.",
			input:  map[string]any{"tenancy": tenancy(map[string]any{"defaults": map[string]any{"terminationGracePeriod": "25h"}})},
			want:   []errorID{{field.ErrorTypeInvalid, eu + ".defaults.terminationGracePeriod"}},
		},
		"ExpireAfterNotADuration": {
			reason: "expireAfter is a duration or Never.",
			input:  map[string]any{"pools": map[string]any{"defaults": map[string]any{"expireAfter": "monthly"}}},
			want:   []errorID{{field.ErrorTypeInvalid, "input.pools.defaults.expireAfter"}},
		},
		"BudgetOverHundredPercent": {
			reason: "A disruption budget is a count or a percentage up to 100%.",
			input:  map[string]any{"pools": map[string]any{"defaults": map[string]any{"disruptionBudget": "120%"}}},
			want:   []errorID{{field.ErrorTypeInvalid, "input.pools.defaults.disruptionBudget"}},
		},
		"DefaultBelowMinimum": {
			reason: "The platform's default consolidation delay must respect its floor, here raised by the cluster: the error names the default where it is set.",
			input:  map[string]any{"tenancy": tenancy(map[string]any{"minConsolidateAfter": "30m"})},
			want:   []errorID{{field.ErrorTypeInvalid, "input.pools.defaults.consolidateAfter"}},
		},
		"PlatformZoneOfAnotherRegion": {
			reason: "A zone input.pools allows, outside the claimed cluster's region, is named where it is set, not in the cluster's override.",
			input: map[string]any{
				"pools":   map[string]any{"allowed": map[string]any{"zones": []any{"us-east-1a"}}},
				"tenancy": tenancy(map[string]any{"maxLimits": map[string]any{"cpu": "100"}}),
			},
			want: []errorID{{field.ErrorTypeInvalid, "input.pools.allowed.zones[0]"}},
		},
		"ReservationsNoPoolMayUse": {
			reason: "Reservations a cluster selects while the platform's capacity types leave reserved out would be carried by every EC2NodeClass and used by no pool.",
			input: map[string]any{
				"pools":   map[string]any{"allowed": map[string]any{"capacityTypes": []any{"spot", "on-demand"}}},
				"tenancy": tenancy(map[string]any{"capacityReservationSelectorTerms": []any{map[string]any{"id": "cr-0123456789abcdef0"}}}),
			},
			want: []errorID{{field.ErrorTypeInvalid, eu + ".capacityReservationSelectorTerms"}},
		},
		"ReservedWithoutTerms": {
			reason: "Allowing reserved capacity without selecting reservations is a contradiction.",
			input:  map[string]any{"pools": map[string]any{"allowed": map[string]any{"capacityTypes": []any{"reserved"}}}},
			want:   []errorID{{field.ErrorTypeInvalid, "input.pools.allowed.capacityTypes"}},
		},
		"ReservationIDWithTags": {
			reason: "A reservation id selects one reservation; Karpenter refuses it with tags.",
			input: map[string]any{"pools": map[string]any{"capacityReservationSelectorTerms": []any{
				map[string]any{"id": "cr-0123456789abcdef0", "tags": map[string]any{"a": "b"}},
			}}},
			want: []errorID{{field.ErrorTypeInvalid, "input.pools.capacityReservationSelectorTerms[0].id"}},
		},
		"EmptyReservationTerm": {
			reason: "A term selects by id or by tags.",
			input:  map[string]any{"pools": map[string]any{"capacityReservationSelectorTerms": []any{map[string]any{"ownerID": "123456789012"}}}},
			want:   []errorID{{field.ErrorTypeRequired, "input.pools.capacityReservationSelectorTerms[0]"}},
		},
		"NegativeMaxPods": {
			reason: "kubelet maxPods is 0 (Karpenter's default) or more.",
			input:  map[string]any{"pools": map[string]any{"kubeletMaxPods": -1}},
			want:   []errorID{{field.ErrorTypeInvalid, "input.pools.kubeletMaxPods"}},
		},
		"ReservationTagsEmpty": {
			reason: "Every empty tag of a reservation term is named; Go walks the tags in no fixed order, the refusal reads the same anyway.",
			input: map[string]any{"pools": map[string]any{"capacityReservationSelectorTerms": []any{
				map[string]any{"tags": map[string]any{"a": "", "b": "", "c": "", "d": ""}},
			}}},
			want: []errorID{
				{field.ErrorTypeInvalid, "input.pools.capacityReservationSelectorTerms[0].tags[a]"},
				{field.ErrorTypeInvalid, "input.pools.capacityReservationSelectorTerms[0].tags[b]"},
				{field.ErrorTypeInvalid, "input.pools.capacityReservationSelectorTerms[0].tags[c]"},
				{field.ErrorTypeInvalid, "input.pools.capacityReservationSelectorTerms[0].tags[d]"},
			},
		},
		"BothCeilingsInvalid": {
			reason: "A bad pool ceiling and a bad cluster ceiling are each named, in one order on every call.",
			input: map[string]any{"pools": map[string]any{
				"maxLimits":        map[string]any{"cpu": "lots"},
				"maxClusterLimits": map[string]any{"cpu": "-1", "memory": "99Ti"},
			}},
			want: []errorID{
				{field.ErrorTypeInvalid, "input.pools.maxClusterLimits.cpu"},
				{field.ErrorTypeInvalid, "input.pools.maxClusterLimits.memory"},
				{field.ErrorTypeInvalid, "input.pools.maxLimits.cpu"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, errs := Load(owner, xr(), input(tc.input))
			// Twenty loads: an order that hangs on map iteration shows.
			for range 20 {
				_, again := Load(owner, xr(), input(tc.input))
				if diff := cmp.Diff(errs.ToAggregate().Error(), again.ToAggregate().Error()); diff != "" {
					t.Fatalf("\n%s\nLoad(...) errors differ between two calls:\n%s", tc.reason, diff)
				}
			}
			if diff := cmp.Diff(tc.want, ids(errs)); diff != "" {
				t.Errorf("\n%s\nLoad(...): -want, +got:\n%s\n(errors: %v)", tc.reason, diff, errs)
			}
		})
	}
}

// TestPoolPolicyMessages pins what a contradiction between two layers says:
// both fields, each at the layer that set it.
func TestPoolPolicyMessages(t *testing.T) {
	_, errs := Load(owner, xr(), input(map[string]any{"tenancy": tenancy(map[string]any{"minConsolidateAfter": "30m"})}))
	want := []string{`input.pools.defaults.consolidateAfter: Invalid value: "15m": is below input.tenancy.clusters[1].pools.minConsolidateAfter 30m`}
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("-want, +got:\n%s", diff)
	}
}

// TestUnmanagedNamespaces checks that the controller can never be put in a
// namespace that existed before any claim: its namespace is composed, and
// deleting the claim would delete it.
func TestUnmanagedNamespaces(t *testing.T) {
	for _, ns := range []string{"kube-system", "kube-public", "kube-node-lease", "default", "flux-system"} {
		_, errs := Load(owner, xr(), input(map[string]any{"podIdentity": map[string]any{"namespace": ns}}))
		if diff := cmp.Diff([]errorID{{field.ErrorTypeInvalid, "input.podIdentity.namespace"}}, ids(errs)); diff != "" {
			t.Errorf("podIdentity.namespace %q: -want, +got:\n%s", ns, diff)
		}
	}
	_, errs := Load(owner, xr(), input(map[string]any{"podIdentity": map[string]any{"namespace": "gitops"}, "flux": map[string]any{"namespace": "gitops"}}))
	if diff := cmp.Diff([]errorID{{field.ErrorTypeInvalid, "input.podIdentity.namespace"}}, ids(errs)); diff != "" {
		t.Errorf("podIdentity.namespace in the platform's own Flux namespace: -want, +got:\n%s", diff)
	}
}

// TestOwnerLabels checks that a claim whose name cannot label a node is
// refused: every node carries its claim's name.
func TestOwnerLabels(t *testing.T) {
	long := Owner{Namespace: "team-a", Name: strings.Repeat("k", 64)}
	_, errs := Load(long, xr(), input(nil))
	if diff := cmp.Diff([]errorID{{field.ErrorTypeInvalid, "metadata.name"}}, ids(errs)); diff != "" {
		t.Errorf("a 64-character claim name: -want, +got:\n%s", diff)
	}
	if _, errs := Load(Owner{Name: "platform-xr"}, xr(), input(nil)); len(errs) > 0 {
		t.Errorf("an XR without a claim: %v", errs)
	}
}

// TestPoolsAtTheClusterCeiling: pools adding up exactly to the cluster's
// ceiling pass, and a disabled public pool counts for nothing.
func TestPoolsAtTheClusterCeiling(t *testing.T) {
	for _, spec := range []map[string]any{
		xr(with("pools.private.limits", map[string]any{"cpu": "150", "memory": "600Gi"}),
			with("pools.public.limits", map[string]any{"cpu": "50", "memory": "200Gi"})),
		xr(with("pools.private.limits", map[string]any{"cpu": "200", "memory": "800Gi"}),
			with("pools.public.enabled", false)),
	} {
		if _, errs := Load(owner, spec, input(nil)); len(errs) > 0 {
			t.Errorf("pools at the cluster's ceiling refused: %v", errs)
		}
	}
}
