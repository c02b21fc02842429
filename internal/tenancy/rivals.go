package tenancy

import (
	"fmt"
	"slices"
	"sort"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	iam "github.com/upbound/provider-aws/v2/apis/cluster/iam/v1beta1"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/do-now/function-karpenter/internal/awsres"
	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/scope"
	"github.com/do-now/function-karpenter/internal/sequence"
)

// Bounds of what the function reads of the roles and leases labelled for
// one cluster. A real one is a few KiB, and a cluster has one per XR that
// asked for it; anything past these is objects written to inflate the
// request (a tenant of a namespace the tenancy lists may write labelled
// Objects with large annotations), and the function then refuses to decide
// rather than let the request grow past the gRPC limit
// (docs/platform.md, "Who is trusted with what").
const (
	MaxRivals        = 32
	MaxRequiredBytes = 1 << 20
)

// Rivals are the controller roles and leases of other XRs that count for
// a cluster: each controlled by an XR that exists, is not being deleted,
// asks for that cluster and is of a namespace the tenancy gives it to (or
// the platform's own, of none).
type Rivals struct {
	Roles, Leases []resource.Required
	// Overflow, when set, says why the function cannot tell the rivals:
	// more labelled objects than it reads.
	Overflow string
}

// What the function asks about: roles and leases, per API and namespace.
type wanted struct {
	api       scope.API
	namespace string // empty: cluster scope
	lease     bool
}

func (w wanted) name() string {
	what := "cluster-controller-roles-"
	if w.lease {
		what = "cluster-leases-"
	}
	if w.namespace == "" {
		return what + w.api.Key
	}
	return what + w.api.Key + "/" + w.namespace
}

// asked are the roles and leases the function asks for: of the claim API
// and the platform's own XRs at the cluster scope, where only Crossplane
// writes; of the namespaced API in each namespace the tenancy gives the
// cluster to, and nowhere else, so that nothing written in another
// namespace reaches the function's requests.
func asked(c *config.Config) []wanted {
	tc, _ := c.Tenant()
	var out []wanted
	for _, api := range scope.APIs {
		namespaces := []string{""}
		if api.Namespaced {
			namespaces = slices.Sorted(slices.Values(tc.Namespaces))
		}
		for _, ns := range namespaces {
			out = append(out, wanted{api, ns, false}, wanted{api, ns, true})
		}
	}
	return out
}

func (w wanted) selector(c *config.Config) *fnv1.ResourceSelector {
	built, kind, name := scope.IAM, iam.Role_Kind, awsres.ControllerRole // every API composes the role
	if w.lease {
		built, kind, name = scope.Kubernetes, scope.ObjectKind, sequence.Lease
	}
	gv, _ := w.api.GroupVersion(built)
	s := &fnv1.ResourceSelector{
		ApiVersion: gv.String(),
		Kind:       kind,
		Match: &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{Labels: map[string]string{
			config.ClusterLabel:    config.KubernetesName(c.Spec.Cluster.Name),
			sequence.ResourceLabel: string(name),
		}}},
	}
	if w.namespace != "" {
		s.Namespace = &w.namespace
	}
	return s
}

// compositeRequirement names the XR controlling a candidate rival.
func compositeRequirement(ref xrRef) string {
	return "composite/" + ref.api.Key + "/" + ref.namespace + "/" + ref.name
}

// xrRef is the XR a candidate rival's controller reference names.
type xrRef struct {
	api             scope.API
	namespace, name string
	uid             string
}

// controllerXR reads the XR that controls r, when it is one of the
// function's XRs and could compose r where it is: a namespaced XR composes
// in its own namespace, a cluster-scoped one at the cluster scope.
func controllerXR(r *unstructured.Unstructured) (xrRef, bool) {
	c := metav1.GetControllerOfNoCopy(r)
	if c == nil || c.UID == "" || c.Name == "" {
		return xrRef{}, false
	}
	gv, err := schema.ParseGroupVersion(c.APIVersion)
	if err != nil {
		return xrRef{}, false
	}
	for _, api := range scope.APIs {
		if api.XR.Group != gv.Group || api.XR.Kind != c.Kind || api.Namespaced != (r.GetNamespace() != "") {
			continue
		}
		return xrRef{api: api, namespace: r.GetNamespace(), name: c.Name, uid: string(c.UID)}, true
	}
	return xrRef{}, false
}

// Ask says what the function asks Crossplane for about xr's cluster, and
// what the answers tell, from req's required resources: first the roles
// and leases labelled for the cluster (asked), then the XR each one of
// another XR says controls it. done is false while an answer is missing:
// Crossplane then calls again, in the same reconcile, with them (Crossplane
// v2.4.2 internal/xfn/required_resources.go, FetchingFunctionRunner: up to
// MaxRequirementsIterations calls, until two in a row ask the same).
func Ask(c *config.Config, xr scope.XR, req *fnv1.RunFunctionRequest) (reqs map[string]*fnv1.ResourceSelector, rivals Rivals, done bool) {
	reqs = map[string]*fnv1.ResourceSelector{}
	done = true
	type candidate struct {
		r     resource.Required
		lease bool
		xr    xrRef
	}
	// What Crossplane answered, sized before anything of it is decoded.
	var answered []*fnv1.Resources
	var lease []bool
	items, size := 0, 0
	for _, w := range asked(c) {
		reqs[w.name()] = w.selector(c)
		found, ok := req.GetRequiredResources()[w.name()]
		if !ok {
			done = false
			continue
		}
		items += len(found.GetItems())
		size += proto.Size(found)
		answered, lease = append(answered, found), append(lease, w.lease)
	}
	if sel, ok := admissionSelector(c); ok {
		reqs[admissionRequirement] = sel
		if _, ok := req.GetRequiredResources()[admissionRequirement]; !ok {
			done = false
		}
	}
	if !done {
		return reqs, Rivals{}, false
	}
	if items > MaxRivals || size > MaxRequiredBytes {
		return reqs, Rivals{Overflow: fmt.Sprintf(
			"%d objects (%d bytes) are labelled as controller roles or leases for cluster %q in the namespaces the platform gives it to, more than the function reads (%d objects, %d bytes): the platform must remove those no XR composed",
			items, size, c.Spec.Cluster.Name, MaxRivals, MaxRequiredBytes)}, true
	}
	var candidates []candidate
	for i, found := range answered {
		for _, it := range found.GetItems() {
			u := &unstructured.Unstructured{Object: it.GetResource().AsMap()}
			if xr.Controls(u) {
				continue
			}
			ref, ok := controllerXR(u)
			if !ok {
				continue // no XR of the function's composed it
			}
			candidates = append(candidates, candidate{resource.Required{Resource: u}, lease[i], ref})
		}
	}
	tc, _ := c.Tenant()
	for _, cd := range candidates {
		name := compositeRequirement(cd.xr)
		gvk := cd.xr.api.XR
		s := &fnv1.ResourceSelector{ApiVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
			Match: &fnv1.ResourceSelector_MatchName{MatchName: cd.xr.name}}
		if cd.xr.namespace != "" {
			s.Namespace = &cd.xr.namespace
		}
		reqs[name] = s
		found, ok := req.GetRequiredResources()[name]
		if !ok {
			done = false
			continue
		}
		if !counts(c, tc.Namespaces, cd.xr, found) {
			continue
		}
		if cd.lease {
			rivals.Leases = append(rivals.Leases, cd.r)
		} else {
			rivals.Roles = append(rivals.Roles, cd.r)
		}
	}
	sort.Slice(rivals.Roles, func(i, j int) bool { return older(&rivals.Roles[i], &rivals.Roles[j]) })
	sort.Slice(rivals.Leases, func(i, j int) bool { return older(&rivals.Leases[i], &rivals.Leases[j]) })
	return reqs, rivals, done
}

// counts tells whether a rival controlled by ref counts: Crossplane found
// that XR (found), with the UID the rival's controller reference names
// (not another of the same name), not being deleted, asking for c's
// cluster, and of a namespace the tenancy gives the cluster to: a
// namespaced XR's own, a claim's (its XR's spec.claimRef, which only
// Crossplane writes), or none for the platform's own XR.
func counts(c *config.Config, namespaces []string, ref xrRef, found *fnv1.Resources) bool {
	if len(found.GetItems()) != 1 {
		return false
	}
	u := &unstructured.Unstructured{Object: found.GetItems()[0].GetResource().AsMap()}
	if string(u.GetUID()) != ref.uid || u.GetDeletionTimestamp() != nil {
		return false
	}
	if cluster, _, _ := unstructured.NestedString(u.Object, "spec", "cluster", "name"); cluster != c.Spec.Cluster.Name {
		return false
	}
	ns := u.GetNamespace()
	if !ref.api.Namespaced {
		ns, _, _ = unstructured.NestedString(u.Object, "spec", "claimRef", "namespace")
	}
	return ns == "" || slices.Contains(namespaces, ns)
}
