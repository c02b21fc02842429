// Package v1beta1 holds the function's input: platform configuration set in
// the Composition, never by tenants. package/input/ holds the CRD generated
// from it (go generate ./apis/...).
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.fn.socle.do-now.io
// +versionName=v1beta1
package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
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

	// Flux is where the Kustomizations that install the controller and its
	// node pools live, and the GitOps source they build from.
	// +optional
	Flux Flux `json:"flux,omitempty"`

	// Controller pins the Karpenter controller, and the access check, to the
	// cluster's fixed system nodes: the controller must never run on a node
	// it manages.
	// +optional
	Controller Controller `json:"controller,omitempty"`

	// AccessCheck is the Job that proves the controller's AWS credentials
	// arrive before the controller starts.
	// +optional
	AccessCheck AccessCheck `json:"accessCheck,omitempty"`

	// Nodes are the platform's settings of the node pools.
	// +optional
	Nodes Nodes `json:"nodes,omitempty"`

	// Tenancy declares which tenant namespaces may claim which clusters.
	// Without it every claim is refused.
	// +optional
	Tenancy *Tenancy `json:"tenancy,omitempty"`
}

// Tenancy is who may claim which cluster.
type Tenancy struct {
	// Clusters that may be claimed.
	// +listType=map
	// +listMapKey=name
	Clusters []TenantCluster `json:"clusters"`
}

// TenantCluster is one EKS cluster tenants may claim Karpenter for.
type TenantCluster struct {
	// Name of the EKS cluster.
	Name string `json:"name"`
	// Account the cluster lives in: a claim naming a node role of another
	// account is refused.
	// +kubebuilder:validation:Pattern=`^[0-9]{12}$`
	Account string `json:"account"`
	// Namespaces whose claims may target this cluster. XRs created without
	// a claim are the platform's own and need no namespace.
	// +listType=set
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`
	// KubernetesProviderConfig is the provider-kubernetes ProviderConfig
	// whose credentials reach this cluster's API server: the controller's
	// namespace, its ServiceAccount and the access check are applied there
	// through it. Defaults to the cluster name in Kubernetes form.
	// +optional
	KubernetesProviderConfig string `json:"kubernetesProviderConfig,omitempty"`
	// KubeConfigSecret is the Secret, in the Flux namespace, holding the
	// kubeconfig (key "value") Flux applies the controller and the node
	// pools to this cluster with. Defaults to <cluster>-kubeconfig, the
	// cluster name in Kubernetes form.
	// +optional
	KubeConfigSecret string `json:"kubeConfigSecret,omitempty"`
}

// SourceRef names the Flux source of the GitOps base.
type SourceRef struct {
	// +kubebuilder:validation:Enum=GitRepository;OCIRepository;Bucket
	// +kubebuilder:default=GitRepository
	// +optional
	Kind string `json:"kind,omitempty"`
	// +kubebuilder:default=flux-system
	// +optional
	Name string `json:"name,omitempty"`
	// +kubebuilder:default=flux-system
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// Flux configures the composed Kustomizations.
type Flux struct {
	// Namespace of the composed Kustomizations.
	// +kubebuilder:default=flux-system
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// SourceRef is the source holding the GitOps base (examples/gitops/).
	// +optional
	SourceRef SourceRef `json:"sourceRef,omitempty"`
	// ControllerPath is the path of the controller base in the source.
	// +kubebuilder:default="./examples/gitops/controller"
	// +optional
	ControllerPath string `json:"controllerPath,omitempty"`
	// NodesPath is the path of the node pools base in the source.
	// +kubebuilder:default="./examples/gitops/nodes"
	// +optional
	NodesPath string `json:"nodesPath,omitempty"`
	// Interval of reconciliation, and Timeout of one apply with its health
	// checks, as Go durations.
	// +kubebuilder:default="10m"
	// +optional
	Interval string `json:"interval,omitempty"`
	// +kubebuilder:default="10m"
	// +optional
	Timeout string `json:"timeout,omitempty"`
}

// Controller places the controller and the access check.
type Controller struct {
	// NodeSelector of the system nodes.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations of the system nodes' taints.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// AccessCheck configures the access-check Job.
type AccessCheck struct {
	// Image with the AWS CLI, pinned.
	// +optional
	Image string `json:"image,omitempty"`
	// BackoffLimit is how many failed attempts the Job retries.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	// +optional
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`
	// ActiveDeadlineSeconds bounds the whole check.
	// +kubebuilder:validation:Minimum=30
	// +kubebuilder:validation:Maximum=3600
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
}

// Nodes are the platform's node pool settings.
type Nodes struct {
	// PrivateSubnetTags select the private subnets; the cluster's discovery
	// tag karpenter.sh/discovery=<cluster> is always added.
	// +optional
	PrivateSubnetTags map[string]string `json:"privateSubnetTags,omitempty"`
	// PublicSubnetTags select the public subnets, likewise.
	// +optional
	PublicSubnetTags map[string]string `json:"publicSubnetTags,omitempty"`
	// PublicSecurityGroupSuffix names the public nodes' own security group:
	// <cluster><suffix>. Set it to "" on a platform without public nodes:
	// claims that enable their public pool are then refused.
	// +kubebuilder:default="-public-nodes"
	// +optional
	PublicSecurityGroupSuffix *string `json:"publicSecurityGroupSuffix,omitempty"`
	// DefaultAMIAlias is the pinned AMI of pools that do not choose one.
	// +optional
	DefaultAMIAlias string `json:"defaultAmiAlias,omitempty"`
	// AllowLatestAMI lets pools use al2023@latest.
	// +optional
	AllowLatestAMI bool `json:"allowLatestAmi,omitempty"`
	// RootVolumeSize of every node, a Kubernetes quantity.
	// +optional
	RootVolumeSize string `json:"rootVolumeSize,omitempty"`
}
