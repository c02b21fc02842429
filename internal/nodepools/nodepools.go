package nodepools

import (
	"fmt"
	"maps"
	"strconv"

	"github.com/fluxcd/pkg/apis/kustomize"
	"sigs.k8s.io/yaml"

	"github.com/do-now/function-karpenter/apis/v1alpha1"
	"github.com/do-now/function-karpenter/internal/spec"
)

// Names of the pools, their NodePools and EC2NodeClasses in the base.
const (
	Private = "private"
	Public  = "public"
)

// Labels, taints and tags the pools carry.
const (
	PoolLabel = "socle.do-now.io/node-pool"
	// DiscoveryTag marks the subnets Karpenter may use for a cluster.
	DiscoveryTag = "karpenter.sh/discovery"
	// ClusterSecurityGroupTag is set by EKS on the cluster security group.
	ClusterSecurityGroupTag = "aws:eks:cluster-name"
	// ExcludeFromLoadBalancers keeps load balancers off a node; only the
	// kubelet may set it, hence the NodeConfig flag.
	ExcludeFromLoadBalancers = "node.kubernetes.io/exclude-from-external-load-balancers"
)

// Karpenter's well-known requirement keys.
const (
	capacityTypeKey       = "karpenter.sh/capacity-type"
	archKey               = "kubernetes.io/arch"
	osKey                 = "kubernetes.io/os"
	instanceCategoryKey   = "karpenter.k8s.aws/instance-category"
	instanceGenerationKey = "karpenter.k8s.aws/instance-generation"
)

// Group/version/kinds the patches target.
const (
	nodePoolAPIVersion    = "karpenter.sh/v1"
	nodeClassAPIVersion   = "karpenter.k8s.aws/v1"
	nodePoolKind          = "NodePool"
	nodeClassKind         = "EC2NodeClass"
	nodeConfigAPIVersion  = "node.eks.aws/v1alpha1"
	userDataBoundary      = "//"
	nodeConfigContentType = "application/node.eks.aws"
)

// Patches returns the node pools' patches over the base, in a stable order:
// the private pool's, then the public pool's, or their deletion when the
// claim turned the public pool off.
func Patches(c *spec.Config) ([]kustomize.Patch, error) {
	var docs []any
	docs = append(docs, pool(Private, c.Spec.Pools.Private), nodeClass(c, Private))
	if c.PublicEnabled() {
		docs = append(docs, pool(Public, c.Spec.Pools.Public.Pool), nodeClass(c, Public))
	} else {
		docs = append(docs,
			deletion{Patch: "delete", APIVersion: nodePoolAPIVersion, Kind: nodePoolKind, Metadata: objectMeta{Name: Public}},
			deletion{Patch: "delete", APIVersion: nodeClassAPIVersion, Kind: nodeClassKind, Metadata: objectMeta{Name: Public}})
	}
	patches := make([]kustomize.Patch, 0, len(docs))
	for _, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("cannot marshal node pool patch: %w", err)
		}
		patches = append(patches, kustomize.Patch{Patch: string(b)})
	}
	return patches, nil
}

func pool(name string, p v1alpha1.Pool) nodePool {
	ct := make([]string, len(p.CapacityTypes))
	for i, v := range p.CapacityTypes {
		ct[i] = string(v)
	}
	arch := make([]string, len(p.Architectures))
	for i, v := range p.Architectures {
		arch[i] = string(v)
	}
	taints := []taint{}
	if name == Public {
		taints = append(taints, taint{Key: PoolLabel, Value: Public, Effect: "NoSchedule"})
	}
	return nodePool{
		APIVersion: nodePoolAPIVersion,
		Kind:       nodePoolKind,
		Metadata:   objectMeta{Name: name},
		Spec: nodePoolSpec{
			Template: nodeClaimTemplate{
				Metadata: templateMeta{Labels: map[string]string{PoolLabel: name}},
				Spec: nodeClaimTemplSpec{
					Requirements: []requirement{
						{Key: capacityTypeKey, Operator: "In", Values: ct},
						{Key: archKey, Operator: "In", Values: arch},
						{Key: osKey, Operator: "In", Values: []string{"linux"}},
						{Key: instanceCategoryKey, Operator: "In", Values: p.InstanceCategories},
						// Gt is exclusive: generation N or later is Gt N-1.
						{Key: instanceGenerationKey, Operator: "Gt", Values: []string{strconv.Itoa(int(*p.MinGeneration) - 1)}},
					},
					Taints: taints,
				},
			},
			Limits:     map[string]string{"cpu": p.Limits.CPU, "memory": p.Limits.Memory},
			Disruption: disruption{ConsolidateAfter: p.ConsolidateAfter},
		},
	}
}

func nodeClass(c *spec.Config, name string) ec2NodeClass {
	cluster := c.Spec.Cluster.Name
	n := c.Input.Nodes
	p := c.Spec.Pools.Private
	subnetTags := n.PrivateSubnetTags
	groups := []securityGroupSelectorTerm{{Tags: map[string]string{ClusterSecurityGroupTag: cluster}}}
	var userData *string
	if name == Public {
		p = c.Spec.Pools.Public.Pool
		subnetTags = n.PublicSubnetTags
		groups = []securityGroupSelectorTerm{{Name: cluster + *n.PublicSecurityGroupSuffix}}
		ud := publicUserData()
		userData = &ud
	}
	return ec2NodeClass{
		APIVersion: nodeClassAPIVersion,
		Kind:       nodeClassKind,
		Metadata:   objectMeta{Name: name},
		Spec: ec2NodeClassSpec{
			AMISelectorTerms:           []amiSelectorTerm{{Alias: p.AMIAlias}},
			SubnetSelectorTerms:        []selectorTerm{{Tags: merge(subnetTags, map[string]string{DiscoveryTag: cluster})}},
			SecurityGroupSelectorTerms: groups,
			AssociatePublicIPAddress:   name == Public,
			UserData:                   userData,
			Tags:                       merge(c.Input.Tags, map[string]string{spec.ClusterLabel: cluster, PoolLabel: name}),
		},
	}
}

// publicUserData is the MIME multi-part user data AL2023 nodes read: a
// NodeConfig whose kubelet labels the node so no load balancer targets it.
func publicUserData() string {
	b, err := yaml.Marshal(nodeConfig{
		APIVersion: nodeConfigAPIVersion,
		Kind:       "NodeConfig",
		Spec: nodeConfigSpec{Kubelet: kubeletConfig{Flags: []string{
			"--node-labels=" + ExcludeFromLoadBalancers + "=true",
		}}},
	})
	if err != nil {
		// A struct of strings always marshals.
		panic(err)
	}
	return "MIME-Version: 1.0\n" +
		"Content-Type: multipart/mixed; boundary=\"" + userDataBoundary + "\"\n\n" +
		"--" + userDataBoundary + "\n" +
		"Content-Type: " + nodeConfigContentType + "\n\n" +
		string(b) +
		"--" + userDataBoundary + "--\n"
}

// merge returns a new map with a's entries overridden by b's.
func merge(a, b map[string]string) map[string]string {
	out := make(map[string]string, len(a)+len(b))
	maps.Copy(out, a)
	maps.Copy(out, b)
	return out
}
