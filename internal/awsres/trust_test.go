package awsres

import (
	"encoding/json"
	"testing"

	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
	eks "github.com/upbound/provider-aws/v2/apis/cluster/eks/v1beta1"
	iam "github.com/upbound/provider-aws/v2/apis/cluster/iam/v1beta1"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/config/configtest"
)

// TestTrustBindsWhatTheAssociationBinds holds each role's trust conditions
// against the association step two composes for it: the same cluster,
// namespace and service account, and the account the association lives in
// (the node role's), for the defaults and for a platform that moves the
// controller; the controller's and the final check's, each bound to its
// own ServiceAccount.
func TestTrustBindsWhatTheAssociationBinds(t *testing.T) {
	cases := map[string]struct {
		reason  string
		input   map[string]any
		account string
		// binds is what the controller's association must bind, and
		// finalCheck what the final check's must, written out, so the test
		// cannot pass on two builders wrong the same way.
		binds, finalCheck [3]string // cluster, namespace, service account
	}{
		"Defaults": {
			reason:     "The controller's default namespace and service account, karpenter/karpenter.",
			account:    "111122223333",
			binds:      [3]string{"prod-eu", "karpenter", "karpenter"},
			finalCheck: [3]string{"prod-eu", "karpenter", "karpenter-final-check"},
		},
		"PlatformIdentity": {
			reason:     "A platform that runs the controller elsewhere scopes the trust there too.",
			input:      map[string]any{"podIdentity": map[string]any{"namespace": "autoscaling", "serviceAccount": "karpenter-controller"}},
			account:    "444455556666",
			binds:      [3]string{"prod-eu", "autoscaling", "karpenter-controller"},
			finalCheck: [3]string{"prod-eu", "autoscaling", "karpenter-final-check"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in, err := structpb.NewStruct(configtest.Pinned(tc.input))
			if err != nil {
				t.Fatal(err)
			}
			c, errs := config.Load(config.Owner{Namespace: "team-a", Name: "karpenter"}, map[string]any{
				"cluster":      map[string]any{"name": "prod-eu", "region": "eu-west-3"},
				"nodeIdentity": map[string]any{"roleArn": "arn:aws:iam::" + tc.account + ":role/nodes", "instanceProfile": "nodes"},
			}, in)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			step1, err := Identity(c)
			if err != nil {
				t.Fatal(err)
			}
			for _, pair := range []struct {
				role, assoc resource.Name
				binds       [3]string
			}{{ControllerRole, PodIdentityAssociation, tc.binds}, {FinalCheckRole, FinalCheckPodIdentityAssociation, tc.finalCheck}} {
				role := step1[pair.role].(*iam.Role)
				assoc := Wiring(c, Observed{})[pair.assoc].(*eks.PodIdentityAssociation).Spec.ForProvider
				var trust struct {
					Statement []struct {
						Condition map[string]map[string][]string
					}
				}
				if err := json.Unmarshal([]byte(*role.Spec.ForProvider.AssumeRolePolicy), &trust); err != nil {
					t.Fatalf("%s: the trust policy is not JSON: %v", pair.role, err)
				}
				if len(trust.Statement) != 1 {
					t.Fatalf("%s: want one trust statement, got %d", pair.role, len(trust.Statement))
				}
				if got := [3]string{*assoc.ClusterName, *assoc.Namespace, *assoc.ServiceAccount}; got != pair.binds {
					t.Errorf("\n%s\n%s binds %v, want %v", tc.reason, pair.assoc, got, pair.binds)
				}
				if want := c.Account.RoleARN(*role.Spec.ForProvider.Path, role.Annotations["crossplane.io/external-name"]); *assoc.RoleArn != want {
					t.Errorf("%s names role %s, not %s's (%s)", pair.assoc, *assoc.RoleArn, pair.role, want)
				}
				want := map[string]map[string][]string{"StringEquals": {
					"aws:SourceAccount":               {tc.account},
					"aws:RequestTag/eks-cluster-name": {*assoc.ClusterName},
					// The ARN of the cluster the association is in: its region, the account.
					"aws:RequestTag/eks-cluster-arn":            {"arn:aws:eks:" + *assoc.Region + ":" + tc.account + ":cluster/" + *assoc.ClusterName},
					"aws:RequestTag/kubernetes-namespace":       {*assoc.Namespace},
					"aws:RequestTag/kubernetes-service-account": {*assoc.ServiceAccount},
				}}
				if diff := cmp.Diff(want, trust.Statement[0].Condition); diff != "" {
					t.Errorf("\n%s\n%s's trust conditions vs %s: -want, +got:\n%s", tc.reason, pair.role, pair.assoc, diff)
				}
			}
		})
	}
}
