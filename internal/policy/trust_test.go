package policy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestControllerTrust(t *testing.T) {
	doc := parseJSON(t, ControllerTrust().JSON())

	if v := doc["Version"]; v != "2012-10-17" {
		t.Errorf("ControllerTrust(): Version = %v, want 2012-10-17", v)
	}
	got := normaliseStatements(t, doc)
	for _, s := range got {
		delete(s, "Sid")
	}
	// One statement: only EKS Pod Identity may assume the role and tag the
	// session. A trust policy names no Resource; IAM rejects one that does.
	want := []map[string]any{{
		"Effect":    "Allow",
		"Principal": map[string]any{"Service": []any{"pods.eks.amazonaws.com"}},
		"Action":    []any{"sts:AssumeRole", "sts:TagSession"},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("The controller role must trust EKS Pod Identity and nothing else.\nControllerTrust(): -want, +got:\n%s", diff)
	}
}
