package tenancy

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/crossplane/function-sdk-go/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/do-now/function-karpenter/internal/scope"
)

// Labels Crossplane sets on what a claim's XR composes, from the XR's
// labels, which its claim's syncer sets with spec.claimRef when it creates
// or binds the XR (Crossplane v2.4.2 internal/controller/apiextensions/
// composite/composition_render.go, RenderComposedResourceMetadata;
// claim/syncer_ssa.go, Sync).
const (
	claimNameLabel      = "crossplane.io/claim-name"
	claimNamespaceLabel = "crossplane.io/claim-namespace"
)

// Own keeps, of what Crossplane observed for xr, what xr controls (see
// scope.XR.Controls), and names the rest. Crossplane never deletes an
// observed object without a controller reference, nor one another XR
// controls (composition_functions.go, GarbageCollectComposedResources), so
// leaving the rest out of the answer deletes nothing: Crossplane only drops
// it from the XR's resource references.
func Own(xr scope.XR, observed map[resource.Name]resource.ObservedComposed) (own map[resource.Name]resource.ObservedComposed, foreign []string) {
	own = make(map[resource.Name]resource.ObservedComposed, len(observed))
	for n, o := range observed {
		if o.Resource != nil && xr.Controls(o.Resource) {
			own[n] = o
			continue
		}
		foreign = append(foreign, string(n))
	}
	sort.Strings(foreign)
	return own, foreign
}

// Bound refuses a claim's XR that Crossplane did not create for that
// claim. Crossplane binds a claim whose spec.resourceRef names an XR with
// no claim yet (claim/reconciler.go: "A claim might be able to delete an XR
// it's not bound to"), and deleting the claim then deletes that XR and
// everything it composed. An XR Crossplane created for a claim is named
// after it (generatedFor) and carried the claim's labels before it composed
// anything, so everything it composed carries them too. An XR bound later
// fails one or the other, unless it is named like a claim's XR and has
// composed nothing: then it holds nothing to lose. own is what the XR
// controls (Own).
func Bound(xr map[string]any, api scope.API, own map[resource.Name]resource.ObservedComposed) *field.Error {
	if !api.Claims {
		return nil
	}
	ref, ok, _ := unstructured.NestedStringMap(xr, "spec", "claimRef")
	if !ok {
		return nil // the platform's own XR
	}
	claim := ref["namespace"] + "/" + ref["name"]
	refuse := func(why string) *field.Error {
		return field.Forbidden(field.NewPath("spec", "claimRef"), fmt.Sprintf(
			"this XR was not created for claim %s (%s): a claim binds only the XR Crossplane creates for it; remove the claim's spec.resourceRef and create it again", claim, why))
	}
	u := unstructured.Unstructured{Object: xr}
	if !generatedFor(u.GetName(), ref["name"]) {
		return refuse("its name was not generated from the claim's")
	}
	for _, n := range slices.Sorted(maps.Keys(own)) {
		o := own[n].Resource
		if o.GetDeletionTimestamp() != nil {
			continue
		}
		if l := o.GetLabels(); l[claimNameLabel] != ref["name"] || l[claimNamespaceLabel] != ref["namespace"] {
			return refuse(fmt.Sprintf("it composed %s before the claim was bound", n))
		}
	}
	return nil
}

// generatedFor tells whether name is one Crossplane generates for the XR
// of a claim named claim: the claim's name and "-" (claim/syncer_ssa.go,
// SetGenerateName, kept only until the next sync applies the XR by name),
// cut to 58 characters, then five characters of the API server's name
// generator's alphabet (k8s.io/apiserver v0.35 pkg/storage/names,
// SimpleNameGenerator; k8s.io/apimachinery pkg/util/rand, alphanums).
func generatedFor(name, claim string) bool {
	const maxBase, random, alphanums = 58, 5, "bcdfghjklmnpqrstvwxz2456789"
	base := claim + "-"
	if len(base) > maxBase {
		base = base[:maxBase]
	}
	suffix, ok := strings.CutPrefix(name, base)
	return ok && len(suffix) == random && strings.Trim(suffix, alphanums) == ""
}
