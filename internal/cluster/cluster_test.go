package cluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"

	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/config/configtest"
)

func load(t *testing.T, in map[string]any) *config.Config {
	t.Helper()
	return loadClaim(t, nil, in)
}

// loadClaim loads the claim for prod-eu, with extra spec fields, and the
// platform's input in.
func loadClaim(t *testing.T, extra, in map[string]any) *config.Config {
	t.Helper()
	s, err := structpb.NewStruct(configtest.Pinned(in))
	if err != nil {
		t.Fatal(err)
	}
	claim := map[string]any{
		"cluster":      map[string]any{"name": "prod-eu", "region": "eu-west-3"},
		"nodeIdentity": map[string]any{"roleArn": "arn:aws:iam::111122223333:role/nodes", "instanceProfile": "nodes"},
	}
	for k, v := range extra {
		claim[k] = v
	}
	c, errs := config.Load(config.Owner{Namespace: "team-a", Name: "karpenter"}, claim, s)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	c.ClusterVPC = "vpc-0fa4e" // as the observed cluster reports it
	return c
}

func TestAccessCheckRunsAsTheController(t *testing.T) {
	c := load(t, map[string]any{
		"podIdentity": map[string]any{"namespace": "karpenter-system", "serviceAccount": "karpenter-controller"},
		"controller": map[string]any{
			"nodeSelector": map[string]any{"socle.do-now.io/node-group": "system"},
			"tolerations":  []any{map[string]any{"key": "CriticalAddonsOnly", "operator": "Exists"}},
		},
		"accessCheck": map[string]any{"image": "registry.example/aws-cli:2.31.30", "backoffLimit": 4, "activeDeadlineSeconds": 300},
	})
	objs := Manifests(c)

	ns := objs[Namespace].(*corev1.Namespace)
	sa := objs[ServiceAccount].(*corev1.ServiceAccount)
	check := objs[AccessCheck].(*corev1.Pod)
	if ns.Name != "karpenter-system" || sa.Namespace != "karpenter-system" || check.Namespace != "karpenter-system" {
		t.Errorf("namespace %q, ServiceAccount in %q, access check in %q: all must be the association's namespace", ns.Name, sa.Namespace, check.Namespace)
	}
	pod := check.Spec
	if sa.Name != "karpenter-controller" || pod.ServiceAccountName != "karpenter-controller" {
		t.Errorf("ServiceAccount %q, access check runs as %q: the check must run as the association's service account", sa.Name, pod.ServiceAccountName)
	}
	script, _ := Preflight(c)
	if diff := cmp.Diff([]string{"/bin/sh", "-c", script}, pod.Containers[0].Command); diff != "" {
		t.Errorf("command (-want +got):\n%s", diff)
	}
	if pod.Containers[0].TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("terminationMessagePolicy %q: a check's words must reach the Pod's status", pod.Containers[0].TerminationMessagePolicy)
	}
	if pod.Containers[0].Image != "registry.example/aws-cli:2.31.30" {
		t.Errorf("image %q, want the platform's", pod.Containers[0].Image)
	}
	if *pod.ActiveDeadlineSeconds != 300 || pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("the check runs once, bounded by the platform: deadline %d, restartPolicy %s", *pod.ActiveDeadlineSeconds, pod.RestartPolicy)
	}
	if diff := cmp.Diff(map[string]string{"socle.do-now.io/node-group": "system"}, pod.NodeSelector); diff != "" {
		t.Errorf("nodeSelector (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}}, pod.Tolerations); diff != "" {
		t.Errorf("tolerations (-want +got):\n%s", diff)
	}
	want := corev1.NodeSelectorRequirement{Key: "karpenter.sh/nodepool", Operator: corev1.NodeSelectorOpDoesNotExist}
	if got := pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions; !cmp.Equal([]corev1.NodeSelectorRequirement{want}, got) {
		t.Errorf("the check must never run on a Karpenter node, got %v", got)
	}
	var region string
	for _, e := range pod.Containers[0].Env {
		if e.Name == "AWS_REGION" {
			region = e.Value
		}
	}
	if region != "eu-west-3" {
		t.Errorf("AWS_REGION %q, want the cluster's region", region)
	}
	if a := pod.AutomountServiceAccountToken; a == nil || *a {
		t.Error("the check mounts a Kubernetes API token it never uses: Pod Identity brings its AWS credentials through a volume of its own")
	}
}

// TestAccessCheckRunsAgain: the access check's Pod's name changes when
// what it checks changes or a new run is asked for, and only then.
func TestAccessCheckRunsAgain(t *testing.T) {
	in := map[string]any{"nodes": map[string]any{"privateSubnetTags": map[string]any{"tier": "private"}}}
	c := load(t, in)
	name := PodName(c)
	if again := PodName(load(t, in)); again != name {
		t.Fatalf("the same claim and input: %s, then %s", name, again)
	}
	if pod := Manifests(c)[AccessCheck].(*corev1.Pod); pod.Name != name {
		t.Errorf("Pod %s, want %s", pod.Name, name)
	}
	observed := load(t, in)
	observed.ClusterVersion = "1.34"
	upgraded := load(t, in)
	upgraded.ClusterVersion = "1.35"
	if PodName(observed) == PodName(upgraded) {
		t.Error("the cluster's control plane moved to 1.35, yet the check is not run again for it")
	}
	rerun := load(t, in)
	rerun.AccessCheckRun = "2026-12-01"
	if PodName(rerun) == name {
		t.Error("a new socle.do-now.io/access-check-run value does not run the check again")
	}
	retagged := load(t, map[string]any{"nodes": map[string]any{"privateSubnetTags": map[string]any{"tier": "app"}}})
	if PodName(retagged) == name {
		t.Error("new subnet tags, which the check looks for, do not run it again")
	}
}
