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

	// ProviderConfigName is the provider-aws ProviderConfig of the managed
	// resources of every cluster that names none of its own
	// (tenancy.clusters[].awsProviderConfig).
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

	// Versions are the Karpenter versions tenants may use, and the one a
	// claim that names none gets: the platform's pins, required, so a
	// function release that knows a new version offers it to nobody and
	// upgrades nothing until the platform moves them.
	Versions Versions `json:"versions"`

	// Controller pins the Karpenter controller, and the access check, to the
	// cluster's fixed system nodes: the controller must never run on a node
	// it manages.
	// +optional
	Controller Controller `json:"controller,omitempty"`

	// AccessCheck is the preflight that proves, before the controller
	// starts, what Karpenter will do with its role.
	// +optional
	AccessCheck AccessCheck `json:"accessCheck,omitempty"`

	// Monitoring is what ships with the controller: its alert rules, the
	// PodMonitor that scrapes it and its Grafana dashboards.
	// +optional
	Monitoring Monitoring `json:"monitoring,omitempty"`

	// Nodes are the platform's settings of the node pools; their AMI pin
	// (defaultAmiAlias) is required.
	Nodes Nodes `json:"nodes"`

	// Pools are the platform's bounds and defaults of every node pool of
	// every cluster; tenancy.clusters[].pools overrides them field by field.
	// +optional
	Pools Pools `json:"pools,omitempty"`

	// Tenancy declares which tenant namespaces may claim which clusters.
	// Without it every claim is refused.
	// +optional
	Tenancy *Tenancy `json:"tenancy,omitempty"`

	// DeletionGuard, when set, keeps a claim (or namespaced XR) whose cluster
	// still runs Karpenter's nodes from being deleted until its tenant
	// confirms: the function composes a Usage of the XR itself, which
	// Crossplane's webhook holds its deletion with, saying why. Unset, a
	// deletion goes ahead and terminates the nodes.
	// +optional
	DeletionGuard *DeletionGuard `json:"deletionGuard,omitempty"`

	// AdmissionPolicyBinding, when set, names the ValidatingAdmissionPolicyBinding
	// of the tenant admission policy (admission/, which refuses a claim binding
	// an XR it did not create): the function asks Crossplane for it on every
	// call and says on every claim, in its TenantAdmission condition, whether
	// it binds the policy with the Deny action. Set it once the release's
	// admission artifact is applied: that artifact also lets Crossplane read
	// the binding (a ClusterRole aggregated to Crossplane's), without which
	// Crossplane cannot answer and no XR reconciles.
	// +optional
	AdmissionPolicyBinding string `json:"admissionPolicyBinding,omitempty"`

	// SettledInterval is how often Crossplane reconciles a claim that waits
	// on nothing: the TTL of the function's answer for it, which Crossplane
	// requeues the XR after (realtime compositions), as a Go duration from
	// 1m to 1h. A change to what the claim composed reconciles it sooner (a
	// watch event, while Crossplane's circuit breaker lets them through). A
	// longer interval cuts Crossplane core's cost of many settled claims and
	// delays what only a reconcile notices, such as status.pools.
	// +kubebuilder:default="1m"
	// +optional
	SettledInterval string `json:"settledInterval,omitempty"`
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
	// Account the cluster lives in: every ARN of the cluster is built in it,
	// and nodeIdentity.roleArn must be in it.
	// +kubebuilder:validation:Pattern=`^[0-9]{12}$`
	Account string `json:"account"`
	// Region the cluster runs in, such as eu-west-3: the interruption
	// queue, its rules and the Pod Identity association are created there,
	// and the controller is told it. A claim may repeat it, never change it.
	// +kubebuilder:validation:Pattern=`^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]+$`
	Region string `json:"region"`
	// NodeIdentity is the existing role and instance profile the cluster's
	// bootstrap nodes run as: the only role the controller may pass to EC2
	// (iam:PassRole), and the instance profile of every node it launches.
	// A claim may repeat it, never change it.
	NodeIdentity NodeIdentity `json:"nodeIdentity"`
	// AWSProviderConfig is the provider-aws ProviderConfig (a
	// ClusterProviderConfig for namespaced XRs) whose credentials reach the
	// cluster's account: every AWS resource of the cluster is managed
	// through it. Defaults to input.providerConfigName.
	// +optional
	AWSProviderConfig string `json:"awsProviderConfig,omitempty"`
	// Namespaces whose claims may target this cluster. XRs created without
	// a claim are the platform's own and need no namespace.
	// +listType=set
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`
	// KubernetesProviderConfig is the provider-kubernetes ProviderConfig
	// whose credentials reach this cluster's API server: everything the
	// function puts in the cluster (the controller's namespace, its
	// ServiceAccount, the access check and both Flux Kustomizations) is
	// applied there through it, the one credential per cluster. Defaults
	// to the cluster name in Kubernetes form.
	// +optional
	KubernetesProviderConfig string `json:"kubernetesProviderConfig,omitempty"`
	// KubeConfigSecret is no longer used and is ignored: the Kustomizations
	// are applied to the cluster through its ProviderConfig and reconciled
	// by the cluster's own Flux, so no kubeconfig Secret is needed.
	// +optional
	KubeConfigSecret string `json:"kubeConfigSecret,omitempty"`
	// Flux is the cluster's own Flux: the source its Kustomizations build
	// from. Defaults to input.flux.
	// +optional
	Flux *ClusterFlux `json:"flux,omitempty"`
	// Pools override the platform-wide input.pools for this cluster, field
	// by field: a field set here wins, an unset one inherits.
	// +optional
	Pools *Pools `json:"pools,omitempty"`
	// AMIAlias is the pin of this cluster's pools that pin none, in place
	// of input.nodes.defaultAmiAlias, so a fleet moves to a new release in
	// waves. A release serves a fixed set of Kubernetes minors: bump the
	// pin to one that serves the next minor before the cluster's control
	// plane is upgraded.
	// +optional
	AMIAlias string `json:"amiAlias,omitempty"`
	// MinAMIAlias is the oldest AMI release this cluster's pools may run,
	// in place of input.nodes.minAmiAlias.
	// +optional
	MinAMIAlias string `json:"minAmiAlias,omitempty"`
	// StartupTaints are this cluster's CNI startup taints, in place of
	// input.nodes.startupTaints; [] for none.
	// +optional
	StartupTaints []Taint `json:"startupTaints,omitempty"`
	// Controller overrides input.controller's replicas and resources for
	// this cluster, field by field.
	// +optional
	Controller *ControllerSize `json:"controller,omitempty"`
	// DefaultVersion is the Karpenter version of this cluster's claims that
	// name none, in place of input.versions.default, so a fleet upgrades in
	// waves; one of input.versions.allowed.
	// +optional
	DefaultVersion string `json:"defaultVersion,omitempty"`
	// FreezeDisruption is the break-glass: every pool of the cluster gets a
	// disruption budget of 0 nodes, so Karpenter neither consolidates nor
	// replaces drifted nodes, and nodes launched meanwhile never expire.
	// Nodes that exist keep the expiry they were launched with (a
	// NodeClaim's spec is immutable): an expired node is still drained,
	// as its PodDisruptionBudgets allow. Set false to thaw.
	// +optional
	FreezeDisruption bool `json:"freezeDisruption,omitempty"`
}

// NodeIdentity is the existing IAM identity a cluster's nodes run as; no
// node role is created.
type NodeIdentity struct {
	// RoleARN of the existing node role, in the cluster's account.
	// +kubebuilder:validation:Pattern=`^arn:aws(-cn|-us-gov)?:iam::[0-9]{12}:role/([A-Za-z0-9+=,.@_-]+/)*[A-Za-z0-9+=,.@_-]{1,64}$`
	RoleARN string `json:"roleArn"`
	// InstanceProfile is the name of the node role's existing instance
	// profile.
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9+=,.@_-]{1,128}$`
	InstanceProfile string `json:"instanceProfile"`
}

// ClusterFlux is what one cluster's Flux builds the Kustomizations from.
type ClusterFlux struct {
	// SourceRef is the source, in the claimed cluster, holding the GitOps
	// base. Defaults to input.flux.sourceRef, field by field.
	// +optional
	SourceRef *SourceRef `json:"sourceRef,omitempty"`
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

// Flux configures the composed Kustomizations. They are applied to the
// claimed cluster, where its own Flux (source, kustomize and helm
// controllers) reconciles them.
type Flux struct {
	// Namespace of the composed Kustomizations in the claimed cluster.
	// +kubebuilder:default=flux-system
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// SourceRef is the source, in the claimed cluster, holding the GitOps
	// base (examples/gitops/); tenancy.clusters[].flux.sourceRef overrides
	// it per cluster.
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
	// MonitoringPath is the path of the monitoring base in the source
	// (alert rules, PodMonitor, dashboards).
	// +kubebuilder:default="./examples/gitops/monitoring"
	// +optional
	MonitoringPath string `json:"monitoringPath,omitempty"`
	// Interval of reconciliation, and Timeout of one apply with its health
	// checks, as Go durations of at least 1s (as RetryInterval).
	// +kubebuilder:default="10m"
	// +optional
	Interval string `json:"interval,omitempty"`
	// +kubebuilder:default="10m"
	// +optional
	Timeout string `json:"timeout,omitempty"`
	// RetryInterval is how soon Flux tries a failed Kustomization again
	// (its spec.retryInterval), as a Go duration of at least 1s (Flux's
	// CRDs take ms, s, m and h; a shorter retry would hammer the claimed
	// cluster's API server): without one,
	// kustomize-controller waits a whole Interval (v1.9.3 api/v1,
	// GetRetryInterval), so a missing namespace or a claimed cluster's
	// outage, once mended, would hold a step for up to ten minutes.
	// +kubebuilder:default="1m"
	// +optional
	RetryInterval string `json:"retryInterval,omitempty"`
	// ServiceAccountName is the ServiceAccount, in Namespace of the claimed
	// cluster, that kustomize-controller impersonates to apply the
	// Kustomizations (their spec.serviceAccountName): what they may change
	// is what the platform grants it. The platform creates it and its RBAC
	// (docs/platform.md). Unset, kustomize-controller applies them with its
	// own identity, or the one its --default-service-account names.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// Controller places the controller and the access check.
type Controller struct {
	// NodeSelector of the system nodes.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations of the system nodes' taints.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// Replicas of the controller, and Resources of each replica:
	// tenancy.clusters[].controller overrides them per cluster. Both must
	// fit the cluster's system nodes beside CoreDNS, the CNI and the
	// DaemonSets: the HelmRelease is Ready only once every replica runs.
	ControllerSize `json:",inline"`
	// FeatureGates are the Karpenter feature gates the platform enables,
	// core (NodeRepair: the chart's settings.featureGates) and AWS
	// (RebootForRepair: settings.awsFeatureGates), for the versions that
	// know them. A gate that needs a permission adds it to the controller
	// policy: RebootForRepair (Karpenter 1.15) adds ec2:RebootInstances on
	// the cluster's own nodes, and needs NodeRepair, without which it does
	// nothing.
	// +listType=set
	// +optional
	FeatureGates []string `json:"featureGates,omitempty"`
	// AWSFeatureGates is what featureGates was called when it held only
	// AWS gates: still read, and merged into it.
	// +listType=set
	// +optional
	AWSFeatureGates []string `json:"awsFeatureGates,omitempty"`
}

// ControllerSize is how many controller replicas run and what each
// requests.
type ControllerSize struct {
	// Replicas of the controller. Default 2, so one survives the loss of
	// a system node; Karpenter elects a leader, the other waits.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=5
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// Resources of each controller replica. Default requests of 500m CPU
	// and 512Mi, limits of 1 CPU and 1Gi: two replicas fit, with the access
	// check, on one 2-vCPU system node (1930m allocatable), where the
	// getting-started guide's 1 CPU requests leave one replica pending. A
	// controller without requests is the first pod evicted from a loaded
	// system node.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// Versions are the platform's choice of Karpenter versions.
type Versions struct {
	// Allowed are the versions tenants may ask for. Required: a version
	// a new function release knows is allowed only once the platform
	// lists it.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	Allowed []string `json:"allowed"`
	// Default is the version of a claim that names none, one of Allowed.
	// Required: a new function release never moves it. Changing it
	// upgrades those claims, in order; a cluster's own defaultVersion
	// moves one cluster at a time.
	// +kubebuilder:validation:MinLength=1
	Default string `json:"default"`
}

// Monitoring says whether and where Karpenter's alert rules (a
// PrometheusRule), its scrape (a PodMonitor) and its Grafana dashboards
// (ConfigMaps labelled grafana_dashboard: "1") are installed in the claimed
// cluster: by a third Kustomization, once the controller's is Ready.
type Monitoring struct {
	// Enabled installs them; on unless set false.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// Namespace they are created in, where the platform's Prometheus and
	// Grafana look; the controller's namespace when empty.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Labels every one of them carries, as the platform's Prometheus
	// selects rules and monitors (kube-prometheus-stack: release: <its
	// release>).
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// NearLimitsRatio is the share of a pool's CPU or memory limit at which
	// the pool is near its limits: the alert fires and the claim's
	// PoolsWithinLimits condition turns False. A decimal in (0, 1].
	// +kubebuilder:default="0.9"
	// +kubebuilder:validation:Pattern=`^(0?\.[0-9]*[1-9][0-9]*|1(\.0+)?)$`
	// +optional
	NearLimitsRatio string `json:"nearLimitsRatio,omitempty"`
	// UpstreamDashboards delivers Karpenter's own capacity and performance
	// dashboards for the controller's version, by reference to the URLs
	// its documentation publishes them at, as grafana-operator
	// GrafanaDashboards; none when unset.
	// +optional
	UpstreamDashboards *UpstreamDashboards `json:"upstreamDashboards,omitempty"`
}

// UpstreamDashboards selects the platform's grafana-operator (v5) Grafana
// instances that import Karpenter's own dashboards.
type UpstreamDashboards struct {
	// InstanceLabels are the labels of the Grafana instances that import
	// them (the GrafanaDashboards' spec.instanceSelector.matchLabels).
	// +kubebuilder:validation:MinProperties=1
	InstanceLabels map[string]string `json:"instanceLabels"`
}

// AccessCheck configures the access check: the preflight Pod that proves,
// under the controller's ServiceAccount, what Karpenter will do with its
// role, before the controller starts.
type AccessCheck struct {
	// Image with the AWS CLI, a POSIX shell and curl, pinned. The final
	// check, which holds an uninstall until EC2 lists no instance of the
	// cluster's, runs in it too.
	// +optional
	Image string `json:"image,omitempty"`
	// BackoffLimit is no longer used: the check is a Pod, run once for
	// what it checks; a failed check is run again from the claim
	// (annotation socle.do-now.io/access-check-run). Kept so existing
	// input stays valid.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	// +optional
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`
	// Attempts is how many Pods the check may take when one fails for a
	// passing cause: no credentials yet (a Pod admitted before EKS
	// propagated the Pod Identity association never gets any), AWS
	// throttling, the deadline, an eviction. Each retry is a new Pod, after
	// a backoff of 15s doubling. A refusal by AWS is never retried. Default 4.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	// +optional
	Attempts *int32 `json:"attempts,omitempty"`
	// ActiveDeadlineSeconds bounds the whole check: the Pod's
	// activeDeadlineSeconds.
	// +kubebuilder:validation:Minimum=30
	// +kubebuilder:validation:Maximum=3600
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
	// MinRunInterval is how long after a check passed a new value of the
	// claim's socle.do-now.io/access-check-run annotation runs it again,
	// as a Go duration from 1m to 24h: sooner, the value waits, and the
	// claim's AccessCheckReady condition says until when. A failed check
	// runs again at once. Each run makes about twenty AWS calls in the
	// cluster's account.
	// +kubebuilder:default="1h"
	// +optional
	MinRunInterval string `json:"minRunInterval,omitempty"`
}

// DeletionGuard is the confirmation a deletion of a request whose cluster
// runs nodes needs.
type DeletionGuard struct {
	// Annotation is the key a tenant sets, on its claim or namespaced XR,
	// to the cluster's name to confirm the deletion of the request and its
	// nodes, such as socle.do-now.io/delete-with-nodes. Set on a claim
	// already being deleted, it is read from the claim itself.
	Annotation string `json:"annotation"`
}

// Nodes are the platform's node pool settings.
type Nodes struct {
	// PrivateSubnetTags select the private subnets, by tags they already
	// have.
	// +optional
	PrivateSubnetTags map[string]string `json:"privateSubnetTags,omitempty"`
	// PublicSubnetTags select the public subnets, likewise.
	// +optional
	PublicSubnetTags map[string]string `json:"publicSubnetTags,omitempty"`
	// SubnetClusterTag, when set, is added to both subnet selectors to scope
	// them to the claimed cluster, for accounts where several clusters' VPCs
	// share a region. Unset, subnets are selected by the tags above alone:
	// no tag is forced on the subnets.
	// +optional
	SubnetClusterTag *SubnetClusterTag `json:"subnetClusterTag,omitempty"`
	// PublicSecurityGroupSuffix names the public nodes' own security group:
	// <cluster><suffix>. Set it to "" on a platform without public nodes:
	// claims that enable their public pool are then refused.
	// +kubebuilder:default="-public-nodes"
	// +optional
	PublicSecurityGroupSuffix *string `json:"publicSecurityGroupSuffix,omitempty"`
	// DefaultAMIAlias is the pinned AMI of pools that do not choose one,
	// where the cluster's tenancy entry pins none (amiAlias), such as
	// al2023@v20260714. Required: a new function release that knows newer
	// releases never moves it, so no node drifts until the platform moves
	// it. A pin the function knows is no release, or serves no AMI for the
	// cluster's Kubernetes minor, is refused.
	// +kubebuilder:validation:MinLength=1
	DefaultAMIAlias string `json:"defaultAmiAlias"`
	// MinAMIAlias is the oldest AMI release any pool may run, such as
	// al2023@v20260505: raise it to force a security patch. A pool pinned
	// below it is refused at its field path (what runs stays; the claim
	// says which release to move to), and so is a platform pin below it.
	// A cluster may set its own (tenancy.clusters[].minAmiAlias). Unset:
	// no minimum.
	// +optional
	MinAMIAlias string `json:"minAmiAlias,omitempty"`
	// StartupTaints are the taints every node starts with and its CNI
	// lifts once it networks the node (Cilium's agent lifts
	// node.cilium.io/agent-not-ready), so no pod lands on a node before
	// its network is up. Required, [] on a CNI that sets none: a node
	// with a taint nothing lifts never takes a pod, and a change drifts
	// every node. A cluster may set its own
	// (tenancy.clusters[].startupTaints).
	StartupTaints []Taint `json:"startupTaints"`
	// AllowLatestAMI lets pools use al2023@latest.
	// +optional
	AllowLatestAMI bool `json:"allowLatestAmi,omitempty"`
	// RootVolumeSize of every node, a Kubernetes quantity.
	// +optional
	RootVolumeSize string `json:"rootVolumeSize,omitempty"`
}

// A Taint of the nodes, as a NodePool's startupTaints take it.
type Taint struct {
	// Key of the taint, a qualified name.
	Key string `json:"key"`
	// Value of the taint.
	// +optional
	Value string `json:"value,omitempty"`
	// Effect of the taint.
	// +kubebuilder:validation:Enum=NoSchedule;PreferNoSchedule;NoExecute
	Effect string `json:"effect"`
}

// ClusterPlaceholder in SubnetClusterTag's key or value stands for the
// claimed cluster's name.
const ClusterPlaceholder = "{cluster}"

// SubnetClusterTag is a tag every subnet of a cluster already carries, such
// as kubernetes.io/cluster/{cluster} (value "*": any) or
// karpenter.sh/discovery={cluster}.
type SubnetClusterTag struct {
	// Key of the tag; {cluster} is replaced by the cluster's name.
	Key string `json:"key"`
	// Value of the tag; {cluster} is replaced by the cluster's name, "*"
	// matches any value.
	// +kubebuilder:default="*"
	// +optional
	Value string `json:"value,omitempty"`
}

// Pools are the platform's bounds and defaults of node pools. Every field is
// optional, so the same shape serves as the platform-wide setting and as a
// cluster's override; the function's own defaults are given per field.
type Pools struct {
	// Allowed are the sets a tenant's pools may narrow, never widen. A pool
	// that sets none of a set gets all of it.
	// +optional
	Allowed AllowedPools `json:"allowed,omitempty"`
	// MinGeneration is the oldest instance generation any pool may use,
	// and the default of pools that set none. Default 6.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20
	// +optional
	MinGeneration *int32 `json:"minGeneration,omitempty"`
	// MinMemory is the memory every node has at least, a quantity in whole
	// MiB: the per-node DaemonSets take ~3.2GiB and smaller instances
	// flapped NotReady. Default 8Gi.
	// +optional
	MinMemory string `json:"minMemory,omitempty"`
	// MaxLimits is the ceiling of each pool's limits. Default cpu 200,
	// memory 800Gi.
	// +optional
	MaxLimits MaxLimits `json:"maxLimits,omitempty"`
	// MaxClusterLimits is the ceiling of the sum of a claim's pools'
	// limits, the most Karpenter may provision in the cluster: without it,
	// each pool reaching maxLimits would make two pools twice the ceiling.
	// Default maxLimits: all pools together no more than one could.
	// +optional
	MaxClusterLimits MaxLimits `json:"maxClusterLimits,omitempty"`
	// MinConsolidateAfter is the shortest consolidation delay a pool may
	// ask for: a fresh node waits for the CNI's startup taint to go, and a
	// shorter delay judged it empty and deleted it in a loop. Default 15m.
	// +optional
	MinConsolidateAfter string `json:"minConsolidateAfter,omitempty"`
	// Defaults of what pools do not set.
	// +optional
	Defaults PoolDefaults `json:"defaults,omitempty"`
	// CapacityReservationSelectorTerms select the capacity reservations
	// every EC2NodeClass may use. Only when they are set may pools use
	// the reserved capacity type.
	// +kubebuilder:validation:MaxItems=30
	// +optional
	CapacityReservationSelectorTerms []CapacityReservationSelectorTerm `json:"capacityReservationSelectorTerms,omitempty"`
	// KubeletMaxPods sets the kubelet's maxPods on every node; 0 keeps
	// Karpenter's ENI-based default. Under an overlay CNI pods use no ENI
	// addresses, and e.g. 110 is right.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	KubeletMaxPods *int32 `json:"kubeletMaxPods,omitempty"`
}

// AllowedPools are the sets pools choose from. An unset list inherits; in a
// cluster's override, an explicitly empty zones list means any zone.
type AllowedPools struct {
	// InstanceCategories are EC2 instance families by letter. Default c, m, r.
	// +listType=set
	// +optional
	InstanceCategories []string `json:"instanceCategories,omitempty"`
	// CapacityTypes Karpenter may buy. Default spot and on-demand, plus
	// reserved when capacityReservationSelectorTerms are set.
	// +listType=set
	// +optional
	CapacityTypes []string `json:"capacityTypes,omitempty"`
	// Architectures of the instances. Default arm64 and amd64.
	// +listType=set
	// +optional
	Architectures []string `json:"architectures,omitempty"`
	// Zones confine every pool to these availability zones (names such as
	// eu-west-3a). Empty: any zone of the cluster's region.
	// +listType=set
	// +optional
	Zones []string `json:"zones,omitempty"`
}

// MaxLimits are ceilings of limits, Kubernetes quantities.
type MaxLimits struct {
	// +optional
	CPU string `json:"cpu,omitempty"`
	// +optional
	Memory string `json:"memory,omitempty"`
}

// PoolDefaults are what every pool gets where it sets nothing.
type PoolDefaults struct {
	// ConsolidateAfter of pools that set none. Default 15m.
	// +optional
	ConsolidateAfter string `json:"consolidateAfter,omitempty"`
	// ExpireAfter of every node, a duration or Never. Default 720h.
	// +optional
	ExpireAfter string `json:"expireAfter,omitempty"`
	// TerminationGracePeriod of every node, at most 24h; unset by default.
	// Once it has passed, Karpenter deletes a draining node's pods even if
	// a PodDisruptionBudget or karpenter.sh/do-not-disrupt blocks them
	// (sigs.k8s.io/karpenter v1.15.0 pkg/apis/v1/nodeclaim.go: it "bypasses
	// any blocked PDBs or the karpenter.sh/do-not-disrupt annotation"), and
	// drift and every expiry (expireAfter) then cycle nodes whatever they
	// run. Unset, Karpenter waits for the pods to drain indefinitely: a
	// stateful pod a PDB protects is never evicted by a disruption, and a
	// node it blocks stays. Set it only where the platform would rather
	// cycle nodes on time than keep such pods up. An uninstall does not
	// rest on it: it waits for every NodeClaim however long.
	// +optional
	TerminationGracePeriod string `json:"terminationGracePeriod,omitempty"`
	// DisruptionBudget is how many of a pool's nodes may be disrupted at
	// once, a count or a percentage. Default 20%.
	// +optional
	DisruptionBudget string `json:"disruptionBudget,omitempty"`
}

// CapacityReservationSelectorTerm selects EC2 capacity reservations, as
// Karpenter's EC2NodeClass takes it: by id, or by tags (and owner).
type CapacityReservationSelectorTerm struct {
	// +optional
	ID string `json:"id,omitempty"`
	// +optional
	OwnerID string `json:"ownerID,omitempty"`
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
}
