package flux

import (
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"google.golang.org/protobuf/types/known/structpb"
	"sigs.k8s.io/yaml"

	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/config/configtest"
	"github.com/do-now/function-karpenter/internal/versions"
)

// TestGracePeriodIsThePlatformsChoice: a NodePool carries no
// terminationGracePeriod unless the platform sets one (it would let drift
// and every expiry evict what a PodDisruptionBudget protects), and the patch
// then writes null, so a base's own value does not survive; when the
// platform sets one, platform-wide or for the cluster, every NodePool
// carries it. The nodes Kustomization's timeout is Flux's, whatever the
// grace period: the uninstall does not rest on it.
func TestGracePeriodIsThePlatformsChoice(t *testing.T) {
	for _, tc := range []struct {
		grace      string
		perCluster bool
		want       *string
	}{
		{grace: "", want: nil},
		{grace: "2h", want: ptr("2h")},
		{grace: "23h59m59s", perCluster: true, want: ptr("23h59m59s")},
	} {
		c := load(t, tc.grace, "10m", tc.perCluster)
		v, _ := versions.Get("1.15.0")
		k, err := NodesManifest(c, v)
		if err != nil {
			t.Fatal(err)
		}
		if k.Spec.Timeout == nil || k.Spec.Timeout.Duration != 10*time.Minute {
			t.Errorf("grace %q: nodes Kustomization timeout %v, want flux.timeout (10m)", tc.grace, k.Spec.Timeout)
		}
		if k.Spec.DeletionPolicy != kustomizev1.DeletionPolicyWaitForTermination {
			t.Errorf("deletionPolicy %q, want WaitForTermination", k.Spec.DeletionPolicy)
		}
		pools := 0
		for _, p := range k.Spec.Patches {
			var np map[string]any
			if err := yaml.Unmarshal([]byte(p.Patch), &np); err != nil {
				t.Fatal(err)
			}
			if np["kind"] != "NodePool" {
				continue
			}
			pools++
			spec := np["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			got, written := spec["terminationGracePeriod"]
			switch {
			case !written:
				t.Errorf("grace %q: the patch does not write terminationGracePeriod, so a base's value would survive", tc.grace)
			case tc.want == nil && got != nil:
				t.Errorf("no grace period set: the NodePool carries %v, want null", got)
			case tc.want != nil && got != *tc.want:
				t.Errorf("grace %q (per cluster %v): the NodePool carries %v", tc.grace, tc.perCluster, got)
			}
		}
		if pools != 2 {
			t.Fatalf("want the two NodePools in the patches, got %d", pools)
		}
	}
}

func ptr(s string) *string { return &s }

func load(t *testing.T, grace, fluxTimeout string, perCluster bool) *config.Config {
	t.Helper()
	pools := map[string]any{"defaults": map[string]any{}}
	if grace != "" {
		pools["defaults"] = map[string]any{"terminationGracePeriod": grace}
	}
	cluster := map[string]any{"name": "prod-eu", "account": "111122223333", "region": "eu-west-3",
		"nodeIdentity": map[string]any{"roleArn": "arn:aws:iam::111122223333:role/nodes", "instanceProfile": "nodes"}}
	in := map[string]any{"flux": map[string]any{"timeout": fluxTimeout}, "tenancy": map[string]any{"clusters": []any{cluster}}}
	if perCluster {
		cluster["pools"] = pools
		in["pools"] = map[string]any{"defaults": map[string]any{"terminationGracePeriod": "5m"}}
	} else {
		in["pools"] = pools
	}
	s, err := structpb.NewStruct(configtest.Pinned(in))
	if err != nil {
		t.Fatal(err)
	}
	c, errs := config.Load(config.Owner{Name: "platform"}, map[string]any{
		"cluster":      map[string]any{"name": "prod-eu", "region": "eu-west-3"},
		"nodeIdentity": map[string]any{"roleArn": "arn:aws:iam::111122223333:role/nodes", "instanceProfile": "nodes"},
	}, s)
	if len(errs) > 0 {
		t.Fatalf("grace %s: %v", grace, errs)
	}
	return c
}
