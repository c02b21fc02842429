package sequence

import (
	"testing"

	xpv1 "github.com/crossplane/crossplane-runtime/v2/apis/common/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/crossplane/function-sdk-go/resource/composite"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestObserveReadsTheRemoteObject checks what an Object that is not Ready
// says of the object it observes in the claimed cluster: that object's own
// Ready=False message, and nothing when it gives none.
func TestObserveReadsTheRemoteObject(t *testing.T) {
	object := func(remote []any) resource.ObservedComposed {
		u := composed.New()
		u.Object = map[string]any{
			"apiVersion": "kubernetes.crossplane.io/v1alpha2",
			"kind":       "Object",
			"status": map[string]any{
				"conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "Unavailable"}},
				"atProvider": map[string]any{"manifest": map[string]any{
					"kind":   "Kustomization",
					"status": map[string]any{"conditions": remote},
				}},
			},
		}
		return resource.ObservedComposed{Resource: u}
	}
	cases := map[string]struct {
		reason string
		remote []any
		want   Health
	}{
		"HealthCheckFailed": {
			reason: "Flux's own message reaches the step condition.",
			remote: []any{map[string]any{"type": "Ready", "status": "False", "reason": "HealthCheckFailed", "message": "HelmRelease/karpenter/karpenter status: 'Failed'"}},
			want:   Health{Problems: []string{"Kustomization Ready=False (HealthCheckFailed): HelmRelease/karpenter/karpenter status: 'Failed'"}},
		},
		"NoMessage": {
			reason: "A condition without a message adds nothing, rather than a <nil>.",
			remote: []any{map[string]any{"type": "Ready", "status": "False", "reason": "Progressing"}},
			want:   Health{},
		},
		"StillProgressing": {
			reason: "Ready=Unknown is not a failure to report.",
			remote: []any{map[string]any{"type": "Ready", "status": "Unknown", "reason": "Progressing", "message": "Reconciliation in progress"}},
			want:   Health{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Observe(object(tc.remote)), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nObserve(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestConditionOfReadsWhatTheSDKReads holds ConditionOf and ConditionIn to
// the SDK's GetCondition, composed and composite, which it replaces on the hot path, over conditions present,
// absent, partial and malformed.
func TestConditionOfReadsWhatTheSDKReads(t *testing.T) {
	for name, status := range map[string]any{
		"Ready":      map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Available"}, map[string]any{"type": "Synced", "status": "False", "reason": "ReconcileError", "message": "AccessDenied"}}},
		"NoStatus":   nil,
		"NoneOfIt":   map[string]any{"conditions": []any{map[string]any{"type": "Healthy", "status": "True"}}},
		"NoReason":   map[string]any{"conditions": []any{map[string]any{"type": "Synced", "status": "True"}}},
		"Empty":      map[string]any{"conditions": []any{}},
		"OtherField": map[string]any{"atProvider": map[string]any{"arn": "x"}},
	} {
		u := composed.New()
		if status != nil {
			u.Object["status"] = status
		}
		xr := composite.New()
		xr.Object = u.Object
		for _, typ := range []xpv1.ConditionType{xpv1.TypeReady, xpv1.TypeSynced} {
			want, got := u.GetCondition(typ), ConditionOf(u, typ)
			if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(xpv1.Condition{}, "LastTransitionTime")); diff != "" {
				t.Errorf("%s, %s: -SDK +ConditionOf:\n%s", name, typ, diff)
			}
			// The XR's, read by ConditionIn where fn compares what it sets.
			want, got = xr.GetCondition(typ), ConditionIn(xr.Object, typ)
			if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(xpv1.Condition{}, "LastTransitionTime")); diff != "" {
				t.Errorf("%s, %s: -SDK composite +ConditionIn:\n%s", name, typ, diff)
			}
		}
	}
}
