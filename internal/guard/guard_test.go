package guard

import (
	"strings"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/do-now/function-karpenter/apis/v1alpha1"
	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/config/configtest"
)

const key = "socle.do-now.io/delete-with-nodes"

func load(t *testing.T, guarded bool) *config.Config {
	t.Helper()
	input := map[string]any{"tenancy": map[string]any{"clusters": []any{map[string]any{
		"name": "prod-eu", "account": "111122223333", "region": "eu-west-3", "namespaces": []any{"team-a"},
		"nodeIdentity": map[string]any{"roleArn": "arn:aws:iam::111122223333:role/nodes", "instanceProfile": "nodes"}}}}}
	if guarded {
		input["deletionGuard"] = map[string]any{"annotation": key}
	}
	in, err := structpb.NewStruct(configtest.Pinned(input))
	if err != nil {
		t.Fatal(err)
	}
	c, errs := config.Load(config.Owner{Name: "team-a"}, map[string]any{"cluster": map[string]any{"name": "prod-eu"}}, in)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return c
}

// claimXR is a claim's XR, bound to claim karpenter of team-a.
func claimXR(annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "platform.socle.do-now.io/v1alpha1", "kind": "XKarpenter",
		"metadata": map[string]any{"name": "karpenter-x7k2p"},
		"spec": map[string]any{"claimRef": map[string]any{"apiVersion": "platform.socle.do-now.io/v1alpha1",
			"kind": "Karpenter", "name": "karpenter", "namespace": "team-a"}}}}
	u.SetAnnotations(annotations)
	return u
}

func nodes(n ...int64) map[string]v1alpha1.PoolStatus {
	out := map[string]v1alpha1.PoolStatus{}
	for i, v := range n {
		out[[]string{"private", "public"}[i]] = v1alpha1.PoolStatus{Nodes: &v}
	}
	return out
}

// answered is a request whose ClaimRequirement Crossplane answered with a
// claim carrying annotations.
func answered(t *testing.T, annotations map[string]any) *fnv1.RunFunctionRequest {
	t.Helper()
	claim, err := structpb.NewStruct(map[string]any{"apiVersion": "platform.socle.do-now.io/v1alpha1", "kind": "Karpenter",
		"metadata": map[string]any{"name": "karpenter", "namespace": "team-a", "annotations": annotations}})
	if err != nil {
		t.Fatal(err)
	}
	return &fnv1.RunFunctionRequest{RequiredResources: map[string]*fnv1.Resources{ClaimRequirement: {Items: []*fnv1.Resource{{Resource: claim}}}}}
}

// TestGuardWhileNodesRun: with the platform's guard, a claim's XR whose
// pools report nodes is protected by a ClusterUsage of itself, whose reason
// says what it protects and how to confirm; a namespaced XR by a Usage in
// its namespace. No guard without nodes, without the platform's input, or
// once confirmed.
func TestGuardWhileNodesRun(t *testing.T) {
	guarded, off := load(t, true), load(t, false)
	xr := claimXR(nil)
	g := Usage(guarded, xr, nodes(2, 1), nil, false, map[string]string{"l": "v"})
	if g == nil {
		t.Fatal("no guard while the pools report 3 nodes")
	}
	u := g.Resource
	of, _, _ := unstructured.NestedStringMap(u.Object, "spec", "of", "resourceRef")
	reason, _, _ := unstructured.NestedString(u.Object, "spec", "reason")
	replay, _, _ := unstructured.NestedBool(u.Object, "spec", "replayDeletion")
	if u.GetKind() != "ClusterUsage" || u.GetNamespace() != "" || of["name"] != "karpenter-x7k2p" || !replay || u.GetLabels()["l"] != "v" {
		t.Errorf("guard of a claim's XR: %v", u.Object)
	}
	for _, want := range []string{"cluster prod-eu", "3 nodes (private 2, public 1)", "this Karpenter", "annotate the Karpenter " + key + "=prod-eu"} {
		if !strings.Contains(reason, want) {
			t.Errorf("reason %q does not say %q", reason, want)
		}
	}

	nsXR := claimXR(nil)
	unstructured.RemoveNestedField(nsXR.Object, "spec", "claimRef")
	nsXR.SetNamespace("team-a")
	nsXR.SetKind("Karpenter")
	g = Usage(guarded, nsXR, nodes(1, 0), nil, false, nil)
	if g == nil || g.Resource.GetKind() != "Usage" || g.Resource.GetNamespace() != "team-a" {
		t.Fatalf("guard of a namespaced XR: %v", g)
	}
	// Its own namespace named in "of" would make the API server refuse it
	// as cross-namespace, without "by".
	if ref, _, _ := unstructured.NestedStringMap(g.Resource.Object, "spec", "of", "resourceRef"); ref["namespace"] != "" || ref["name"] != "karpenter-x7k2p" {
		t.Errorf("a namespaced XR's guard protects %v, want its name alone", ref)
	}

	for name, got := range map[string]*resource.DesiredComposed{
		"no node":           Usage(guarded, xr, nodes(0, 0), nil, false, nil),
		"nothing observed":  Usage(guarded, xr, nil, nil, false, nil),
		"no platform guard": Usage(off, xr, nodes(2, 1), nil, false, nil),
		"confirmed":         Usage(guarded, xr, nodes(2, 1), nil, true, nil),
	} {
		if got != nil {
			t.Errorf("%s: a guard %v", name, got.Resource.Object)
		}
	}
	// An existing guard stays while the pools' nodes are not observed.
	exists := map[resource.Name]resource.ObservedComposed{Name: {Resource: composed.New()}}
	if g := Usage(guarded, xr, nil, exists, false, nil); g == nil || !strings.Contains(g.Resource.Object["spec"].(map[string]any)["reason"].(string), "not observed") {
		t.Errorf("an existing guard with no pool observed: %v, want it kept", g)
	}
	if g := Usage(guarded, xr, nodes(0, 0), exists, false, nil); g != nil {
		t.Error("an existing guard once the pools report no node: want it dropped")
	}
}

// TestConfirmed: the platform's key set to the cluster's name confirms, on
// the XR or on the claim Crossplane answered for; another value, another
// key, or no platform guard does not.
func TestConfirmed(t *testing.T) {
	guarded, off := load(t, true), load(t, false)
	none := &fnv1.RunFunctionRequest{}
	for _, tc := range []struct {
		name string
		c    *config.Config
		xr   map[string]string
		req  *fnv1.RunFunctionRequest
		want bool
	}{
		{"the XR's annotation", guarded, map[string]string{key: "prod-eu"}, none, true},
		{"the claim's annotation", guarded, nil, answered(t, map[string]any{key: "prod-eu"}), true},
		{"another cluster's name", guarded, map[string]string{key: "prod-us"}, answered(t, map[string]any{key: "yes"}), false},
		{"another key", guarded, map[string]string{"delete": "prod-eu"}, none, false},
		{"no platform guard", off, map[string]string{key: "prod-eu"}, none, false},
	} {
		if got := Confirmed(tc.c, claimXR(tc.xr), tc.req); got != tc.want {
			t.Errorf("%s: confirmed %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestClaimSelector: the claim a legacy XR is bound to, by its claimRef,
// only when the platform guards; a namespaced XR has none.
func TestClaimSelector(t *testing.T) {
	sel, ok := ClaimSelector(load(t, true), claimXR(nil))
	if !ok || sel.GetKind() != "Karpenter" || sel.GetNamespace() != "team-a" || sel.GetMatchName() != "karpenter" || sel.GetApiVersion() != "platform.socle.do-now.io/v1alpha1" {
		t.Errorf("selector %v, %v", sel, ok)
	}
	if _, ok := ClaimSelector(load(t, false), claimXR(nil)); ok {
		t.Error("a selector without the platform's guard")
	}
	ns := claimXR(nil)
	unstructured.RemoveNestedField(ns.Object, "spec", "claimRef")
	if _, ok := ClaimSelector(load(t, true), ns); ok {
		t.Error("a selector for an XR without a claim")
	}
}
