package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

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
