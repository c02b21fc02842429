package sequence

import (
	"fmt"

	xpv1 "github.com/crossplane/crossplane-runtime/v2/apis/common/v1"
	"github.com/crossplane/function-sdk-go/resource"
	corev1 "k8s.io/api/core/v1"
)

// Health is what an observed resource's own status says.
type Health struct {
	Ready bool
	// Problems are what its controller reported it cannot do, verbatim.
	Problems []string
}

// Observe reads an observed resource's readiness from its real status: a
// Job has succeeded, a Namespace is Active, a ServiceAccount exists, a
// managed resource or a Flux Kustomization has Ready=True.
func Observe(ocd resource.ObservedComposed) Health {
	r := ocd.Resource
	switch r.GroupVersionKind().GroupKind().String() {
	case "Job.batch":
		if condition(ocd, "Complete").Status == corev1.ConditionTrue {
			return Health{Ready: true}
		}
		if c := condition(ocd, "Failed"); c.Status == corev1.ConditionTrue {
			return Health{Problems: []string{fmt.Sprintf("Job failed (%s): %s", c.Reason, c.Message)}}
		}
		return Health{}
	case "Namespace":
		phase, _ := r.GetString("status.phase")
		return Health{Ready: phase == string(corev1.NamespaceActive)}
	case "ServiceAccount":
		return Health{Ready: true}
	}
	h := Health{Ready: condition(ocd, xpv1.TypeReady).Status == corev1.ConditionTrue}
	if h.Ready {
		return h
	}
	for _, t := range []xpv1.ConditionType{xpv1.TypeSynced, xpv1.TypeReady} {
		if c := condition(ocd, t); c.Status == corev1.ConditionFalse && c.Message != "" {
			h.Problems = append(h.Problems, fmt.Sprintf("%s=False (%s): %s", t, c.Reason, c.Message))
		}
	}
	return h
}

func condition(ocd resource.ObservedComposed, t xpv1.ConditionType) xpv1.Condition {
	return ocd.Resource.GetCondition(t)
}
