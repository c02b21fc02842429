// Package v1alpha1 holds the platform API tenants use, in its two forms: the
// cluster-scoped XKarpenter composite with its namespaced Karpenter claim
// (apiextensions.crossplane.io/v1, apis/definition.yaml), and the namespaced
// Karpenter XR of Crossplane v2 (apiextensions.crossplane.io/v2, group
// platform.m.socle.do-now.io, apis/definition-namespaced.yaml). Both XRDs
// are generated from these types (go generate ./apis/...), so their spec and
// status are the same; never edit them by hand.
//
// +kubebuilder:object:generate=true
// +groupName=platform.socle.do-now.io
// +versionName=v1alpha1
package v1alpha1

// Group, version and kinds of the platform API. Claims and XRs use these
// exact names; changing them breaks every tenant.
const (
	Group        = "platform.socle.do-now.io"
	Version      = "v1alpha1"
	APIVersion   = Group + "/" + Version
	Kind         = "XKarpenter"
	ClaimKind    = "Karpenter"
	Plural       = "xkarpenters"
	ClaimPlural  = "karpenters"
	DefinitionID = Plural + "." + Group
)

// The namespaced XR: a tenant creates it in its own namespace, without a
// claim. Its group differs from the claim API's so that both XRDs can be
// installed side by side; like them, these names are API.
const (
	NamespacedGroup        = "platform.m.socle.do-now.io"
	NamespacedAPIVersion   = NamespacedGroup + "/" + Version
	NamespacedKind         = "Karpenter"
	NamespacedPlural       = "karpenters"
	NamespacedDefinitionID = NamespacedPlural + "." + NamespacedGroup
)
