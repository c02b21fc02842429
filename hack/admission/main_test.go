package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestRender: the committed policy, written for Crossplane in another
// namespace, exempts that namespace's service accounts and no longer
// crossplane-system's, and is labelled with the release in ./VERSION.
func TestRender(t *testing.T) {
	src, err := os.ReadFile("../../admission/tenant-requests.yaml")
	if err != nil {
		t.Fatal(err)
	}
	v, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(v))
	out, err := Render(src, "xp", version)
	if err != nil {
		t.Fatal(err)
	}
	var exemptions []string
	for _, d := range bytes.Split(out, []byte("\n---\n")) {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal(d, &u.Object); err != nil {
			t.Fatal(err)
		}
		conditions, _, _ := unstructured.NestedSlice(u.Object, "spec", "matchConditions")
		for _, c := range conditions {
			exemptions = append(exemptions, c.(map[string]any)["expression"].(string))
		}
	}
	if len(exemptions) != 1 || !strings.Contains(exemptions[0], "'system:serviceaccount:xp:'") || strings.Contains(exemptions[0], "crossplane-system") {
		t.Errorf("the policy for Crossplane in namespace xp exempts %q", exemptions)
	}
	for _, bad := range []struct{ ns, version string }{{"Not_A_Namespace", version}, {"xp", "v0.0.0-other"}} {
		if _, err := Render(src, bad.ns, bad.version); err == nil {
			t.Errorf("namespace %q, version %q: want an error", bad.ns, bad.version)
		}
	}
}
