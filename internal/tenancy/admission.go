package tenancy

import (
	"fmt"
	"slices"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/sequence"
)

// ConditionAdmission says on every claim whether the platform's tenant
// admission policy is bound, when the platform asks the function to check
// (input admissionPolicyBinding).
const ConditionAdmission = "TenantAdmission"

// Reasons of ConditionAdmission.
const (
	ReasonPolicyBound  = "PolicyBound"
	ReasonPolicyAbsent = "PolicyAbsent"
)

const admissionRequirement = "admission-policy-binding"

// AdmissionPolicy is the name of the ValidatingAdmissionPolicy the platform
// applies (admission/tenant-requests.yaml, held there by a test): a binding
// counts only when it binds that one.
const AdmissionPolicy = "karpenter-tenant-requests.platform.socle.do-now.io"

// admissionSelector asks for the binding the input names, if it names one.
func admissionSelector(c *config.Config) (*fnv1.ResourceSelector, bool) {
	name := c.Input.AdmissionPolicyBinding
	if name == "" {
		return nil, false
	}
	return &fnv1.ResourceSelector{ApiVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding",
		Match: &fnv1.ResourceSelector_MatchName{MatchName: name}}, true
}

// Admission is what ConditionAdmission says, from Crossplane's answer in
// req; ok is false when the platform asks for no check. The policy holds
// when its binding exists, is not being deleted, binds AdmissionPolicy, to
// every request it matches (no matchResources of its own narrowing it), and
// denies what it refuses (validationActions Deny; Warn or Audit alone let
// the request through).
func Admission(c *config.Config, req *fnv1.RunFunctionRequest) (cond sequence.Condition, ok bool) {
	if _, ok := admissionSelector(c); !ok {
		return sequence.Condition{}, false
	}
	name := c.Input.AdmissionPolicyBinding
	absent := sequence.Condition{Type: ConditionAdmission, Reason: ReasonPolicyAbsent, Message: fmt.Sprintf(
		"the platform's tenant admission policy binding %q is absent: a claim may bind an XR it did not create (the function refuses that XR, but deleting the claim deletes it)", name)}
	found := req.GetRequiredResources()[admissionRequirement].GetItems()
	if len(found) != 1 {
		return absent, true
	}
	u := unstructured.Unstructured{Object: found[0].GetResource().AsMap()}
	actions, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "validationActions")
	policy, _, _ := unstructured.NestedString(u.Object, "spec", "policyName")
	_, narrowed, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "matchResources")
	if u.GetDeletionTimestamp() != nil || !slices.Contains(actions, "Deny") || policy != AdmissionPolicy || narrowed {
		absent.Message = fmt.Sprintf("the platform's tenant admission policy binding %q does not deny every request %s refuses (policyName %q, matchResources set: %v, validationActions %v, being deleted: %v): a claim may bind an XR it did not create",
			name, AdmissionPolicy, policy, narrowed, actions, u.GetDeletionTimestamp() != nil)
		return absent, true
	}
	return sequence.Condition{Type: ConditionAdmission, Ready: true, Reason: ReasonPolicyBound,
		Message: fmt.Sprintf("the platform's tenant admission policy binding %q denies what it refuses", name)}, true
}
