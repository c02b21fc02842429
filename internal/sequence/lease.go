package sequence

import (
	"time"

	"github.com/crossplane/function-sdk-go/resource"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/do-now/function-karpenter/internal/cluster"
	"github.com/do-now/function-karpenter/internal/config"
)

// Lease is the composed resource by which an XR asks for its cluster. It is
// the first thing an XR composes, and nothing in AWS is composed before the
// XR holds the cluster: two XRs that ask at the same instant compose
// nothing that shares a name, and deleting the one refused deletes nothing
// of the other's.
//
// A lease is an observe-only provider-kubernetes Object of the claimed
// cluster's kube-system Namespace: it changes nothing anywhere, and
// provider-kubernetes releases it at once on deletion. What counts is that
// the function composed it, when (its creationTimestamp), and for which XR
// (the labels Crossplane sets on what an XR composes).
const Lease resource.Name = "cluster-lease"

// Settle is how old an XR's lease must be before the XR may take a cluster
// nobody holds: long enough that a lease created at the same instant by
// another XR is seen by both, so both agree which is first.
const Settle = 10 * time.Second

// LeaseObject builds c's lease.
func LeaseObject(c *config.Config) (runtime.Object, error) {
	ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem}}
	o, err := cluster.Object(c, ns, nil)
	if err != nil {
		return nil, err
	}
	o.Object["spec"].(map[string]any)["managementPolicies"] = []any{"Observe"}
	return o, nil
}

// ConditionHeld says on the XR and the claim whether the XR holds its
// cluster, or what it waits for before it may.
const ConditionHeld = "ClusterHeld"

// A Hold is whether an XR holds its cluster (internal/tenancy decides).
type Hold struct {
	// Held: the XR may compose everything; else it composes only its
	// lease (what exists of the rest stays), and Waiting says what for.
	Held    bool
	Waiting string
}

// leaseStep is the first step: the XR's lease on its cluster. Until the XR
// holds the cluster, every later step waits on it; once held, the lease only
// observes, whatever it reports.
func leaseStep(c *config.Config, h Hold) Step {
	s := Step{
		Condition: ConditionHeld,
		Build: func() (map[resource.Name]runtime.Object, error) {
			o, err := LeaseObject(c)
			return map[resource.Name]runtime.Object{Lease: o}, err
		},
	}
	if h.Held {
		s.Observe = true
	} else {
		s.NotReady = map[resource.Name]string{Lease: h.Waiting}
	}
	return s
}
