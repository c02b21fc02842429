package config

import (
	"strings"
	"testing"
)

// TestVersions checks the platform's choice of Karpenter versions and how a
// claim's version is judged against it.
func TestVersions(t *testing.T) {
	cases := map[string]struct {
		reason string
		spec   map[string]any
		input  map[string]any
		// version is what the claim gets; err what a refusal says.
		version, err string
	}{
		"PlatformDefault": {
			reason:  "A claim naming no version gets the platform's default.",
			spec:    xr(with("version", nil)),
			input:   map[string]any{"versions": map[string]any{"default": "1.14.1"}},
			version: "1.14.1",
		},
		"NamedVersionKept": {
			reason:  "A version the claim names is kept, whatever the default.",
			spec:    xr(with("version", "1.14.1")),
			input:   map[string]any{"versions": map[string]any{"default": "1.15.0"}},
			version: "1.14.1",
		},
		"NotAllowed": {
			reason: "A version the platform does not allow is refused at spec.version, naming what it allows.",
			spec:   xr(with("version", "1.15.0")),
			input:  map[string]any{"versions": map[string]any{"allowed": []any{"1.14.1"}, "default": "1.14.1"}},
			err:    `spec.version: Unsupported value: "1.15.0": supported values: "1.14.1"`,
		},
		"UnknownAllowed": {
			reason: "The platform cannot allow a version the function does not know.",
			input:  map[string]any{"versions": map[string]any{"allowed": []any{"1.15.0", "1.16.0"}}},
			err:    `input.versions.allowed[1]: Unsupported value: "1.16.0"`,
		},
		"DefaultNotAllowed": {
			reason: "The default must be one the platform allows.",
			input:  map[string]any{"versions": map[string]any{"allowed": []any{"1.14.1"}, "default": "1.15.0"}},
			err:    `input.versions.default: Invalid value: "1.15.0": is not among the allowed versions 1.14.1`,
		},
		"UnknownGate": {
			reason: "A feature gate no version knows is refused, not passed to the chart.",
			input:  map[string]any{"controller": map[string]any{"awsFeatureGates": []any{"NodeRepair", "TeleportNodes"}}},
			err:    `input.controller.awsFeatureGates[1]: Unsupported value: "TeleportNodes"`,
		},
		"ClusterDefault": {
			reason:  "A cluster's own default version wins over the platform's for its claims that name none: a fleet upgrades in waves.",
			input:   map[string]any{"tenancy": tenancyWith("defaultVersion", "1.14.3")},
			version: "1.14.3",
		},
		"ClusterDefaultNotAllowed": {
			reason: "A cluster's default must be one the platform allows.",
			input:  map[string]any{"versions": map[string]any{"allowed": []any{"1.15.0", "1.15.2"}}, "tenancy": tenancyWith("defaultVersion", "1.14.3")},
			err:    `input.tenancy.clusters[1].defaultVersion: Unsupported value: "1.14.3"`,
		},
		"RebootWithoutRepair": {
			reason: "RebootForRepair has no effect without node repair (Karpenter's chart): enabling it alone would grant ec2:RebootInstances for nothing.",
			input:  map[string]any{"controller": map[string]any{"featureGates": []any{"RebootForRepair"}}},
			err:    `input.controller.featureGates[0]: Invalid value: "RebootForRepair": does nothing without NodeRepair`,
		},
		"RebootWithRepairUnderTheFormerName": {
			reason:  "awsFeatureGates, featureGates' former name, is still read and merged: NodeRepair there satisfies RebootForRepair here.",
			input:   map[string]any{"controller": map[string]any{"featureGates": []any{"RebootForRepair"}, "awsFeatureGates": []any{"NodeRepair"}}},
			version: "1.15.2",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := tc.spec
			if spec == nil {
				spec = xr()
			}
			c, errs := Load(owner, spec, input(tc.input))
			if tc.err != "" {
				if !strings.Contains(errs.ToAggregate().Error(), tc.err) {
					t.Errorf("\n%s\nLoad(...) errors %v, want one saying %s", tc.reason, errs, tc.err)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatalf("\n%s\nLoad(...): unexpected errors: %v", tc.reason, errs)
			}
			if string(c.Spec.Version) != tc.version {
				t.Errorf("\n%s\nLoad(...): version %s, want %s", tc.reason, c.Spec.Version, tc.version)
			}
			if named, _ := spec["version"].(string); c.VersionDefaulted != (named == "") {
				t.Errorf("\n%s\nLoad(...): VersionDefaulted %v, the claim names %q", tc.reason, c.VersionDefaulted, named)
			}
		})
	}
}
