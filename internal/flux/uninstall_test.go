package flux

import (
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"google.golang.org/protobuf/types/known/structpb"
	"sigs.k8s.io/yaml"

	"github.com/do-now/function-karpenter/internal/spec"
	"github.com/do-now/function-karpenter/internal/versions"
)

// TestUninstallOutwaitsTheGracePeriod holds the invariant that makes an
// uninstall strand no instance: for every termination grace period the
// platform can choose (every ten minutes up to the 24h bound, and odd
// seconds below it), set platform-wide or for the cluster, and whatever
// Flux timeout it sets, the nodes Kustomization waits for the NodePools'
// deletion at least the grace period every NodePool carries plus the
// margin for EC2 to terminate. spec's tests refuse a longer grace period.
func TestUninstallOutwaitsTheGracePeriod(t *testing.T) {
	var graces []string
	for m := 10; m <= 24*60; m += 10 {
		graces = append(graces, (time.Duration(m) * time.Minute).String())
	}
	graces = append(graces, "1s", "59s", "1m", "14m59s", "23h59m59s")
	checked := 0
	for _, grace := range graces {
		for _, fluxTimeout := range []string{"1m", "10m", "3h", "30h"} {
			for _, perCluster := range []bool{false, true} {
				c := load(t, grace, fluxTimeout, perCluster)
				v, _ := versions.Get("1.15.0")
				k, err := NodesManifest(c, v)
				if err != nil {
					t.Fatal(err)
				}
				if k.Spec.DeletionPolicy != kustomizev1.DeletionPolicyWaitForTermination {
					t.Fatalf("deletionPolicy %q, want WaitForTermination", k.Spec.DeletionPolicy)
				}
				pools := 0
				for _, p := range k.Spec.Patches {
					var np struct {
						Kind string
						Spec struct {
							Template struct {
								Spec struct {
									TerminationGracePeriod string `json:"terminationGracePeriod"`
								}
							}
						}
					}
					if err := yaml.Unmarshal([]byte(p.Patch), &np); err != nil {
						t.Fatal(err)
					}
					if np.Kind != "NodePool" {
						continue
					}
					pools++
					g, err := time.ParseDuration(np.Spec.Template.Spec.TerminationGracePeriod)
					if err != nil {
						t.Fatalf("grace %s: a NodePool without a termination grace period (%q) may wait forever on a blocked drain", grace, np.Spec.Template.Spec.TerminationGracePeriod)
					}
					if k.Spec.Timeout == nil || k.Spec.Timeout.Duration < g+15*time.Minute {
						t.Fatalf("grace %s, flux.timeout %s, per cluster %v: the nodes Kustomization gives up after %v, before the NodePool's grace period %v plus 15m: its instances could be stranded",
							grace, fluxTimeout, perCluster, k.Spec.Timeout, g)
					}
				}
				if pools != 2 {
					t.Fatalf("want the two NodePools in the patches, got %d", pools)
				}
				checked++
			}
		}
	}
	t.Logf("%d pool settings checked", checked)
}

func load(t *testing.T, grace, fluxTimeout string, perCluster bool) *spec.Config {
	t.Helper()
	pools := map[string]any{"defaults": map[string]any{"terminationGracePeriod": grace}}
	cluster := map[string]any{"name": "prod-eu", "account": "111122223333", "region": "eu-west-3",
		"nodeIdentity": map[string]any{"roleArn": "arn:aws:iam::111122223333:role/nodes", "instanceProfile": "nodes"}}
	in := map[string]any{"flux": map[string]any{"timeout": fluxTimeout}, "tenancy": map[string]any{"clusters": []any{cluster}}}
	if perCluster {
		cluster["pools"] = pools
		in["pools"] = map[string]any{"defaults": map[string]any{"terminationGracePeriod": "5m"}}
	} else {
		in["pools"] = pools
	}
	s, err := structpb.NewStruct(in)
	if err != nil {
		t.Fatal(err)
	}
	c, errs := spec.Load(spec.Owner{Name: "platform"}, map[string]any{
		"cluster":      map[string]any{"name": "prod-eu", "region": "eu-west-3"},
		"nodeIdentity": map[string]any{"roleArn": "arn:aws:iam::111122223333:role/nodes", "instanceProfile": "nodes"},
	}, s)
	if len(errs) > 0 {
		t.Fatalf("grace %s: %v", grace, errs)
	}
	return c
}
