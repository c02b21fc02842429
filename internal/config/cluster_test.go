package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/do-now/function-karpenter/apis/input/v1beta1"
)

// TestClusterDefaults pins the cluster half of the input's defaults, written
// out here rather than read from the Default* constants.
func TestClusterDefaults(t *testing.T) {
	c, errs := Load(owner, xr(), input(nil))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	backoff, deadline, suffix, on, replicas, attempts := int32(6), int64(600), "-public-nodes", true, int32(2), int32(4)
	want := struct {
		Flux        v1beta1.Flux
		Controller  v1beta1.Controller
		AccessCheck v1beta1.AccessCheck
		Monitoring  v1beta1.Monitoring
		Nodes       v1beta1.Nodes
	}{
		Flux: v1beta1.Flux{
			Namespace:      "flux-system",
			SourceRef:      v1beta1.SourceRef{Kind: "GitRepository", Name: "flux-system", Namespace: "flux-system"},
			ControllerPath: "./examples/gitops/controller",
			NodesPath:      "./examples/gitops/nodes",
			MonitoringPath: "./examples/gitops/monitoring",
			Interval:       "10m",
			Timeout:        "10m",
			RetryInterval:  "1m",
		},
		Controller: v1beta1.Controller{ControllerSize: v1beta1.ControllerSize{Replicas: &replicas, Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"cpu": resource.MustParse("500m"), "memory": resource.MustParse("512Mi")},
			Limits:   corev1.ResourceList{"cpu": resource.MustParse("1"), "memory": resource.MustParse("1Gi")},
		}}},
		AccessCheck: v1beta1.AccessCheck{Image: "public.ecr.aws/aws-cli/aws-cli:2.31.30", BackoffLimit: &backoff, Attempts: &attempts, ActiveDeadlineSeconds: &deadline, MinRunInterval: "1h"},
		Monitoring:  v1beta1.Monitoring{Enabled: &on, NearLimitsRatio: "0.9"},
		Nodes: v1beta1.Nodes{
			PrivateSubnetTags:         map[string]string{"kubernetes.io/role/internal-elb": "1"},
			PublicSubnetTags:          map[string]string{"kubernetes.io/role/elb": "1"},
			PublicSecurityGroupSuffix: &suffix,
			DefaultAMIAlias:           "al2023@v20260714",
			StartupTaints:             []v1beta1.Taint{},
			RootVolumeSize:            "50Gi",
		},
	}
	got := want
	got.Flux, got.Controller, got.AccessCheck, got.Monitoring, got.Nodes = c.Input.Flux, c.Input.Controller, c.Input.AccessCheck, c.Input.Monitoring, c.Input.Nodes
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cluster defaults: -want, +got:\n%s", diff)
	}

	// The source lives with the Kustomizations unless the platform says otherwise.
	c, errs = Load(owner, xr(), input(map[string]any{"flux": map[string]any{"namespace": "gitops"}}))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if c.Input.Flux.SourceRef.Namespace != "gitops" {
		t.Errorf("sourceRef.namespace %q, want the Kustomizations' namespace gitops", c.Input.Flux.SourceRef.Namespace)
	}

	// The defaults are copies: a claim's input never writes into them.
	c.Input.Nodes.PrivateSubnetTags["tenant"] = "a"
	if c2, _ := Load(owner, xr(), input(nil)); len(c2.Input.Nodes.PrivateSubnetTags) != 1 {
		t.Errorf("a change to one config's subnet tags leaked into the defaults: %v", c2.Input.Nodes.PrivateSubnetTags)
	}
}

// TestStartupTaints: a cluster's own startup taints replace the platform's,
// [] included; a taint the NodePool CRD would refuse is refused at its path.
func TestStartupTaints(t *testing.T) {
	cilium := map[string]any{"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoExecute"}
	platform := map[string]any{"nodes": map[string]any{"startupTaints": []any{cilium}}}
	c, errs := Load(owner, xr(), input(platform))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := c.StartupTaints(); len(got) != 1 || got[0].Key != "node.cilium.io/agent-not-ready" {
		t.Errorf("the platform's taints: got %v", got)
	}
	own := input(map[string]any{"nodes": map[string]any{"startupTaints": []any{cilium}}, "tenancy": tenancyWith("startupTaints", []any{})})
	if c, errs = Load(owner, xr(), own); len(errs) > 0 || c.StartupTaints() == nil || len(c.StartupTaints()) != 0 {
		t.Errorf("a cluster's [] replaces the platform's taints: got %v (%v)", c, errs)
	}
	testLoadInvalid(t, map[string]invalidCase{
		"BadTaints": {
			reason: "A key the API server refuses, an effect Kubernetes has not, and a taint twice.",
			spec:   xr(),
			input: input(map[string]any{"nodes": map[string]any{"startupTaints": []any{
				map[string]any{"key": "not a key", "effect": "NoSchedule"},
				map[string]any{"key": "cni/not-ready", "effect": "Sometimes"},
				map[string]any{"key": "cni/not-ready", "value": "x", "effect": "Sometimes"},
			}}}),
			want: []errorID{
				{field.ErrorTypeInvalid, "input.nodes.startupTaints[0].key"},
				{field.ErrorTypeNotSupported, "input.nodes.startupTaints[1].effect"},
				{field.ErrorTypeDuplicate, "input.nodes.startupTaints[2]"},
				{field.ErrorTypeNotSupported, "input.nodes.startupTaints[2].effect"},
			},
		},
	})
}
