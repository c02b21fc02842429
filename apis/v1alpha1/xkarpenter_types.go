package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KarpenterVersion is a Karpenter release the function knows. The XRDs
// enumerate internal/versions' table (hack/xrdgen writes the enum): adding a
// version is an entry there.
type KarpenterVersion string

// Cluster identifies the existing EKS cluster Karpenter is installed into.
type Cluster struct {
	// Name of the EKS cluster. Every AWS name is derived from it, so it is
	// limited to what still fits the shortest AWS limit (EventBridge rule
	// names, 64 characters) once the longest suffix is added.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=44
	// +kubebuilder:validation:Pattern=`^[0-9A-Za-z][A-Za-z0-9_-]*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.cluster.name is immutable: changing it would orphan the role and the queue"
	Name string `json:"name"`

	// Region of the EKS cluster, for example eu-west-3. The platform
	// declares it; unset, the claim takes the platform's, and any other
	// value is refused.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]+$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.cluster.region is immutable: changing it would recreate the queue and rules"
	// +optional
	Region string `json:"region,omitempty"`
}

// NodeIdentity is the existing IAM identity Karpenter's nodes run as: the role
// and instance profile of the cluster's bootstrap nodes. No node role is
// created; Karpenter only passes this one to EC2. The platform declares it
// per cluster: a claim may repeat it, and any other value is refused.
type NodeIdentity struct {
	// RoleARN of the existing node role.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^arn:aws(-cn|-us-gov)?:iam::[0-9]{12}:role/([A-Za-z0-9+=,.@_-]+/)*[A-Za-z0-9+=,.@_-]{1,64}$`
	RoleARN string `json:"roleArn,omitempty"`

	// InstanceProfile is the name of the node role's existing instance profile.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9+=,.@_-]+$`
	InstanceProfile string `json:"instanceProfile,omitempty"`
}

// XKarpenterSpec is what a tenant may set.
type XKarpenterSpec struct {
	Cluster Cluster `json:"cluster"`
	// +optional
	NodeIdentity NodeIdentity `json:"nodeIdentity,omitempty"`

	// Version of Karpenter to install. It selects the controller IAM policy
	// and the chart version; unset, the platform's default. Changing it
	// upgrades in order: the policy first, then the controller, then the
	// node pools. A downgrade is refused, but to an earlier patch of the
	// same minor whose CRDs are the same.
	// +optional
	Version KarpenterVersion `json:"version,omitempty"`

	// Pools are the two node pools Karpenter manages.
	// +kubebuilder:default={}
	// +optional
	Pools Pools `json:"pools,omitempty"`
}

// Pools are the private pool, which always exists, and the public one.
type Pools struct {
	// Private nodes: private subnets, the cluster security group, egress
	// through the NAT gateway. The default pool.
	// +kubebuilder:default={}
	// +optional
	Private Pool `json:"private,omitempty"`

	// Public nodes: tainted, in public subnets with a public IP and their own
	// security group, never targeted by load balancers.
	// +kubebuilder:default={}
	// +optional
	Public PublicPool `json:"public,omitempty"`
}

// PublicPool is a pool that can be turned off.
type PublicPool struct {
	// Enabled turns the public pool on or off.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	Pool `json:",inline"`
}

// CapacityType is how EC2 capacity is bought.
// +kubebuilder:validation:Enum=spot;on-demand;reserved
type CapacityType string

// Architecture is a CPU architecture.
// +kubebuilder:validation:Enum=arm64;amd64
type Architecture string

// Pool is what a tenant may choose of one node pool, within the bounds the
// platform sets for the cluster. Unset fields take the platform's defaults:
// every capacity type, architecture, instance category and zone it allows,
// its minimum generation and its consolidation delay.
type Pool struct {
	// CapacityTypes Karpenter may buy: the allowed set, not an order.
	// Karpenter prefers reserved capacity, then spot, then on-demand,
	// whatever the order here. reserved is refused unless the platform
	// offers capacity reservations.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=3
	// +listType=set
	// +optional
	CapacityTypes []CapacityType `json:"capacityTypes,omitempty"`

	// Architectures the instances may have: the allowed set, not an order.
	// Karpenter picks among them by price.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +listType=set
	// +optional
	Architectures []Architecture `json:"architectures,omitempty"`

	// InstanceCategories are EC2 instance families by letter (c, m, r, …),
	// a subset of those the platform allows.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Pattern=`^[a-z]{1,8}$`
	// +listType=set
	// +optional
	InstanceCategories []string `json:"instanceCategories,omitempty"`

	// Zones confine the pool to these availability zones of the cluster's
	// region (names such as eu-west-3a), a subset of those the platform
	// allows.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Pattern=`^[a-z]{2}(-[a-z0-9]+)+[a-z]$`
	// +kubebuilder:validation:items:MaxLength=64
	// +listType=set
	// +optional
	Zones []string `json:"zones,omitempty"`

	// MinGeneration is the oldest instance generation allowed, no older
	// than the platform's minimum.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20
	// +optional
	MinGeneration *int32 `json:"minGeneration,omitempty"`

	// Limits cap the resources of all nodes of the pool together, within
	// the platform's ceiling.
	// +optional
	Limits *PoolLimits `json:"limits,omitempty"`

	// ConsolidateAfter is how long a node must be empty or underused before
	// Karpenter consolidates it, as a duration such as 15m or 1h30m, no
	// shorter than the platform's minimum.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:MaxLength=16
	// +optional
	ConsolidateAfter string `json:"consolidateAfter,omitempty"`

	// AMIAlias pins the AL2023 AMI, as al2023@vYYYYMMDD. al2023@latest is
	// refused unless the platform allows it.
	// +kubebuilder:validation:Pattern=`^al2023@(v[0-9]{8}|latest)$`
	// +optional
	AMIAlias string `json:"amiAlias,omitempty"`
}

// PoolLimits are Kubernetes quantities with platform bounds.
type PoolLimits struct {
	// CPU is the total vCPU of the pool's nodes, at most 10000.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="isQuantity(self) && quantity(self).isGreaterThan(quantity('0')) && quantity(self).isLessThan(quantity('10001'))",message="must be a quantity above 0 and at most 10000"
	CPU string `json:"cpu"`
	// Memory is the total memory of the pool's nodes, at most 40Ti.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="isQuantity(self) && quantity(self).isGreaterThan(quantity('0')) && quantity(self).compareTo(quantity('40Ti')) <= 0",message="must be a quantity above 0 and at most 40Ti"
	Memory string `json:"memory"`
}

// QueueStatus is the observed interruption queue.
type QueueStatus struct {
	Name string `json:"name,omitempty"`
	URL  string `json:"url,omitempty"`
	ARN  string `json:"arn,omitempty"`
}

// XKarpenterStatus is what the function reports back, observed from AWS.
type XKarpenterStatus struct {
	// RoleARN of the controller role, once AWS reports it.
	RoleARN string `json:"roleArn,omitempty"`
	// Queue is the interruption queue, once AWS reports it.
	Queue *QueueStatus `json:"queue,omitempty"`
	// RuleARNs of the EventBridge rules, keyed by rule (health,
	// spot-interruption, rebalance, state-change, capacity-reservation).
	RuleARNs map[string]string `json:"ruleArns,omitempty"`
	// Pools is what Karpenter reports of each pool's NodePool in the
	// claimed cluster, keyed by pool: its nodes, and the CPU and memory
	// they provide against the pool's limits.
	Pools map[string]PoolStatus `json:"pools,omitempty"`
}

// PoolStatus is one pool's NodePool as Karpenter reports it.
type PoolStatus struct {
	// Nodes is how many nodes the pool has.
	Nodes *int64 `json:"nodes,omitempty"`
	// CPU and Memory are what the pool's nodes provide, against its
	// limits.
	CPU    *PoolUsage `json:"cpu,omitempty"`
	Memory *PoolUsage `json:"memory,omitempty"`
}

// PoolUsage is one resource of a pool against its limit.
type PoolUsage struct {
	// Used is what the pool's nodes provide, as Karpenter counts it
	// against the limit.
	Used string `json:"used"`
	// Limit is the pool's spec.limits.
	Limit string `json:"limit,omitempty"`
	// Percent is Used of Limit, rounded down.
	Percent *int64 `json:"percent,omitempty"`
}

// XKarpenter installs Karpenter on an existing EKS cluster, one step at a time.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
type XKarpenter struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   XKarpenterSpec   `json:"spec"`
	Status XKarpenterStatus `json:"status,omitempty"`
}
