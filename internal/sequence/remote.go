package sequence

import (
	"fmt"

	xpv1 "github.com/crossplane/crossplane-runtime/v2/apis/common/v1"
	"github.com/crossplane/function-sdk-go/resource/composed"
)

// A Remote is what a provider-kubernetes Object last observed of its
// object in the claimed cluster.
type Remote struct {
	Kind string
	// Generation is the object's metadata.generation; ObservedGeneration
	// the one its own controller (Flux, say) last acted on, nil when that
	// controller reports none.
	Generation         int64
	ObservedGeneration *int64
	// Ready is its own Ready condition, as its controller wrote it, with
	// the generation it is of (ObservedGeneration, 0 when it says none:
	// generations start at 1).
	Ready xpv1.Condition
	// Spec is its spec as the claimed cluster returns it, defaults
	// included.
	Spec map[string]any
}

// RemoteOf reads what an Object observes; false when it observed nothing
// yet.
func RemoteOf(r *composed.Unstructured) (Remote, bool) {
	status, _ := r.Object["status"].(map[string]any)
	at, _ := status["atProvider"].(map[string]any)
	manifest, ok := at["manifest"].(map[string]any)
	if !ok {
		return Remote{}, false
	}
	var rm Remote
	rm.Kind, _ = manifest["kind"].(string)
	rm.Spec, _ = manifest["spec"].(map[string]any)
	meta, _ := manifest["metadata"].(map[string]any)
	rm.Generation, _ = integer(meta["generation"])
	rs, _ := manifest["status"].(map[string]any)
	if g, ok := integer(rs["observedGeneration"]); ok {
		rm.ObservedGeneration = &g
	}
	rm.Ready = conditionIn(rs, xpv1.TypeReady)
	return rm, true
}

// Behind says why the claimed cluster has not yet acted on the manifest
// desired of an Object, or "" when it has: the object there holds every
// field of the desired manifest's spec and, where its controller reports
// which generation it acted on (in its status, or on its Ready condition),
// that is the current one. An Object's own Ready says what its readiness
// policy says: for a Kustomization the same (cluster.Reconciled), for
// other objects only that the object there is Ready, which it may still be
// for a moment after a change, for the generation before it. A suspended
// Kustomization gets the new generation in its status without being acted
// on; only its Ready condition keeps the old one.
func Behind(desired, observed *composed.Unstructured) string {
	want, _ := desired.GetValue("spec.forProvider.manifest.spec")
	rm, ok := RemoteOf(observed)
	switch {
	case !ok:
		return "the claimed cluster reports nothing of it yet"
	case !holds(rm.Spec, want):
		return fmt.Sprintf("the claimed cluster's %s does not hold the change yet", rm.Kind)
	case rm.ObservedGeneration != nil && *rm.ObservedGeneration != rm.Generation:
		return fmt.Sprintf("the claimed cluster's %s is at generation %d, its controller acted on %d", rm.Kind, rm.Generation, *rm.ObservedGeneration)
	case rm.Ready.ObservedGeneration != 0 && rm.Ready.ObservedGeneration != rm.Generation:
		return fmt.Sprintf("the claimed cluster's %s is at generation %d, its Ready condition is of %d", rm.Kind, rm.Generation, rm.Ready.ObservedGeneration)
	}
	return ""
}

// holds tells whether got carries every field of want with its value;
// fields got has besides (the API server's defaults) do not matter, and an
// empty value wanted matches one left out.
func holds(got, want any) bool {
	switch w := want.(type) {
	case nil:
		return true
	case map[string]any:
		g, _ := got.(map[string]any)
		for k, v := range w {
			if !holds(g[k], v) {
				return false
			}
		}
		return true
	case []any:
		g, _ := got.([]any)
		if len(w) == 0 {
			return len(g) == 0
		}
		if len(g) != len(w) {
			return false
		}
		for i := range w {
			if !holds(g[i], w[i]) {
				return false
			}
		}
		return true
	}
	if got == nil {
		return want == "" || want == false || want == float64(0) || want == int64(0)
	}
	if wn, ok := number(want); ok {
		gn, ok := number(got)
		return ok && gn == wn
	}
	return got == want
}

// number reads a JSON number however it was decoded: int64 from the
// unstructured converter, float64 from a protobuf Struct.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

func integer(v any) (int64, bool) {
	n, ok := number(v)
	return int64(n), ok
}
