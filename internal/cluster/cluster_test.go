package cluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/structpb"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/do-now/function-karpenter/internal/spec"
)

func load(t *testing.T, in map[string]any) *spec.Config {
	t.Helper()
	s, err := structpb.NewStruct(in)
	if err != nil {
		t.Fatal(err)
	}
	c, errs := spec.Load(spec.Owner{Namespace: "team-a", Name: "karpenter"}, map[string]any{
		"cluster":      map[string]any{"name": "prod-eu", "region": "eu-west-3"},
		"nodeIdentity": map[string]any{"roleArn": "arn:aws:iam::111122223333:role/nodes", "instanceProfile": "nodes"},
	}, s)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
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
	job := objs[AccessCheck].(*batchv1.Job)
	if ns.Name != "karpenter-system" || sa.Namespace != "karpenter-system" || job.Namespace != "karpenter-system" {
		t.Errorf("namespace %q, ServiceAccount in %q, Job in %q: all must be the association's namespace", ns.Name, sa.Namespace, job.Namespace)
	}
	pod := job.Spec.Template.Spec
	if sa.Name != "karpenter-controller" || pod.ServiceAccountName != "karpenter-controller" {
		t.Errorf("ServiceAccount %q, Job runs as %q: the check must run as the association's service account", sa.Name, pod.ServiceAccountName)
	}
	if diff := cmp.Diff([]string{"aws", "sts", "get-caller-identity"}, pod.Containers[0].Command); diff != "" {
		t.Errorf("command (-want +got):\n%s", diff)
	}
	if pod.Containers[0].Image != "registry.example/aws-cli:2.31.30" {
		t.Errorf("image %q, want the platform's", pod.Containers[0].Image)
	}
	if *job.Spec.BackoffLimit != 4 || *job.Spec.ActiveDeadlineSeconds != 300 || pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("retries must be bounded by the platform: backoffLimit %d, deadline %d, restartPolicy %s", *job.Spec.BackoffLimit, *job.Spec.ActiveDeadlineSeconds, pod.RestartPolicy)
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
}
