package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestPinsRequired: what only the platform moves has no default a function
// release could move. A Composition with no input, or one that leaves a pin
// out, is refused at the pin's path.
func TestPinsRequired(t *testing.T) {
	all := []errorID{
		{field.ErrorTypeRequired, "input.nodes.defaultAmiAlias"},
		{field.ErrorTypeRequired, "input.versions.allowed"},
		{field.ErrorTypeRequired, "input.versions.default"},
		{field.ErrorTypeRequired, "input.nodes.startupTaints"},
	}
	if c, errs := Load(owner, xr(), nil); c != nil || !cmp.Equal(ids(errs), []errorID{all[0], all[3], all[1], all[2]}) {
		t.Errorf("no input: want %v and no config, got %v", all, errs)
	}
	testLoadInvalid(t, map[string]invalidCase{
		"NoDefaultVersion": {
			reason: "A claim naming no version would get whatever a function release knows newest.",
			spec:   xr(with("version", nil)),
			input:  input(map[string]any{"versions": map[string]any{"default": nil}}),
			want:   all[2:3],
		},
		"NoAllowedVersions": {
			reason: "Tenants would be offered every version a function release knows.",
			spec:   xr(),
			input:  input(map[string]any{"versions": map[string]any{"allowed": nil}}),
			want:   all[1:2],
		},
		"EmptyAllowedVersions": {
			reason: "An empty list allows nothing: refused as missing, not as allowing every version.",
			spec:   xr(),
			input:  input(map[string]any{"versions": map[string]any{"allowed": []any{}}}),
			want:   all[1:2],
		},
		"NoStartupTaints": {
			reason: "Taints nothing would lift, or none where the CNI needs them: a change drifts every node, so the platform names them.",
			spec:   xr(),
			input:  input(map[string]any{"nodes": map[string]any{"startupTaints": nil}}),
			want:   all[3:],
		},
		"NoAMIPin": {
			reason: "Pools that pin none would drift to whatever release a function release knows newest.",
			spec:   xr(),
			input:  input(map[string]any{"nodes": map[string]any{"defaultAmiAlias": nil}}),
			want:   all[:1],
		},
	})
}

// TestPinsNotTheNewest: a claim that names no version and pools that pin no
// AMI get the platform's pins, older than the newest the function knows.
func TestPinsNotTheNewest(t *testing.T) {
	c, errs := Load(owner, xr(with("version", nil)), input(map[string]any{
		"versions": map[string]any{"default": "1.14.3"},
		"nodes":    map[string]any{"defaultAmiAlias": "al2023@v20260505"},
	}))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if c.Spec.Version != "1.14.3" || c.Spec.Pools.Private.AMIAlias != "al2023@v20260505" || c.Spec.Pools.Public.AMIAlias != "al2023@v20260505" {
		t.Errorf("version %s, AMIs %s and %s; want the pins 1.14.3 and al2023@v20260505",
			c.Spec.Version, c.Spec.Pools.Private.AMIAlias, c.Spec.Pools.Public.AMIAlias)
	}
}
