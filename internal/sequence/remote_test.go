package sequence

import (
	"testing"

	"github.com/crossplane/function-sdk-go/resource/composed"
)

// TestBehind checks when the claimed cluster counts as having acted on
// what an Object desires: every desired field held (defaults besides do not
// matter, numbers compare whatever their Go type), and the generation its
// controller acted on the current one.
func TestBehind(t *testing.T) {
	object := func(spec map[string]any) *composed.Unstructured {
		u := composed.New()
		u.Object = map[string]any{"spec": map[string]any{"forProvider": map[string]any{"manifest": map[string]any{"spec": spec}}}}
		return u
	}
	observedAt := func(spec map[string]any, generation, observedGeneration, readyGeneration any) *composed.Unstructured {
		u := composed.New()
		status := map[string]any{}
		if observedGeneration != nil {
			status["observedGeneration"] = observedGeneration
		}
		if readyGeneration != nil {
			status["conditions"] = []any{map[string]any{"type": "Ready", "status": "True", "observedGeneration": readyGeneration}}
		}
		u.Object = map[string]any{"status": map[string]any{"atProvider": map[string]any{"manifest": map[string]any{
			"kind":     "Kustomization",
			"metadata": map[string]any{"generation": generation},
			"spec":     spec,
			"status":   status,
		}}}}
		return u
	}
	observed := func(spec map[string]any, generation, observedGeneration any) *composed.Unstructured {
		return observedAt(spec, generation, observedGeneration, observedGeneration)
	}
	desired := object(map[string]any{
		"interval":  "10m0s",
		"replicas":  int64(2),
		"postBuild": map[string]any{"substitute": map[string]any{"KARPENTER_VERSION": "1.15.0"}},
		"patches":   []any{map[string]any{"patch": "p", "target": map[string]any{"kind": "HelmRelease"}}},
		"dependsOn": []any{},
		"prune":     false,
	})
	held := map[string]any{
		"interval":  "10m0s",
		"replicas":  float64(2), // as a protobuf Struct decodes it
		"postBuild": map[string]any{"substitute": map[string]any{"KARPENTER_VERSION": "1.15.0"}},
		"patches":   []any{map[string]any{"patch": "p", "target": map[string]any{"kind": "HelmRelease", "group": "helm.toolkit.fluxcd.io"}}},
		"force":     false, // an API server default
	}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for kk, vv := range held {
			m[kk] = vv
		}
		m[k] = v
		return m
	}
	cases := map[string]struct {
		observed *composed.Unstructured
		behind   bool
	}{
		"HoldsItAtItsGeneration": {observed(held, int64(3), float64(3)), false},
		"NoObservedGeneration":   {observed(held, int64(3), nil), false},
		"OlderChart":             {observed(with("postBuild", map[string]any{"substitute": map[string]any{"KARPENTER_VERSION": "1.14.1"}}), int64(3), int64(3)), true},
		"PatchDiffers":           {observed(with("patches", []any{map[string]any{"patch": "old", "target": map[string]any{"kind": "HelmRelease"}}}), int64(3), int64(3)), true},
		"PatchMissing":           {observed(with("patches", []any{}), int64(3), int64(3)), true},
		"ReplicasDiffer":         {observed(with("replicas", float64(1)), int64(3), int64(3)), true},
		"GenerationBehind":       {observed(held, int64(4), int64(3)), true},
		// Suspended, changed: kustomize-controller v1.9.3 moves status.observedGeneration on
		// (finalizeStatus), but its Ready condition stays of the generation before.
		"SuspendedAfterAChange": {observedAt(held, int64(4), int64(4), int64(3)), true},
		"NothingObserved":       {composed.New(), true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			why := Behind(desired, tc.observed)
			if (why != "") != tc.behind {
				t.Errorf("Behind = %q, want behind %v", why, tc.behind)
			}
		})
	}
}
