// Package nodepools builds the two Karpenter node pools as patches over the
// GitOps base the project ships (examples/gitops/nodes): NodePools
// (karpenter.sh/v1) and EC2NodeClasses (karpenter.k8s.aws/v1), each field
// typed and built as data. The base holds what every pool shares; the patches
// hold what the claim and the platform choose.
package nodepools

import "github.com/do-now/function-karpenter/apis/input/v1beta1"

// The subset of Karpenter v1's API the patches set. Field names and JSON
// keys follow karpenter.sh/v1 NodePool and karpenter.k8s.aws/v1
// EC2NodeClass; the module cannot import Karpenter's Go API (it needs a
// newer Go than the rest of the project), and tests validate the built
// objects against Karpenter's own CRDs instead.

type objectMeta struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

type nodePool struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Metadata   objectMeta   `json:"metadata"`
	Spec       nodePoolSpec `json:"spec"`
}

type nodePoolSpec struct {
	Template   nodeClaimTemplate `json:"template"`
	Limits     map[string]string `json:"limits"`
	Disruption disruption        `json:"disruption"`
}

type nodeClaimTemplate struct {
	Metadata templateMeta       `json:"metadata"`
	Spec     nodeClaimTemplSpec `json:"spec"`
}

type templateMeta struct {
	Labels map[string]string `json:"labels"`
}

type nodeClaimTemplSpec struct {
	Requirements []requirement `json:"requirements"`
	// Taints is always written, empty included, so the patch replaces what
	// the base holds.
	Taints []taint `json:"taints"`
	// StartupTaints are the platform's (the CNI's), always written,
	// empty included, likewise.
	StartupTaints []taint `json:"startupTaints"`
	ExpireAfter   string  `json:"expireAfter"`
	// TerminationGracePeriod is null when the platform sets none, so the
	// patch removes whatever the base holds.
	TerminationGracePeriod *string `json:"terminationGracePeriod"`
}

type requirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values"`
}

type taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

type disruption struct {
	ConsolidateAfter string   `json:"consolidateAfter"`
	Budgets          []budget `json:"budgets"`
}

type budget struct {
	Nodes string `json:"nodes"`
}

type ec2NodeClass struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Metadata   objectMeta       `json:"metadata"`
	Spec       ec2NodeClassSpec `json:"spec"`
}

type ec2NodeClassSpec struct {
	AMISelectorTerms           []amiSelectorTerm           `json:"amiSelectorTerms"`
	SubnetSelectorTerms        []selectorTerm              `json:"subnetSelectorTerms"`
	SecurityGroupSelectorTerms []securityGroupSelectorTerm `json:"securityGroupSelectorTerms"`
	AssociatePublicIPAddress   bool                        `json:"associatePublicIPAddress"`
	UserData                   *string                     `json:"userData,omitempty"`
	Tags                       map[string]string           `json:"tags,omitempty"`
	// CapacityReservationSelectorTerms is left out when empty: Karpenter's
	// CEL rules refuse an empty list (and the base holds none). The
	// platform's terms are written in Karpenter's own shape.
	CapacityReservationSelectorTerms []v1beta1.CapacityReservationSelectorTerm `json:"capacityReservationSelectorTerms,omitempty"`
	Kubelet                          *kubelet                                  `json:"kubelet,omitempty"`
}

type kubelet struct {
	MaxPods int32 `json:"maxPods"`
}

type amiSelectorTerm struct {
	Alias string `json:"alias"`
}

type selectorTerm struct {
	Tags map[string]string `json:"tags"`
}

type securityGroupSelectorTerm struct {
	Tags map[string]string `json:"tags,omitempty"`
	Name string            `json:"name,omitempty"`
}

// nodeConfig is AL2023's nodeadm configuration (node.eks.aws/v1alpha1), of
// which the public pool sets one kubelet flag.
type nodeConfig struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Spec       nodeConfigSpec `json:"spec"`
}

type nodeConfigSpec struct {
	Kubelet kubeletConfig `json:"kubelet"`
}

type kubeletConfig struct {
	Flags []string `json:"flags"`
}

// deletion is a strategic merge patch that removes an object of the base.
type deletion struct {
	Patch      string     `json:"$patch"`
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
}
