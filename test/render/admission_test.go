//go:build render

package render

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// TestXRDRefusesBadClaims validates XRs against the generated XRDs the way
// the API server does at admission (patterns, enums, bounds, CEL rules):
// each case is an example XR with one mistake, and the report must name
// the field. The examples themselves must pass. Both XRDs are generated from
// the same types, and both are held to every case. CEL transition rules
// (immutability) need an old object and are proven end to end instead.
func TestXRDRefusesBadClaims(t *testing.T) {
	root, tmp := repoRoot(t), t.TempDir()
	extensions := extensionsDir(t, root, tmp)
	for _, e := range examples {
		t.Run(e.name, func(t *testing.T) { refusesBadXRs(t, root, tmp, extensions, e) })
	}
}

func refusesBadXRs(t *testing.T, root, tmp, extensions string, e example) {
	b, err := os.ReadFile(filepath.Join(root, e.xr))
	if err != nil {
		t.Fatal(err)
	}
	var example map[string]any
	if err := yaml.Unmarshal(b, &example); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name  string
		path  string
		value any
		want  string // in the report; empty: valid
	}{
		{name: "the example"},
		{name: "cluster name with a quote", path: "cluster.name", value: `prod"eu`, want: "spec.cluster.name in body should match"},
		{name: "cluster name with a wildcard", path: "cluster.name", value: "prod-*", want: "spec.cluster.name in body should match"},
		{name: "cluster name too long for the rule names", path: "cluster.name", value: strings.Repeat("c", 45), want: "spec.cluster.name: Too long"},
		{name: "region in capitals", path: "cluster.region", value: "EU-WEST-3", want: "spec.cluster.region in body should match"},
		{name: "role ARN of another service", path: "nodeIdentity.roleArn", value: "arn:aws:s3:::bucket", want: "spec.nodeIdentity.roleArn in body should match"},
		{name: "instance profile with a space", path: "nodeIdentity.instanceProfile", value: "my profile", want: "spec.nodeIdentity.instanceProfile in body should match"},
		{name: "unknown version", path: "version", value: "0.37.0", want: `spec.version: Unsupported value: "0.37.0"`},
		{name: "unknown capacity type", path: "pools.private.capacityTypes", value: []any{"spot", "dedicated"}, want: `spec.pools.private.capacityTypes[1]: Unsupported value: "dedicated"`},
		{name: "empty architectures", path: "pools.public.architectures", value: []any{}, want: "spec.pools.public.architectures: Invalid value: 0: spec.pools.public.architectures in body should have at least 1 items"},
		{name: "cluster name starting with a dash", path: "cluster.name", value: "-prod", want: "spec.cluster.name in body should match"},
		{name: "negative CPU limit", path: "pools.private.limits", value: map[string]any{"cpu": "-4", "memory": "16Gi"}, want: "spec.pools.private.limits.cpu: Invalid value: \"-4\": must be a quantity above 0 and at most 10000"},
		{name: "memory limit over bound", path: "pools.public.limits", value: map[string]any{"cpu": "4", "memory": "41Ti"}, want: "spec.pools.public.limits.memory: Invalid value: \"41Ti\": must be a quantity above 0 and at most 40Ti"},
		{name: "generation zero", path: "pools.private.minGeneration", value: int64(0), want: "spec.pools.private.minGeneration in body should be greater than or equal to 1"},
		{name: "consolidation delay not a duration", path: "pools.private.consolidateAfter", value: "soon", want: "spec.pools.private.consolidateAfter in body should match"},
		{name: "AMI that is not AL2023", path: "pools.private.amiAlias", value: "bottlerocket@latest", want: "spec.pools.private.amiAlias in body should match"},
		{name: "zone ID instead of a zone name", path: "pools.public.zones", value: []any{"euw3-az1"}, want: "spec.pools.public.zones[0] in body should match"},
		{name: "public pool enabled as a string", path: "pools.public.enabled", value: "yes", want: "spec.pools.public.enabled in body must be of type boolean"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			xr := runtime.DeepCopyJSON(example)
			if c.path != "" {
				if err := unstructured.SetNestedField(xr, c.value, append([]string{"spec"}, strings.Split(c.path, ".")...)...); err != nil {
					t.Fatal(err)
				}
			}
			out, err := yaml.Marshal(xr)
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(tmp, fmt.Sprintf("%s-xr-%d.yaml", e.name, i))
			if err := os.WriteFile(file, out, 0o644); err != nil {
				t.Fatal(err)
			}
			report, ok := validate(t, extensions, file)
			if c.want == "" {
				if !ok {
					t.Errorf("want the example valid, crossplane beta validate:\n%s", report)
				}
				return
			}
			if ok || !strings.Contains(report, c.want) {
				t.Errorf("want a failure reporting\n  %s\ncrossplane beta validate:\n%s", c.want, report)
			}
		})
	}
}
