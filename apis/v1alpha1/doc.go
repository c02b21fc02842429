// Package v1alpha1 holds the platform API tenants use: the cluster-scoped
// XKarpenter composite and its namespaced Karpenter claim. The XRD in
// apis/definition.yaml is generated from these types (go generate ./apis/...);
// never edit it by hand.
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
