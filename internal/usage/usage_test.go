package usage

import (
	"slices"
	"testing"

	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"

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
		out, err := Usages(refs, observed, nil)
		if err != nil {
			t.Fatal(err)
		}
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
