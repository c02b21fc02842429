package scope_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/google/go-cmp/cmp"
	events "github.com/upbound/provider-aws/v2/apis/namespaced/cloudwatchevents/v1beta1"
	eks "github.com/upbound/provider-aws/v2/apis/namespaced/eks/v1beta1"
	iam "github.com/upbound/provider-aws/v2/apis/namespaced/iam/v1beta1"
	sqs "github.com/upbound/provider-aws/v2/apis/namespaced/sqs/v1beta1"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/do-now/function-karpenter/internal/awsres"
	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/config/configtest"
	"github.com/do-now/function-karpenter/internal/scope"
)

// namespacedTypes are provider-aws' own Go types of the namespaced kinds.
// composed.From, which encodes them back as the SDK encodes composed
// resources, finds them in its scheme too.
var namespacedTypes = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{iam.AddToScheme, sqs.AddToScheme, events.AddToScheme, eks.AddToScheme} {
		utilruntime.Must(add(s))
		utilruntime.Must(add(composed.Scheme))
	}
	return s
}()

// TestNamespacedKindsKeepEveryField composes every managed resource of
// steps one and two for a namespaced XR and decodes it, refusing unknown
// fields, into provider-aws' Go type of the namespaced kind it names. Encoded
// back it must be what was composed: every field the builders set exists in
// the namespaced kind with the same shape, so the claim API's builders serve
// both APIs. A field whose shape differs between the scopes (Target's
// sqsTarget is an array in one, an object in the other) fails here.
func TestNamespacedKindsKeepEveryField(t *testing.T) {
	in, err := structpb.NewStruct(configtest.Pinned(map[string]any{
		"tags":                   map[string]any{"cost-center": "platform"},
		"permissionsBoundaryArn": "arn:aws:iam::111122223333:policy/socle-boundary",
		"tenancy": map[string]any{"clusters": []any{
			map[string]any{"name": "prod-eu", "account": "111122223333", "namespaces": []any{"team-a"}, "region": "eu-west-3",
				"nodeIdentity": map[string]any{"roleArn": "arn:aws:iam::111122223333:role/nodes", "instanceProfile": "nodes"}},
		}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	c, errs := config.Load(config.Owner{Namespace: "team-a", Name: "karpenter"}, map[string]any{
		"cluster":      map[string]any{"name": "prod-eu", "region": "eu-west-3"},
		"nodeIdentity": map[string]any{"roleArn": "arn:aws:iam::111122223333:role/nodes", "instanceProfile": "nodes"},
	}, in)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	built, err := awsres.Identity(c)
	if err != nil {
		t.Fatal(err)
	}
	for n, o := range awsres.Wiring(c, awsres.Observed{}) {
		built[n] = o
	}
	// Two roles and their policies, the queue, the observed cluster, five
	// rules; the queue policy, two Pod Identity associations, five targets.
	if len(built) != 19 {
		t.Fatalf("steps one and two built %d managed resources, want 19", len(built))
	}
	for name, o := range built {
		cd, err := scope.Namespaced.Compose(o, "team-a")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !strings.Contains(cd.GetAPIVersion(), ".aws.m.upbound.io/") || cd.GetNamespace() != "team-a" {
			t.Errorf("%s composed as %s in namespace %q, want a namespaced kind in team-a", name, cd.GetAPIVersion(), cd.GetNamespace())
		}
		typed, err := namespacedTypes.New(cd.GroupVersionKind())
		if err != nil {
			t.Fatalf("%s: provider-aws has no namespaced type %s: %v", name, cd.GroupVersionKind(), err)
		}
		b, err := json.Marshal(cd.Object)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(typed); err != nil {
			t.Errorf("%s does not decode as provider-aws' %s: %v", name, cd.GroupVersionKind(), err)
			continue
		}
		back, err := composed.From(typed)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(cd.Object, back.Object); diff != "" {
			t.Errorf("%s changed through provider-aws' namespaced %s (-composed +decoded):\n%s", name, cd.GetKind(), diff)
		}
		ref, _ := cd.Object["spec"].(map[string]any)["providerConfigRef"].(map[string]any)
		if want := map[string]any{"kind": "ClusterProviderConfig", "name": "default"}; !cmp.Equal(ref, want) {
			t.Errorf("%s's providerConfigRef is %v, want %v", name, ref, want)
		}
	}
}

// TestOf knows the XRs of both APIs and refuses any other.
func TestOf(t *testing.T) {
	for _, tc := range []struct {
		apiVersion, kind string
		want             string
	}{
		{"platform.socle.do-now.io/v1alpha1", "XKarpenter", "claim"},
		{"platform.m.socle.do-now.io/v1alpha1", "Karpenter", "namespaced XR"},
	} {
		a, err := scope.Of(tc.apiVersion, tc.kind)
		if err != nil || a.Name != tc.want {
			t.Errorf("Of(%s, %s) = %q, %v; want the %s API", tc.apiVersion, tc.kind, a.Name, err, tc.want)
		}
	}
	for _, tc := range [][2]string{
		{"platform.socle.do-now.io/v1alpha1", "Karpenter"}, // the claim itself is never composed
		{"platform.m.socle.do-now.io/v1alpha1", "XKarpenter"},
		{"platform.socle.do-now.io/v1beta1", "XKarpenter"},
	} {
		if a, err := scope.Of(tc[0], tc[1]); err == nil {
			t.Errorf("Of(%s, %s) = the %s API, want an error", tc[0], tc[1], a.Name)
		}
	}
	if _, err := scope.Read(map[string]any{"apiVersion": "platform.m.socle.do-now.io/v1alpha1", "kind": "Karpenter",
		"metadata": map[string]any{"name": "karpenter"}}); err == nil {
		t.Error("a namespaced XR without a namespace was read; want an error")
	}
}

// TestEveryBuiltKindComposed: each API composes every kind the builders
// make, under its own apiVersion, and names its CRD as the providers'
// packages do.
func TestEveryBuiltKindComposed(t *testing.T) {
	for _, a := range scope.APIs {
		for _, k := range scope.Built {
			if _, err := a.GroupVersion(k.APIVersion); err != nil {
				t.Errorf("%s: %v", a.Name, err)
			}
		}
	}
	got := scope.Namespaced.Kinds()[0].CRDFile()
	if got != "iam.aws.m.upbound.io_roles.yaml" {
		t.Errorf("the namespaced Role's CRD file is %q", got)
	}
}

// TestAppliesManifest holds the management policy sets crossplane-runtime
// v2.4.0 supports (pkg/reconciler/managed/policies.go) against whether the
// Object writes its manifest: the tests validate what is written, and the
// e2e fake creates only that.
func TestAppliesManifest(t *testing.T) {
	for _, tc := range []struct {
		policies []string
		want     bool
	}{
		{nil, true}, // unset: ["*"]
		{[]string{"*"}, true},
		{[]string{"Observe", "Create", "Update", "LateInitialize", "Delete"}, true},
		{[]string{"Observe", "Update"}, true},
		{[]string{"Observe"}, false},
		{[]string{"Observe", "Delete"}, false},
		{[]string{}, false}, // paused
	} {
		if got := scope.AppliesManifest(tc.policies); got != tc.want {
			t.Errorf("AppliesManifest(%q) = %v, want %v", tc.policies, got, tc.want)
		}
	}
}
