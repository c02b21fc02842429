package policy

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPodIdentityTrust(t *testing.T) {
	b := Binding{Account: "111122223333", Cluster: "prod-eu", ClusterARN: "arn:aws:eks:eu-west-3:111122223333:cluster/prod-eu", Namespace: "karpenter", ServiceAccount: "karpenter"}
	doc := parseJSON(t, PodIdentityTrust(b).JSON())

	if v := doc["Version"]; v != "2012-10-17" {
		t.Errorf("PodIdentityTrust(): Version = %v, want 2012-10-17", v)
	}
	got := normaliseStatements(t, doc)
	for _, s := range got {
		delete(s, "Sid")
	}
	// One statement: only EKS Pod Identity may assume the role and tag the
	// session, and only with the session tags of the controller's service
	// account in the one cluster, from the cluster's account. A trust policy
	// names no Resource; IAM rejects one that does.
	want := []map[string]any{{
		"Effect":    "Allow",
		"Principal": map[string]any{"Service": []any{"pods.eks.amazonaws.com"}},
		"Action":    []any{"sts:AssumeRole", "sts:TagSession"},
		"Condition": map[string]any{"StringEquals": map[string]any{
			"aws:SourceAccount":                         []any{"111122223333"},
			"aws:RequestTag/eks-cluster-name":           []any{"prod-eu"},
			"aws:RequestTag/eks-cluster-arn":            []any{"arn:aws:eks:eu-west-3:111122223333:cluster/prod-eu"},
			"aws:RequestTag/kubernetes-namespace":       []any{"karpenter"},
			"aws:RequestTag/kubernetes-service-account": []any{"karpenter"},
		}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("The controller role must trust EKS Pod Identity for the controller's service account of its cluster, and nothing else.\nPodIdentityTrust(): -want, +got:\n%s", diff)
	}
}

// podIdentitySessionTags are the session tags EKS Pod Identity adds to its
// AssumeRole request, as "List of session tags added by EKS Pod Identity"
// gives them (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-abac.html,
// read 2026-12-02): a trust condition on any other tag can never hold.
var podIdentitySessionTags = []string{
	"eks-cluster-arn", "eks-cluster-name", "kubernetes-namespace",
	"kubernetes-service-account", "kubernetes-pod-name", "kubernetes-pod-uid",
}

// TestTrustHoldsForTheControllersSession evaluates the trust conditions
// against the session EKS Pod Identity requests for the controller's pod,
// and for the same pod of a same-named cluster in another region, another
// namespace or another service account: only the first may assume the role.
func TestTrustHoldsForTheControllersSession(t *testing.T) {
	b := Binding{Account: "111122223333", Cluster: "prod-eu", ClusterARN: "arn:aws:eks:eu-west-3:111122223333:cluster/prod-eu", Namespace: "karpenter", ServiceAccount: "karpenter"}
	doc := parseJSON(t, PodIdentityTrust(b).JSON())
	st := normaliseStatements(t, doc)
	if len(st) != 1 {
		t.Fatalf("want one statement, got %d", len(st))
	}
	conds := st[0]["Condition"].(map[string]any)
	if len(conds) != 1 || conds["StringEquals"] == nil {
		t.Fatalf("want only StringEquals conditions, got %v", conds)
	}
	// A session as EKS Pod Identity requests it: the account the cluster
	// is in, and the six tags, pod name and UID included.
	session := func(clusterARN, ns, sa string) map[string]string {
		return map[string]string{
			"aws:SourceAccount":                         "111122223333",
			"aws:RequestTag/eks-cluster-arn":            clusterARN,
			"aws:RequestTag/eks-cluster-name":           "prod-eu",
			"aws:RequestTag/kubernetes-namespace":       ns,
			"aws:RequestTag/kubernetes-service-account": sa,
			"aws:RequestTag/kubernetes-pod-name":        "karpenter-7d9f8b6c5-x2x4q",
			"aws:RequestTag/kubernetes-pod-uid":         "0b3f2c1e-5a6d-4e7f-8a9b-0c1d2e3f4a5b",
		}
	}
	allows := func(ctx map[string]string) bool {
		for key, values := range conds["StringEquals"].(map[string]any) {
			if tag, ok := strings.CutPrefix(key, "aws:RequestTag/"); ok && !slices.Contains(podIdentitySessionTags, tag) {
				t.Errorf("the trust conditions on %s, a tag EKS Pod Identity never sets", key)
			}
			v, ok := ctx[key]
			if !ok || !slices.Contains(values.([]any), any(v)) {
				return false
			}
		}
		return true
	}
	for _, tc := range []struct {
		reason string
		ctx    map[string]string
		want   bool
	}{
		{"the controller's pod in the claimed cluster", session("arn:aws:eks:eu-west-3:111122223333:cluster/prod-eu", "karpenter", "karpenter"), true},
		{"a cluster of the same name in another region", session("arn:aws:eks:us-east-1:111122223333:cluster/prod-eu", "karpenter", "karpenter"), false},
		{"another namespace of the claimed cluster", session("arn:aws:eks:eu-west-3:111122223333:cluster/prod-eu", "team-a", "karpenter"), false},
		{"another service account of the controller's namespace", session("arn:aws:eks:eu-west-3:111122223333:cluster/prod-eu", "karpenter", "default"), false},
	} {
		if got := allows(tc.ctx); got != tc.want {
			t.Errorf("%s: the trust allows = %v, want %v", tc.reason, got, tc.want)
		}
	}
}
