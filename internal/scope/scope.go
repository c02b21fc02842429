// Package scope holds, as data, the two platform APIs the function serves
// and what each composes: the claim API (a cluster-scoped XKarpenter behind
// a namespaced Karpenter claim, composing cluster-scoped managed resources)
// and Crossplane v2's namespaced Karpenter XR (composing namespaced managed
// resources in its own namespace). Everything else — composed resource
// names, the step graph, gating, tenancy, status — is one code path: the
// builders make every resource in the claim API's kinds, and API.Compose
// turns it into the kind the XR's API composes.
package scope

import (
	"fmt"
	"slices"
	"strings"

	"github.com/crossplane/function-sdk-go/resource/composed"
	events "github.com/upbound/provider-aws/v2/apis/cluster/cloudwatchevents/v1beta1"
	eks "github.com/upbound/provider-aws/v2/apis/cluster/eks/v1beta1"
	iam "github.com/upbound/provider-aws/v2/apis/cluster/iam/v1beta1"
	sqs "github.com/upbound/provider-aws/v2/apis/cluster/sqs/v1beta1"
	mEvents "github.com/upbound/provider-aws/v2/apis/namespaced/cloudwatchevents/v1beta1"
	mEKS "github.com/upbound/provider-aws/v2/apis/namespaced/eks/v1beta1"
	mIAM "github.com/upbound/provider-aws/v2/apis/namespaced/iam/v1beta1"
	mSQS "github.com/upbound/provider-aws/v2/apis/namespaced/sqs/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/do-now/function-karpenter/apis/v1alpha1"
	"github.com/do-now/function-karpenter/internal/convert"
)

// An API is one of the platform's APIs and the kinds it composes.
type API struct {
	// Name is how messages and the docs call it.
	Name string
	// Key is a short stable name, part of the names the function gives
	// Crossplane (its requirements).
	Key string
	// XR is the composite's kind.
	XR schema.GroupVersionKind
	// Claims is true when a claim stands for the XR: Crossplane then
	// writes spec.claimRef, and the claim's namespace is the tenant.
	Claims bool
	// Namespaced is true when the XR, and so everything it composes, lives
	// in a namespace (Crossplane puts a namespaced XR's composed resources
	// in its namespace and refuses cluster-scoped ones).
	Namespaced bool
	// Composes maps the apiVersion of each kind the builders make to the
	// apiVersion this API composes it as. A kind not listed cannot be
	// composed: adding one is a change here, checked by this package's
	// tests against the provider's own types.
	Composes map[string]string
	// ProviderConfigKind is the kind a composed resource's providerConfigRef
	// names; empty when the reference is by name only (cluster-scoped
	// managed resources always use a cluster-scoped ProviderConfig).
	ProviderConfigKind string
	// CrossplaneFields is where the XR holds the fields Crossplane reads to
	// choose its Composition and revision (compositionUpdatePolicy,
	// compositionRevisionSelector, ...): the spec of a legacy XR, which a
	// claim's own are copied to, or spec.crossplane of a v2 XR.
	CrossplaneFields []string
}

// The apiVersions the builders make: provider-aws' cluster-scoped managed
// resources, as its Go types spell them, and provider-kubernetes'
// cluster-scoped Object (whose Go module the function does not import: it
// would pull a newer crossplane-runtime than function-sdk-go v0.6.1's; the
// render tests validate every Object against its CRD).
var (
	IAM    = iam.CRDGroupVersion.String()
	SQS    = sqs.CRDGroupVersion.String()
	Events = events.CRDGroupVersion.String()
	EKS    = eks.CRDGroupVersion.String()
)

// Kubernetes is provider-kubernetes' cluster-scoped Object's apiVersion.
const Kubernetes = "kubernetes.crossplane.io/v1alpha2"

// A Kind is one kind the builders make, as the claim API composes it, with
// its resource (the plural its CRD is named by).
type Kind struct {
	APIVersion, Kind, Resource string
}

// Built are every kind the builders make: the one list the tests read the
// CRDs and watches they need from.
var Built = []Kind{
	{IAM, iam.Role_Kind, "roles"},
	{IAM, iam.RolePolicy_Kind, "rolepolicies"},
	{SQS, sqs.Queue_Kind, "queues"},
	{SQS, sqs.QueuePolicy_Kind, "queuepolicies"},
	{Events, events.Rule_Kind, "rules"},
	{Events, events.Target_Kind, "targets"},
	{EKS, eks.PodIdentityAssociation_Kind, "podidentityassociations"},
	{EKS, eks.Cluster_Kind, "clusters"},
	{Kubernetes, ObjectKind, "objects"},
}

// Kinds are the kinds this API composes, in Built's order.
func (a API) Kinds() []Kind {
	out := make([]Kind, 0, len(Built))
	for _, k := range Built {
		gv, _ := a.GroupVersion(k.APIVersion) // every built apiVersion is composed: TestEveryBuiltKindComposed
		out = append(out, Kind{APIVersion: gv.String(), Kind: k.Kind, Resource: k.Resource})
	}
	return out
}

// CRDFile is the name the provider's package gives the kind's CRD file.
func (k Kind) CRDFile() string {
	gv, _ := schema.ParseGroupVersion(k.APIVersion)
	return CRDFile(gv.Group, k.Resource)
}

// CRDFile is the name a provider's package gives the CRD file of a
// resource of a group (its provider configs' too): <group>_<resource>.yaml.
func CRDFile(group, resource string) string {
	return group + "_" + resource + ".yaml"
}

// AppliesManifest tells whether a provider-kubernetes Object with these
// managementPolicies creates or updates its manifest in the claimed
// cluster. nil is unset, the default ["*"]; an Object whose policies hold
// neither *, Create nor Update ([Observe], [Observe, Delete], or [] which
// pauses it) only reads its manifest (crossplane-runtime v2.4.0
// pkg/reconciler/managed/policies.go).
func AppliesManifest(policies []string) bool {
	return policies == nil || slices.ContainsFunc(policies, func(p string) bool {
		return p == "*" || p == "Create" || p == "Update"
	})
}

// ObjectKind is provider-kubernetes' Object, in either API.
const ObjectKind = "Object"

// The two APIs.
var (
	// Claim is the apiextensions.crossplane.io/v1 XRD with claims: the
	// builders' kinds as they are.
	Claim = API{
		Name:   "claim",
		Key:    "claim",
		Claims: true,
		XR:     schema.GroupVersionKind{Group: v1alpha1.Group, Version: v1alpha1.Version, Kind: v1alpha1.Kind},
		// Crossplane v2.2.1 apis/apiextensions/v1 XRD, legacy composites:
		// spec.compositionUpdatePolicy and its siblings.
		CrossplaneFields: []string{"spec"},
		Composes: map[string]string{
			IAM: IAM, SQS: SQS, Events: Events, EKS: EKS, Kubernetes: Kubernetes,
		},
	}
	// Namespaced is the apiextensions.crossplane.io/v2 namespaced XR:
	// provider-aws' *.aws.m.upbound.io kinds and provider-kubernetes'
	// kubernetes.m.crossplane.io Object, each bound to a
	// ClusterProviderConfig the platform names, so nothing in the tenant's
	// namespace holds or points at a credential of its own.
	Namespaced = API{
		Name:       "namespaced XR",
		Key:        "namespaced",
		XR:         schema.GroupVersionKind{Group: v1alpha1.NamespacedGroup, Version: v1alpha1.Version, Kind: v1alpha1.NamespacedKind},
		Namespaced: true,
		Composes: map[string]string{
			IAM:        mIAM.CRDGroupVersion.String(),
			SQS:        mSQS.CRDGroupVersion.String(),
			Events:     mEvents.CRDGroupVersion.String(),
			EKS:        mEKS.CRDGroupVersion.String(),
			Kubernetes: "kubernetes.m.crossplane.io/v1alpha1",
		},
		ProviderConfigKind: "ClusterProviderConfig",
		CrossplaneFields:   []string{"spec", "crossplane"},
	}
)

// APIs are every API the function serves.
var APIs = []API{Claim, Namespaced}

// Of returns the API of an XR of apiVersion and kind.
func Of(apiVersion, kind string) (API, error) {
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	for _, a := range APIs {
		if a.XR == gvk {
			return a, nil
		}
	}
	served := make([]string, 0, len(APIs))
	for _, a := range APIs {
		served = append(served, a.XR.GroupVersion().String()+", Kind="+a.XR.Kind)
	}
	return API{}, fmt.Errorf("the function serves %s, not %s, Kind=%s", strings.Join(served, " or "), apiVersion, kind)
}

// GroupVersion is the apiVersion this API composes a built apiVersion as.
func (a API) GroupVersion(built string) (schema.GroupVersion, error) {
	v, ok := a.Composes[built]
	if !ok {
		return schema.GroupVersion{}, fmt.Errorf("the %s API composes no %s", a.Name, built)
	}
	return schema.ParseGroupVersion(v)
}

// IsObject tells whether gk is provider-kubernetes' Object in any API.
func IsObject(gk schema.GroupKind) bool {
	if gk.Kind != ObjectKind {
		return false
	}
	return slices.ContainsFunc(APIs, func(a API) bool {
		gv, err := a.GroupVersion(Kubernetes)
		return err == nil && gv.Group == gk.Group
	})
}

// Compose turns a resource built in the claim API's kinds into what this
// API composes: its apiVersion, its namespace (the XR's, for a namespaced
// XR; namespace is ignored otherwise), and its providerConfigRef's kind.
// The managed resources' forProvider is the same in both scopes for every
// field the builders set, which this package's tests hold against the
// namespaced provider types.
func (a API) Compose(o runtime.Object, namespace string) (*composed.Unstructured, error) {
	cd, err := convert.Composed(o)
	if err != nil {
		return nil, err
	}
	gv, err := a.GroupVersion(cd.GetAPIVersion())
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", cd.GetKind(), cd.GetName(), err)
	}
	cd.SetAPIVersion(gv.String())
	if !a.Namespaced {
		return cd, nil
	}
	cd.SetNamespace(namespace)
	spec, _ := cd.Object["spec"].(map[string]any)
	if ref, ok := spec["providerConfigRef"].(map[string]any); ok {
		ref["kind"] = a.ProviderConfigKind
	}
	return cd, nil
}

// An XR is the composite one call composes for: its API, and where it
// lives.
type XR struct {
	API API
	// Namespace is the XR's namespace; empty for a cluster-scoped XR.
	Namespace string
	Name      string
	// UID is the XR's metadata.uid, which Crossplane writes into the
	// controller reference of everything the XR composes.
	UID string
}

// Controls tells whether o is x's own: its controller reference names x's
// kind, name and UID, and it lives where x composes (x's namespace, for a
// namespaced XR). Crossplane sets that reference on everything it composes
// for x, and passes as observed, beside those, any object of x's namespace
// that x's spec.crossplane.resourceRefs name with no controller at all
// (Crossplane v2.4.2 composition_functions.go, ObserveComposedResources, which
// skips only objects another XR controls): a tenant writes those. Labels and
// annotations are anyone's to write; the UID is not.
func (x XR) Controls(o metav1.Object) bool {
	if x.UID == "" || (x.API.Namespaced && o.GetNamespace() != x.Namespace) {
		return false
	}
	c := metav1.GetControllerOfNoCopy(o)
	if c == nil {
		return false
	}
	gv, err := schema.ParseGroupVersion(c.APIVersion)
	return err == nil && gv.Group == x.API.XR.Group && c.Kind == x.API.XR.Kind && c.Name == x.Name && string(c.UID) == x.UID
}

// Read identifies the observed XR.
func Read(xr map[string]any) (XR, error) {
	str := func(m map[string]any, k string) string { v, _ := m[k].(string); return v }
	md, _ := xr["metadata"].(map[string]any)
	api, err := Of(str(xr, "apiVersion"), str(xr, "kind"))
	if err != nil {
		return XR{}, err
	}
	x := XR{API: api, Namespace: str(md, "namespace"), Name: str(md, "name"), UID: str(md, "uid")}
	if api.Namespaced && x.Namespace == "" {
		return XR{}, fmt.Errorf("a %s %s has no namespace", api.XR.Kind, x.Name)
	}
	return x, nil
}

// Compose turns a resource built in the claim API's kinds into what this
// XR composes.
func (x XR) Compose(o runtime.Object) (*composed.Unstructured, error) {
	return x.API.Compose(o, x.Namespace)
}
