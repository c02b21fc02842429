package policy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestControllerTrust(t *testing.T) {
	b := Binding{Account: "111122223333", Cluster: "prod-eu", Namespace: "karpenter", ServiceAccount: "karpenter"}
	doc := parseJSON(t, ControllerTrust(b).JSON())

	if v := doc["Version"]; v != "2012-10-17" {
		t.Errorf("ControllerTrust(): Version = %v, want 2012-10-17", v)
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
			"aws:RequestTag/kubernetes-namespace":       []any{"karpenter"},
			"aws:RequestTag/kubernetes-service-account": []any{"karpenter"},
		}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("The controller role must trust EKS Pod Identity for the controller's service account of its cluster, and nothing else.\nControllerTrust(): -want, +got:\n%s", diff)
	}
}
