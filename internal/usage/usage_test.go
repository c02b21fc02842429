package usage

import (
	"slices"
	"testing"

	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/google/go-cmp/cmp"

	"github.com/do-now/function-karpenter/internal/awsres"
	"github.com/do-now/function-karpenter/internal/cluster"
	"github.com/do-now/function-karpenter/internal/flux"
	"github.com/do-now/function-karpenter/internal/sequence"
)

// TestRetiredUsagesLeaveOnceReplaced: an installation from before the final
// check holds the controller's Usage of its Role. It is kept while the
// Usage that replaces it (the final check's) does not exist yet, and let go
// once that one exists; a new installation never gets it.
func TestRetiredUsagesLeaveOnceReplaced(t *testing.T) {
	retired := Name(Edge{By: flux.ControllerKustomization, Of: awsres.ControllerRole})
	replacement := Name(Edge{By: cluster.FinalCheck, Of: awsres.ControllerRole})
	refs := map[resource.Name]sequence.Ref{}
	observed := map[resource.Name]resource.ObservedComposed{}
	for _, n := range []resource.Name{flux.ControllerKustomization, awsres.ControllerRole, cluster.FinalCheck} {
		refs[n] = sequence.Ref{APIVersion: "example.org/v1", Kind: "Thing"}
		observed[n] = resource.ObservedComposed{Resource: composed.New()}
	}
	composes := func() []resource.Name {
		out := Usages(refs, observed, nil)
		var names []resource.Name
		for n := range out {
			names = append(names, n)
		}
		return names
	}

	if got := composes(); slices.Contains(got, retired) || !slices.Contains(got, replacement) {
		t.Errorf("a new installation composes %v: want %s, never %s", got, replacement, retired)
	}
	observed[retired] = resource.ObservedComposed{Resource: composed.New()}
	if got := composes(); !slices.Contains(got, retired) || !slices.Contains(got, replacement) {
		t.Errorf("before its replacement exists, composes %v: want %s kept and %s added", got, retired, replacement)
	}
	observed[replacement] = resource.ObservedComposed{Resource: composed.New()}
	if got := composes(); slices.Contains(got, retired) || !slices.Contains(got, replacement) {
		t.Errorf("once its replacement exists, composes %v: want %s gone, %s kept", got, retired, replacement)
	}
}

// TestUsagesNameTheirEnds: a Usage names the objects at its ends by the
// names they were observed with, so Crossplane's Usage controller has no
// selector to resolve; once an end is gone, the existing Usage keeps the name
// it had, and an end never named keeps its selector.
func TestUsagesNameTheirEnds(t *testing.T) {
	edge := Edge{By: cluster.FinalCheck, Of: cluster.Namespace}
	name := Name(edge)
	refs := map[resource.Name]sequence.Ref{
		cluster.FinalCheck: {APIVersion: "kubernetes.crossplane.io/v1alpha2", Kind: "Object", Namespace: "team-a"},
		cluster.Namespace:  {APIVersion: "kubernetes.crossplane.io/v1alpha2", Kind: "Object", Namespace: "team-b"},
	}
	observedAs := func(n string) resource.ObservedComposed {
		u := composed.New()
		u.SetName(n)
		return resource.ObservedComposed{Resource: u}
	}
	spec := func(observed map[resource.Name]resource.ObservedComposed) map[string]any {
		t.Helper()
		out := Usages(refs, observed, nil)
		u, ok := out[name]
		if !ok {
			t.Fatalf("no %s composed", name)
		}
		if u.Resource.GetKind() != "Usage" || u.Resource.GetNamespace() != "team-a" {
			t.Errorf("got a %s in %q, want a Usage in its user's namespace team-a", u.Resource.GetKind(), u.Resource.GetNamespace())
		}
		return u.Resource.Object["spec"].(map[string]any)
	}
	end := func(ref map[string]any) map[string]any {
		return map[string]any{"apiVersion": "kubernetes.crossplane.io/v1alpha2", "kind": "Object", "resourceRef": ref}
	}

	observed := map[resource.Name]resource.ObservedComposed{
		cluster.FinalCheck: observedAs("xr-final-check"),
		cluster.Namespace:  observedAs("xr-namespace"),
	}
	named := map[string]any{
		"by":             end(map[string]any{"name": "xr-final-check"}),
		"of":             end(map[string]any{"name": "xr-namespace", "namespace": "team-b"}),
		"replayDeletion": true,
	}
	if diff := cmp.Diff(named, spec(observed)); diff != "" {
		t.Errorf("both ends observed (-want +got):\n%s", diff)
	}

	// The namespace's Object is gone; the Usage, as composed before, stays.
	existing := composed.New()
	existing.Object["spec"] = named
	observed[name] = resource.ObservedComposed{Resource: existing}
	delete(observed, cluster.Namespace)
	if diff := cmp.Diff(named, spec(observed)); diff != "" {
		t.Errorf("an end gone (-want +got):\n%s", diff)
	}

	// A Usage from before, with a selector Crossplane never resolved.
	existing.Object["spec"] = map[string]any{}
	want := map[string]any{
		"by": named["by"],
		"of": map[string]any{"apiVersion": "kubernetes.crossplane.io/v1alpha2", "kind": "Object", "resourceSelector": map[string]any{
			"matchControllerRef": true,
			"matchLabels":        map[string]any{sequence.ResourceLabel: string(cluster.Namespace)},
			"namespace":          "team-b",
		}},
		"replayDeletion": true,
	}
	if diff := cmp.Diff(want, spec(observed)); diff != "" {
		t.Errorf("an end gone and never named (-want +got):\n%s", diff)
	}
}
