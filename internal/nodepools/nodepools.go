package nodepools

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/fluxcd/pkg/apis/kustomize"

	"github.com/do-now/function-karpenter/apis/v1alpha1"
	"github.com/do-now/function-karpenter/internal/config"
)

// Names of the pools, their NodePools and EC2NodeClasses in the base.
const (
	Private = "private"
	Public  = "public"
)

// Pools are the two pools, in the order everything that goes over them
// takes.
var Pools = []string{Private, Public}

// Labels, taints and tags the pools carry.
const (
	PoolLabel = "socle.do-now.io/node-pool"
	// TenantLabel and ClaimLabel trace every node and instance back to the
	// claim that asked for it: its namespace and its name (the XR's, for
	// an XR without a claim).
	TenantLabel = "socle.do-now.io/tenant"
	ClaimLabel  = "socle.do-now.io/claim"
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
	instanceMemoryKey     = "karpenter.k8s.aws/instance-memory"
	zoneKey               = "topology.kubernetes.io/zone"
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
func Patches(c *config.Config) ([]kustomize.Patch, error) {
	var docs []any
	docs = append(docs, pool(c, Private, c.Spec.Pools.Private), nodeClass(c, Private))
	if c.PublicEnabled() {
		docs = append(docs, pool(c, Public, c.Spec.Pools.Public.Pool), nodeClass(c, Public))
	} else {
		docs = append(docs,
			deletion{Patch: "delete", APIVersion: nodePoolAPIVersion, Kind: nodePoolKind, Metadata: objectMeta{Name: Public}},
			deletion{Patch: "delete", APIVersion: nodeClassAPIVersion, Kind: nodeClassKind, Metadata: objectMeta{Name: Public}})
	}
	patches := make([]kustomize.Patch, 0, len(docs))
	for _, d := range docs {
		b, err := toYAML(d)
		if err != nil {
			return nil, fmt.Errorf("cannot marshal node pool patch: %w", err)
		}
		patches = append(patches, kustomize.Patch{Patch: string(b)})
	}
	return patches, nil
}

func pool(c *config.Config, name string, p v1alpha1.Pool) nodePool {
	ct := make([]string, len(p.CapacityTypes))
	for i, v := range p.CapacityTypes {
		ct[i] = string(v)
	}
	arch := make([]string, len(p.Architectures))
	for i, v := range p.Architectures {
		arch[i] = string(v)
	}
	startup := []taint{}
	for _, t := range c.StartupTaints() {
		startup = append(startup, taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
	}
	taints := []taint{}
	if name == Public {
		taints = append(taints, taint{Key: PoolLabel, Value: Public, Effect: "NoSchedule"})
	}
	// Gt is exclusive: generation N or later is Gt N-1, and likewise the
	// memory floor in MiB, the unit Karpenter labels instances with.
	reqs := []requirement{
		{Key: capacityTypeKey, Operator: "In", Values: ct},
		{Key: archKey, Operator: "In", Values: arch},
		{Key: osKey, Operator: "In", Values: []string{"linux"}},
		{Key: instanceCategoryKey, Operator: "In", Values: p.InstanceCategories},
		{Key: instanceGenerationKey, Operator: "Gt", Values: []string{strconv.Itoa(int(*p.MinGeneration) - 1)}},
		{Key: instanceMemoryKey, Operator: "Gt", Values: []string{strconv.FormatInt(c.MinMemoryMiB()-1, 10)}},
	}
	if len(p.Zones) > 0 {
		reqs = append(reqs, requirement{Key: zoneKey, Operator: "In", Values: p.Zones})
	}
	policy := c.Pools.Defaults
	if cl, _ := c.Tenant(); cl.FreezeDisruption {
		// The break-glass. A budget of 0 stops consolidation and drift;
		// expiry is forceful and ignores budgets, reading each NodeClaim's
		// own expireAfter (sigs.k8s.io/karpenter v1.15.0
		// nodeclaim/expiration/controller.go), so only nodes launched while
		// frozen can be spared it. Budgets are not hashed
		// (pkg/apis/v1/nodepool.go, Budget.Nodes hash:"ignore"); expireAfter
		// is: the nodes that exist read as drifted while frozen, which the
		// budget holds, and match again once thawed.
		policy.DisruptionBudget = "0"
		policy.ExpireAfter = "Never"
	}
	var grace *string
	if policy.TerminationGracePeriod != "" {
		grace = &policy.TerminationGracePeriod
	}
	return nodePool{
		APIVersion: nodePoolAPIVersion,
		Kind:       nodePoolKind,
		Metadata:   objectMeta{Name: name},
		Spec: nodePoolSpec{
			Template: nodeClaimTemplate{
				Metadata: templateMeta{Labels: Trace(c, name)},
				Spec: nodeClaimTemplSpec{
					Requirements:           reqs,
					Taints:                 taints,
					StartupTaints:          startup,
					ExpireAfter:            policy.ExpireAfter,
					TerminationGracePeriod: grace,
				},
			},
			Limits: map[string]string{"cpu": p.Limits.CPU, "memory": p.Limits.Memory},
			Disruption: disruption{
				ConsolidateAfter: p.ConsolidateAfter,
				Budgets:          []budget{{Nodes: policy.DisruptionBudget}},
			},
		},
	}
}

// Trace is what every node of a pool and its instance carry, as node labels
// and as EC2 tags: the claim's namespace and name, the cluster and the pool.
func Trace(c *config.Config, pool string) map[string]string {
	t := map[string]string{
		ClaimLabel:          c.Owner.Name,
		config.ClusterLabel: config.KubernetesName(c.Spec.Cluster.Name),
		PoolLabel:           pool,
	}
	if c.Owner.Namespace != "" {
		t[TenantLabel] = c.Owner.Namespace
	}
	return t
}

func nodeClass(c *config.Config, name string) ec2NodeClass {
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
	subnets := maps.Clone(subnetTags)
	if k, v, ok := c.SubnetClusterTag(); ok {
		subnets[k] = v
	}
	var kl *kubelet
	if m := *c.Pools.KubeletMaxPods; m > 0 {
		kl = &kubelet{MaxPods: m}
	}
	return ec2NodeClass{
		APIVersion: nodeClassAPIVersion,
		Kind:       nodeClassKind,
		Metadata:   objectMeta{Name: name},
		Spec: ec2NodeClassSpec{
			AMISelectorTerms:           []amiSelectorTerm{{Alias: p.AMIAlias}},
			SubnetSelectorTerms:        []selectorTerm{{Tags: subnets}},
			SecurityGroupSelectorTerms: groups,
			AssociatePublicIPAddress:   name == Public,
			UserData:                   userData,
			// AWS tags take the cluster's name as EKS spells it.
			Tags:                             merge(c.Input.Tags, Trace(c, name), map[string]string{config.ClusterLabel: cluster}),
			CapacityReservationSelectorTerms: c.Pools.CapacityReservationSelectorTerms,
			Kubelet:                          kl,
		},
	}
}

// publicUserData is the MIME multi-part user data AL2023 nodes read: a
// NodeConfig whose kubelet labels the node so no load balancer targets it.
var publicUserData = sync.OnceValue(func() string {
	b, err := toYAML(nodeConfig{
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
})

// merge returns a new map with each map's entries overriding those of the
// maps before it.
func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

// A Selection is what one pool's EC2NodeClass selects and launches with,
// as the preflight must prove Karpenter will find it: the same terms, read
// from the same EC2NodeClass the pool is patched with.
type Selection struct {
	Pool string
	// SubnetTags select its subnets.
	SubnetTags map[string]string
	// SecurityGroupTags or SecurityGroupName select its security groups.
	SecurityGroupTags map[string]string
	SecurityGroupName string
	// AMIAlias is its pinned AL2023 alias (al2023@vYYYYMMDD or
	// al2023@latest); Architectures the ones it may launch.
	AMIAlias      string
	Architectures []string
	// Tags are what Karpenter tags its instances with, besides its own.
	Tags map[string]string
	// Zones it may launch in (none: any zone of the region), Categories
	// and MinGeneration the instances it may launch, PublicIP whether
	// they get a public address.
	Zones         []string
	Categories    []string
	MinGeneration int32
	PublicIP      bool
	// Spot is whether it may launch Spot instances.
	Spot bool
}

// A LaunchShape is what every EC2NodeClass of the GitOps base
// (examples/gitops/nodes) sets of the launch, which Karpenter puts in each
// launch template (karpenter-provider-aws v1.15.0
// pkg/providers/launchtemplate/types.go, Build): IMDSv2 with a hop limit of
// one, so pods cannot reach the node's credentials, and an encrypted gp3
// root volume. test/flux holds it against the base's EC2NodeClasses.
type LaunchShape struct {
	HTTPEndpoint, HTTPProtocolIPv6, HTTPTokens string
	HTTPPutResponseHopLimit                    int32
	RootDevice, VolumeType                     string
	Encrypted, DeleteOnTermination             bool
	// VolumeSize is input.nodes.rootVolumeSize, as the EC2NodeClass takes
	// it (50Gi).
	VolumeSize string
}

// Launch is the launch shape of every pool of c.
func Launch(c *config.Config) LaunchShape {
	return LaunchShape{
		HTTPEndpoint: "enabled", HTTPProtocolIPv6: "disabled", HTTPTokens: "required", HTTPPutResponseHopLimit: 1,
		RootDevice: "/dev/xvda", VolumeType: "gp3", Encrypted: true, DeleteOnTermination: true,
		VolumeSize: c.Input.Nodes.RootVolumeSize,
	}
}

// Selections are the enabled pools' selections, the private pool first.
func Selections(c *config.Config) []Selection {
	pools := []struct {
		name string
		p    v1alpha1.Pool
	}{{Private, c.Spec.Pools.Private}, {Public, c.Spec.Pools.Public.Pool}}
	if !c.PublicEnabled() {
		pools = pools[:1]
	}
	out := make([]Selection, 0, len(pools))
	for _, p := range pools {
		nc := nodeClass(c, p.name)
		arch := make([]string, len(p.p.Architectures))
		for i, a := range p.p.Architectures {
			arch[i] = string(a)
		}
		s := Selection{
			Pool:          p.name,
			SubnetTags:    nc.Spec.SubnetSelectorTerms[0].Tags,
			AMIAlias:      nc.Spec.AMISelectorTerms[0].Alias,
			Architectures: arch,
			Tags:          nc.Spec.Tags,
			Zones:         p.p.Zones,
			Categories:    p.p.InstanceCategories,
			MinGeneration: *p.p.MinGeneration,
			PublicIP:      nc.Spec.AssociatePublicIPAddress,
			Spot:          slices.Contains(p.p.CapacityTypes, v1alpha1.CapacityType("spot")),
		}
		s.SecurityGroupTags, s.SecurityGroupName = nc.Spec.SecurityGroupSelectorTerms[0].Tags, nc.Spec.SecurityGroupSelectorTerms[0].Name
		out = append(out, s)
	}
	return out
}
