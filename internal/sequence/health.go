package sequence

import (
	"fmt"
	"strings"
	"time"

	xpv1 "github.com/crossplane/crossplane-runtime/v2/apis/common/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/do-now/function-karpenter/internal/scope"
)

// Health is what an observed resource's own status says.
type Health struct {
	Ready bool
	// Problems are what its controller reported it cannot do, verbatim.
	Problems []string
	// Notes are what a Ready resource reports worth knowing: the access
	// check that passed with a warning.
	Notes []string
}

// Observe reads an observed resource's readiness from its real status: a
// managed resource or a provider-kubernetes Object has Ready=True, and when
// an Object carries a Pod (the access check), the Pod as observed in the
// claimed cluster has succeeded. An Object that is not Ready also says why
// the object it observes is not (a Kustomization's failed health check, a
// failed check's own words, say).
func Observe(ocd resource.ObservedComposed) Health {
	r := ocd.Resource
	h := Health{Ready: ConditionOf(r, xpv1.TypeReady).Status == corev1.ConditionTrue}
	object := scope.IsObject(r.GroupVersionKind().GroupKind())
	if object {
		if kind, _ := r.GetString("status.atProvider.manifest.kind"); kind == "Pod" {
			h = observePod(r)
		}
	}
	if h.Ready {
		return h
	}
	h.Problems = append(h.Problems, problemsOf(r)...)
	if object {
		h.Problems = append(h.Problems, remoteReady(r)...)
	}
	return h
}

// problemsOf are the Synced=False and Ready=False messages of a resource's
// own controller.
func problemsOf(r *composed.Unstructured) []string {
	var out []string
	for _, t := range []xpv1.ConditionType{xpv1.TypeSynced, xpv1.TypeReady} {
		if c := ConditionOf(r, t); c.Status == corev1.ConditionFalse && c.Message != "" {
			out = append(out, fmt.Sprintf("%s=False (%s): %s", t, c.Reason, c.Message))
		}
	}
	return out
}

// remoteReady is the Ready=False condition, with its message, of the object
// an Object observes in the claimed cluster, as its own controller wrote it.
func remoteReady(r *composed.Unstructured) []string {
	rm, ok := RemoteOf(r)
	if !ok || rm.Ready.Status != corev1.ConditionFalse || rm.Ready.Message == "" {
		return nil
	}
	return []string{fmt.Sprintf("%s Ready=False (%s): %s", rm.Kind, rm.Ready.Reason, rm.Ready.Message)}
}

// observePod reads the Pod a provider-kubernetes Object observed: Ready
// once Succeeded, whatever the Object's own Ready says; once Failed, its
// container's exit code and termination message (where the access check
// names the check that failed, with AWS's words) are the problem; while it
// waits, why (an image that cannot be pulled, a ServiceAccount missing).
func observePod(r *composed.Unstructured) Health {
	// The status alone: the manifest's spec holds the preflight's script,
	// which GetValueInto would encode and decode for nothing.
	var pod struct {
		Status struct {
			Phase             string `json:"phase"`
			Reason            string `json:"reason"`
			Message           string `json:"message"`
			ContainerStatuses []struct {
				State struct {
					Waiting *struct {
						Reason  string `json:"reason"`
						Message string `json:"message"`
					} `json:"waiting"`
					Terminated *struct {
						ExitCode int    `json:"exitCode"`
						Reason   string `json:"reason"`
						Message  string `json:"message"`
					} `json:"terminated"`
				} `json:"state"`
			} `json:"containerStatuses"`
		}
	}
	if err := r.GetValueInto("status.atProvider.manifest.status", &pod.Status); err != nil {
		return Health{}
	}
	st := pod.Status
	if st.Phase == string(corev1.PodSucceeded) {
		// A check that passed with a warning says so in its termination
		// message (what Karpenter would silently degrade on).
		h := Health{Ready: true}
		for _, cs := range st.ContainerStatuses {
			if t := cs.State.Terminated; t != nil && strings.HasPrefix(t.Message, "passed, with ") {
				h.Notes = append(h.Notes, strings.TrimSpace(t.Message))
			}
		}
		return h
	}
	var h Health
	for _, cs := range st.ContainerStatuses {
		switch t, w := cs.State.Terminated, cs.State.Waiting; {
		case t != nil && t.ExitCode != 0:
			h.Problems = append(h.Problems, fmt.Sprintf("Pod failed (exit %d, %s): %s", t.ExitCode, t.Reason, strings.TrimSpace(t.Message)))
		case w != nil && w.Reason != "" && w.Reason != "ContainerCreating":
			h.Problems = append(h.Problems, fmt.Sprintf("Pod waiting (%s): %s", w.Reason, w.Message))
		}
	}
	if st.Phase == string(corev1.PodFailed) && (st.Reason != "" || len(h.Problems) == 0) {
		// A Pod the kubelet stopped (DeadlineExceeded, Evicted) says so
		// itself, besides its container's exit.
		h.Problems = append(h.Problems, fmt.Sprintf("Pod failed (%s): %s", st.Reason, st.Message))
	}
	return h
}

// ConditionOf reads one condition of an observed resource straight from its
// status.conditions. The SDK's GetCondition decodes the whole status
// through JSON, which for an Object is the whole manifest it observes, on
// every read.
func ConditionOf(r *composed.Unstructured, t xpv1.ConditionType) xpv1.Condition {
	return ConditionIn(r.Object, t)
}

// ConditionIn is ConditionOf for any object, the XR's included (the SDK's
// composite GetCondition decodes its whole status through JSON too).
func ConditionIn(obj map[string]any, t xpv1.ConditionType) xpv1.Condition {
	status, ok := obj["status"].(map[string]any)
	if !ok {
		return xpv1.Condition{} // as the SDK answers for an object without status
	}
	return conditionIn(status, t)
}

// conditionIn is condition t of a status's conditions, Unknown when it
// has none: a managed resource's, or an observed object's own.
func conditionIn(status map[string]any, t xpv1.ConditionType) xpv1.Condition {
	conditions, _ := status["conditions"].([]any)
	for _, c := range conditions {
		m, _ := c.(map[string]any)
		if m["type"] != string(t) {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		c := xpv1.Condition{Type: t, Status: corev1.ConditionStatus(str("status")), Reason: xpv1.ConditionReason(str("reason")), Message: str("message")}
		if at, err := time.Parse(time.RFC3339, str("lastTransitionTime")); err == nil {
			c.LastTransitionTime = metav1.NewTime(at)
		}
		c.ObservedGeneration, _ = integer(m["observedGeneration"])
		return c
	}
	return xpv1.Condition{Type: t, Status: corev1.ConditionUnknown}
}
