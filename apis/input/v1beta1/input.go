// Package v1beta1 holds the function's input: platform configuration set in
// the Composition, never by tenants. package/input/ holds the CRD generated
// from it (go generate ./apis/...).
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.fn.socle.do-now.io
// +versionName=v1beta1
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Group, version and kind of the function input.
const (
	Group      = "karpenter.fn.socle.do-now.io"
	Version    = "v1beta1"
	APIVersion = Group + "/" + Version
	Kind       = "Input"
)

// PodIdentity is where the controller runs in the cluster: the Pod Identity
// association binds this service account to the controller role.
type PodIdentity struct {
	// Namespace of the Karpenter controller.
	// +kubebuilder:default=karpenter
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// ServiceAccount of the Karpenter controller.
	// +kubebuilder:default=karpenter
	// +optional
	ServiceAccount string `json:"serviceAccount,omitempty"`
}

// Input is the platform configuration of function-karpenter.
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=crossplane
type Input struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// IAMPathPrefix is where controller roles live: the role of cluster C is
	// created under <prefix>C/. Must start and end with a slash.
	// +kubebuilder:default="/socle/"
	// +optional
	IAMPathPrefix string `json:"iamPathPrefix,omitempty"`

	// PermissionsBoundaryARN, when set, is attached to every controller role.
	// +optional
	PermissionsBoundaryARN string `json:"permissionsBoundaryArn,omitempty"`

	// ProviderConfigName is the provider-aws ProviderConfig every managed
	// resource uses.
	// +kubebuilder:default=default
	// +optional
	ProviderConfigName string `json:"providerConfigName,omitempty"`

	// Tags are stamped on every AWS resource that takes tags.
	// +optional
	Tags map[string]string `json:"tags,omitempty"`

	// PodIdentity is the controller's namespace and service account.
	// +optional
	PodIdentity PodIdentity `json:"podIdentity,omitempty"`
}
