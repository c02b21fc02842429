package tenancy

import (
	"strings"
	"testing"
	"time"

	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/do-now/function-karpenter/apis/input/v1beta1"
	"github.com/do-now/function-karpenter/apis/v1alpha1"
	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/scope"
	"github.com/do-now/function-karpenter/internal/sequence"
)

var now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// config is team-a's claim for prod-eu, which the tenancy gives to team-a and
// team-c.
func configIn(namespace string) *config.Config {
	return &config.Config{
		Spec:  v1alpha1.XKarpenterSpec{Cluster: v1alpha1.Cluster{Name: "prod-eu"}},
		Owner: config.Owner{Namespace: namespace, Name: "karpenter"},
		Input: v1beta1.Input{Tenancy: &v1beta1.Tenancy{Clusters: []v1beta1.TenantCluster{
			{Name: "prod-eu", Namespaces: []string{"team-a", "team-c"}},
		}}},
	}
}

// lease is a lease Crossplane composed for XR xr (created at created),
// controlled by it.
func lease(xr scope.XR, created time.Time) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(scope.Kubernetes)
	u.SetKind(scope.ObjectKind)
	u.SetName(xr.Name + "-lease")
	u.SetNamespace(xr.Namespace)
	u.SetCreationTimestamp(metav1.NewTime(created))
	u.SetLabels(map[string]string{sequence.ResourceLabel: string(sequence.Lease)})
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: xr.API.XR.GroupVersion().String(), Kind: xr.API.XR.Kind,
		Name: xr.Name, UID: types.UID(xr.UID), Controller: ptr.To(true)}})
	return u
}

func required(us ...*unstructured.Unstructured) []resource.Required {
	out := make([]resource.Required, len(us))
	for i, u := range us {
		out[i] = resource.Required{Resource: u}
	}
	return out
}

// observing is what an XR observes of what it composed: its lease, and
// the other composed resources named.
func observing(own *unstructured.Unstructured, others ...resource.Name) map[resource.Name]resource.ObservedComposed {
	out := map[resource.Name]resource.ObservedComposed{}
	if own != nil {
		out[sequence.Lease] = resource.ObservedComposed{Resource: &composed.Unstructured{Unstructured: *own}}
	}
	for _, n := range others {
		out[n] = resource.ObservedComposed{Resource: composed.New()}
	}
	return out
}

// TestHolds: nothing in AWS is composed for an XR before it holds its
// cluster, by the first lease among those the tenancy allows, once its own
// has been seen long enough for a lease of the same instant to be seen too.
func TestHolds(t *testing.T) {
	self := scope.XR{API: scope.Claim, Name: "karpenter-x7k2p", UID: "uid-a"}
	teamC := scope.XR{API: scope.Claim, Name: "team-c-karpenter-q9w8e", UID: "uid-c"}
	own := func(age time.Duration) *unstructured.Unstructured { return lease(self, now.Add(-age)) }
	cases := map[string]struct {
		reason    string
		namespace string
		observed  map[resource.Name]resource.ObservedComposed
		rivals    Rivals
		held      bool
		waiting   string // what the XR waits for, when it neither holds nor is refused
		refused   string // what the refusal says
	}{
		"NoLeaseYet": {
			reason:  "The first call composes the lease; it is not observed yet.",
			waiting: "its lease is not observed yet",
		},
		"LeaseTooYoung": {
			reason:   "A lease of 5s: another of the same instant may not be seen yet.",
			observed: observing(own(5 * time.Second)),
			waiting:  "once its lease is 10s old",
		},
		"LeaseSettled": {
			reason:   "Its lease is the only one, and old enough.",
			observed: observing(own(11 * time.Second)),
			held:     true,
		},
		"OlderLease": {
			reason:   "team-c asked first: team-a's claim is refused, naming nobody.",
			observed: observing(own(time.Minute)),
			rivals:   Rivals{Leases: required(lease(teamC, now.Add(-2*time.Minute)))},
			refused:  `cluster "prod-eu" is already claimed: one Karpenter per cluster`,
		},
		"YoungerRival": {
			reason:   "team-a asked first: team-c's younger lease does not stop it.",
			observed: observing(own(time.Minute)),
			rivals:   Rivals{Leases: required(lease(teamC, now.Add(-time.Second)))},
			held:     true,
		},
		"HolderKeepsIt": {
			reason:   "An XR that composed more than its lease held the cluster, and keeps it, even against an older lease (its own re-created).",
			observed: observing(own(time.Second), "controller-role"),
			rivals:   Rivals{Leases: required(lease(teamC, now.Add(-time.Minute)))},
			held:     true,
		},
		"OverflowHolder": {
			reason:   "Too many labelled objects to read the rivals: the holder keeps its cluster.",
			observed: observing(own(time.Minute), "controller-role"),
			rivals:   Rivals{Overflow: "too many"},
			held:     true,
		},
		"OverflowAsking": {
			reason:   "Too many labelled objects to read the rivals: an XR that does not hold the cluster is refused with the reason.",
			observed: observing(own(time.Minute)),
			rivals:   Rivals{Overflow: "too many"},
			refused:  "too many",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ns := tc.namespace
			if ns == "" {
				ns = "team-a"
			}
			h, err := Holds(configIn(ns), tc.rivals, tc.observed, now)
			switch {
			case tc.refused != "":
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Errorf("%s\nwant refused saying %q, got %v (held %v, waiting %q)", tc.reason, tc.refused, err, h.Held, h.Waiting)
				}
			case err != nil:
				t.Errorf("%s\nrefused: %v", tc.reason, err)
			case h.Held != tc.held || !strings.Contains(h.Waiting, tc.waiting) || (tc.held && h.Waiting != ""):
				t.Errorf("%s\nheld %v waiting %q, want held %v waiting %q", tc.reason, h.Held, h.Waiting, tc.held, tc.waiting)
			}
		})
	}
}

// TestSameInstant: two XRs whose leases were created in the same second
// (creationTimestamp's resolution) each see both once theirs is settled:
// exactly one holds the cluster, whichever asks first, and the other is
// refused.
func TestSameInstant(t *testing.T) {
	at := now.Add(-time.Minute)
	a := scope.XR{API: scope.Claim, Name: "karpenter-x7k2p", UID: "uid-a"}
	c := scope.XR{API: scope.Namespaced, Namespace: "team-c", Name: "karpenter", UID: "uid-c"}
	la, lc := lease(a, at), lease(c, at)
	ha, ea := Holds(configIn("team-a"), Rivals{Leases: required(lc)}, observing(la), now)
	hc, ec := Holds(configIn("team-c"), Rivals{Leases: required(la)}, observing(lc), now)
	if ha.Held == hc.Held || (ea == nil) == (ec == nil) {
		t.Fatalf("want exactly one holder: team-a held %v (%v), team-c held %v (%v)", ha.Held, ea, hc.Held, ec)
	}
}
