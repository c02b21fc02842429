package tenancy

import (
	"bytes"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestAdmissionPolicyIsTheShippedOne holds AdmissionPolicy against the
// artifact the platform applies: its policy has that name, and its binding
// binds it, denying, with no matchResources of its own.
func TestAdmissionPolicyIsTheShippedOne(t *testing.T) {
	src, err := os.ReadFile("../../admission/tenant-requests.yaml")
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]*unstructured.Unstructured{}
	for _, d := range bytes.Split(src, []byte("\n---\n")) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(d, &u.Object); err != nil {
			t.Fatal(err)
		}
		found[u.GetKind()] = u
	}
	policy, binding := found["ValidatingAdmissionPolicy"], found["ValidatingAdmissionPolicyBinding"]
	if policy == nil || binding == nil {
		t.Fatalf("the artifact holds no policy or no binding: %v", found)
	}
	if policy.GetName() != AdmissionPolicy {
		t.Errorf("the shipped policy is %q, the function checks bindings of %q", policy.GetName(), AdmissionPolicy)
	}
	bound, _, _ := unstructured.NestedString(binding.Object, "spec", "policyName")
	actions, _, _ := unstructured.NestedStringSlice(binding.Object, "spec", "validationActions")
	_, narrowed, _ := unstructured.NestedFieldNoCopy(binding.Object, "spec", "matchResources")
	if bound != AdmissionPolicy || len(actions) != 1 || actions[0] != "Deny" || narrowed {
		t.Errorf("the shipped binding binds %q with %v (matchResources: %v): the function would report it absent", bound, actions, narrowed)
	}
}
