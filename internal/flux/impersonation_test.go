package flux

import (
	"testing"

	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/config/configtest"
	"github.com/do-now/function-karpenter/internal/convert"
	"github.com/do-now/function-karpenter/internal/versions"
)

// TestKustomizationsImpersonate: every Kustomization the function puts in
// the claimed cluster applies as the ServiceAccount the platform names
// (kustomize-controller v1.7.0 api/v1 KustomizationSpec.ServiceAccountName,
// "the name of the Kubernetes service account to impersonate when
// reconciling this Kustomization"), as its Object carries it; with none
// named, none is set and kustomize-controller's own default holds.
func TestKustomizationsImpersonate(t *testing.T) {
	cases := map[string]struct {
		reason string
		flux   map[string]any
		want   any
	}{
		"Named": {
			reason: "The platform names the ServiceAccount: the controller's, the node pools' and the monitoring's Kustomizations all impersonate it.",
			flux:   map[string]any{"serviceAccountName": "karpenter-flux"},
			want:   "karpenter-flux",
		},
		"Unnamed": {
			reason: "Unnamed, the field is absent: kustomize-controller applies with its own identity or its --default-service-account.",
			flux:   map[string]any{},
			want:   nil,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in, err := structpb.NewStruct(configtest.Pinned(map[string]any{"flux": tc.flux, "tenancy": map[string]any{"clusters": []any{map[string]any{
				"name": "prod-eu", "account": "111122223333", "region": "eu-west-3",
				"nodeIdentity": map[string]any{"roleArn": "arn:aws:iam::111122223333:role/nodes", "instanceProfile": "nodes"},
			}}}}))
			if err != nil {
				t.Fatal(err)
			}
			c, errs := config.Load(config.Owner{Name: "platform"}, map[string]any{"cluster": map[string]any{"name": "prod-eu"}}, in)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			v, err := versions.Get(string(c.Spec.Version))
			if err != nil {
				t.Fatal(err)
			}
			objects := map[resource.Name]runtime.Object{}
			for _, build := range []func(*config.Config, versions.Version) (map[resource.Name]runtime.Object, error){Controller, Nodes, Monitoring} {
				objs, err := build(c, v)
				if err != nil {
					t.Fatal(err)
				}
				for n, o := range objs {
					objects[n] = o
				}
			}
			for _, n := range []resource.Name{ControllerKustomization, NodesKustomization, MonitoringKustomization} {
				o, ok := objects[n]
				if !ok {
					t.Fatalf("%s: not composed", n)
				}
				cd, err := convert.Composed(o)
				if err != nil {
					t.Fatal(err)
				}
				spec, err := cd.GetValue("spec.forProvider.manifest.spec")
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, spec.(map[string]any)["serviceAccountName"]); diff != "" {
					t.Errorf("\n%s\n%s: spec.serviceAccountName: -want, +got:\n%s", tc.reason, n, diff)
				}
			}
		})
	}
}
