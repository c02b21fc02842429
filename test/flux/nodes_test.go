package flux

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/mail"
	"slices"
	"strings"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/do-now/function-karpenter/internal/cluster"
	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/flux"
	"github.com/do-now/function-karpenter/internal/nodepools"
	"github.com/do-now/function-karpenter/internal/versions"
)

// What the example claim (examples/xr.yaml) and the example Composition's
// input (apis/composition.yaml) say.
const (
	exampleCluster         = "prod-eu"
	exampleRegion          = "eu-west-3"
	exampleInstanceProfile = "prod-eu-bootstrap-nodes"
)

// Karpenter's CRDs the node pools must pass.
var karpenterCRDs = []string{
	"pkg/apis/crds/karpenter.sh_nodepools.yaml",
	"pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml",
}

// karpenterSchemas are Karpenter v's CRDs.
func karpenterSchemas(t *testing.T, v versions.Version) crdSchemas {
	t.Helper()
	m := karpenterModule(t, v.Module)
	crds := make([][]byte, len(karpenterCRDs))
	for i, f := range karpenterCRDs {
		crds[i] = m.file(t, f)
	}
	return loadCRDs(t, crds...)
}

// pool is what one node pool should come out as.
type pool struct {
	capacityTypes    []string
	architectures    []string
	categories       []string
	generationGt     string
	memoryGt         string
	zones            []string
	cpu, memory      string
	consolidateAfter string
	amiAlias         string
}

// nodes is what the nodes Kustomization should make Flux apply.
type nodes struct {
	private pool
	// public is nil when the claim turned the public pool off.
	public              *pool
	privateSubnetTags   map[string]string
	publicSubnetTags    map[string]string
	publicSecurityGroup string
	rootVolumeSize      string
	// subnetClusterTag is the platform's tag scoping subnets to the
	// cluster, added to both selectors; none by default.
	subnetClusterTag map[string]string
	// tags are the platform's tags, which every EC2NodeClass carries.
	tags map[string]string
	// The platform's pool policy every pool follows.
	expireAfter, terminationGracePeriod, budget string
	reservations                                []reservationTerm
	kubelet                                     *kubelet
	// startupTaints are the platform's (its CNI's), on every pool.
	startupTaints []taint
}

// defaultNodes is what the example claim and input become: Spot and
// Graviton first, families c/m/r of generation 6 or later, pinned AL2023.
func defaultNodes() nodes {
	p := pool{
		capacityTypes:    []string{"spot", "on-demand"},
		architectures:    []string{"arm64", "amd64"},
		categories:       []string{"c", "m", "r"},
		generationGt:     "5",
		memoryGt:         "8191",
		cpu:              "100",
		memory:           "400Gi",
		consolidateAfter: "15m",
		amiAlias:         "al2023@v20260714",
	}
	public := p
	public.cpu, public.memory = "32", "128Gi"
	return nodes{
		private:             p,
		public:              &public,
		privateSubnetTags:   map[string]string{"kubernetes.io/role/internal-elb": "1"},
		publicSubnetTags:    map[string]string{"kubernetes.io/role/elb": "1"},
		publicSecurityGroup: exampleCluster + "-public-nodes",
		rootVolumeSize:      "50Gi",
		tags:                map[string]string{"managed-by": "crossplane", "platform": "socle"},
		// PRODUCT.md §5: 720h expiry, a 20% budget.
		expireAfter:            "720h",
		terminationGracePeriod: "", // unset by default: the patch writes null
		budget:                 "20%",
		// The example platform's pods take ENI addresses: Karpenter's
		// ENI-based max pods stands.
		kubelet: nil,
		// The example platform runs Cilium, whose agent lifts this taint.
		startupTaints: []taint{{Key: "node.cilium.io/agent-not-ready", Value: "true", Effect: "NoExecute"}},
	}
}

// trace is what every node of a pool and its instance carry: the example
// claim team-a/karpenter, the cluster and the pool.
func trace(pool string) map[string]string {
	return map[string]string{
		"socle.do-now.io/tenant":    "team-a",
		"socle.do-now.io/claim":     "karpenter",
		"socle.do-now.io/cluster":   exampleCluster,
		"socle.do-now.io/node-pool": pool,
	}
}

func (n nodes) nodePool(name string, p pool) nodePool {
	taints := []taint{}
	if name == "public" {
		taints = []taint{{Key: "socle.do-now.io/node-pool", Value: "public", Effect: "NoSchedule"}}
	}
	np := nodePool{APIVersion: "karpenter.sh/v1", Kind: "NodePool", Metadata: objectMeta{Name: name}}
	np.Spec.Template.Metadata.Labels = trace(name)
	reqs := []requirement{
		{Key: "karpenter.sh/capacity-type", Operator: "In", Values: p.capacityTypes},
		{Key: "kubernetes.io/arch", Operator: "In", Values: p.architectures},
		{Key: "kubernetes.io/os", Operator: "In", Values: []string{"linux"}},
		{Key: "karpenter.k8s.aws/instance-category", Operator: "In", Values: p.categories},
		{Key: "karpenter.k8s.aws/instance-generation", Operator: "Gt", Values: []string{p.generationGt}},
		{Key: "karpenter.k8s.aws/instance-memory", Operator: "Gt", Values: []string{p.memoryGt}},
	}
	if p.zones != nil {
		reqs = append(reqs, requirement{Key: "topology.kubernetes.io/zone", Operator: "In", Values: p.zones})
	}
	np.Spec.Template.Spec = nodeClaimSpec{
		NodeClassRef:           nodeClassRef{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: name},
		Requirements:           reqs,
		Taints:                 taints,
		StartupTaints:          n.startupTaints,
		ExpireAfter:            n.expireAfter,
		TerminationGracePeriod: n.terminationGracePeriod,
	}
	np.Spec.Limits = map[string]string{"cpu": p.cpu, "memory": p.memory}
	np.Spec.Disruption = disruption{
		ConsolidationPolicy: "WhenEmptyOrUnderutilized",
		ConsolidateAfter:    p.consolidateAfter,
		Budgets:             []budget{{Nodes: n.budget}},
	}
	return np
}

func (n nodes) nodeClass(name string, p pool) ec2NodeClass {
	subnets := maps.Clone(n.privateSubnetTags)
	groups := []selectorTerm{{Tags: map[string]string{"aws:eks:cluster-name": exampleCluster}}}
	public := false
	if name == "public" {
		subnets = maps.Clone(n.publicSubnetTags)
		groups = []selectorTerm{{Name: n.publicSecurityGroup}}
		public = true
	}
	maps.Copy(subnets, n.subnetClusterTag)
	tags := maps.Clone(n.tags)
	maps.Copy(tags, trace(name))

	nc := ec2NodeClass{APIVersion: "karpenter.k8s.aws/v1", Kind: "EC2NodeClass", Metadata: objectMeta{Name: name}}
	nc.Spec = ec2NodeClassSpec{
		InstanceProfile:            exampleInstanceProfile,
		AMISelectorTerms:           []amiSelectorTerm{{Alias: p.amiAlias}},
		SubnetSelectorTerms:        []selectorTerm{{Tags: subnets}},
		SecurityGroupSelectorTerms: groups,
		AssociatePublicIPAddress:   &public,
		MetadataOptions: metadataOptions{
			HTTPEndpoint:            "enabled",
			HTTPProtocolIPv6:        "disabled",
			HTTPPutResponseHopLimit: 1,
			HTTPTokens:              "required",
		},
		BlockDeviceMappings:              []blockDeviceMapping{{DeviceName: "/dev/xvda"}},
		Tags:                             tags,
		CapacityReservationSelectorTerms: n.reservations,
		Kubelet:                          n.kubelet,
	}
	ebs := &nc.Spec.BlockDeviceMappings[0].EBS
	ebs.VolumeSize, ebs.VolumeType, ebs.Encrypted, ebs.DeleteOnTermination = n.rootVolumeSize, "gp3", true, true
	return nc
}

// TestNodesKustomizationBuildsValidPools builds the nodes Kustomization for
// each case and each known version, and admits every NodePool and
// EC2NodeClass against that version's CRDs.
func TestNodesKustomizationBuildsValidPools(t *testing.T) {
	for _, v := range versions.All {
		t.Run(v.Version, func(t *testing.T) { buildsValidPools(t, v) })
	}
}

func buildsValidPools(t *testing.T, v versions.Version) {
	schemas := karpenterSchemas(t, v)
	// A platform that selects capacity reservations, by tags and by id, and
	// allows reserved capacity (the example Composition lists its allowed
	// capacity types, which then do not grow by themselves).
	reservations := edits{
		"pools.capacityReservationSelectorTerms": []map[string]any{
			{"tags": map[string]string{"team": "a"}, "ownerID": "111122223333"},
			{"id": "cr-0123456789abcdef0"},
		},
		"pools.allowed.capacityTypes": []string{"spot", "on-demand", "reserved"},
	}
	// What those reservations make of the pools: the public pool, which the
	// claim leaves alone, takes the platform's allowed capacity types, and
	// every EC2NodeClass carries the terms.
	reserved := func(n *nodes) {
		n.public.capacityTypes = []string{"spot", "on-demand", "reserved"}
		n.reservations = []reservationTerm{{Tags: map[string]string{"team": "a"}, OwnerID: "111122223333"}, {ID: "cr-0123456789abcdef0"}}
	}

	cases := map[string]struct {
		reason string
		spec   edits
		input  edits
		want   func(*nodes)
	}{
		"Defaults": {
			reason: "The example claim sets no pool: both pools take the defaults PRODUCT.md names.",
		},
		"ReservedCapacity": {
			reason: "Where the platform selects capacity reservations, a pool may use them, and every EC2NodeClass carries the terms.",
			spec:   edits{"pools.private.capacityTypes": []string{"reserved", "on-demand"}},
			input:  reservations,
			want: func(n *nodes) {
				reserved(n)
				n.private.capacityTypes = []string{"reserved", "on-demand"}
			},
		},
		"OnDemandOnly": {
			reason: "A pool may refuse Spot altogether.",
			spec:   edits{"pools.public.capacityTypes": []string{"on-demand"}},
			want:   func(n *nodes) { n.public.capacityTypes = []string{"on-demand"} },
		},
		"AllCapacityTypes": {
			reason: "All three capacity types together, as the allowed set the claim wrote.",
			spec:   edits{"pools.private.capacityTypes": []string{"spot", "reserved", "on-demand"}},
			input:  reservations,
			want: func(n *nodes) {
				reserved(n)
				n.private.capacityTypes = []string{"spot", "reserved", "on-demand"}
			},
		},
		"Amd64Only": {
			reason: "A pool for workloads without arm64 images runs x86 only.",
			spec:   edits{"pools.private.architectures": []string{"amd64"}},
			want:   func(n *nodes) { n.private.architectures = []string{"amd64"} },
		},
		"Arm64Only": {
			reason: "A pool may run Graviton only.",
			spec:   edits{"pools.public.architectures": []string{"arm64"}},
			want:   func(n *nodes) { n.public.architectures = []string{"arm64"} },
		},
		"Categories": {
			reason: "Instance categories replace the default c/m/r, per pool.",
			spec: edits{
				"pools.private.instanceCategories": []string{"m"},
				"pools.public.instanceCategories":  []string{"c", "m", "r", "t"},
			},
			input: edits{"pools.allowed.instanceCategories": []string{"c", "m", "r", "t"}},
			want: func(n *nodes) {
				n.private.categories = []string{"m"}
				n.public.categories = []string{"c", "m", "r", "t"}
			},
		},
		"MinGeneration": {
			reason: "Generation N or later is the exclusive bound Gt N-1.",
			spec:   edits{"pools.private.minGeneration": 7, "pools.public.minGeneration": 20},
			want: func(n *nodes) {
				n.private.generationGt = "6"
				n.public.generationGt = "19"
			},
		},
		"MinGenerationOne": {
			reason: "The lowest generation a platform may allow gives Gt 0, which Karpenter's rule (a single integer >= 0) accepts.",
			spec:   edits{"pools.private.minGeneration": 1},
			input:  edits{"pools.minGeneration": 1},
			want: func(n *nodes) {
				n.private.generationGt = "0"
				n.public.generationGt = "0"
			},
		},
		"Limits": {
			reason: "CPU and memory limits are passed as the quantities the claim wrote.",
			spec: edits{
				"pools.private.limits": map[string]string{"cpu": "2500m", "memory": "1.5Ti"},
				"pools.public.limits":  map[string]string{"cpu": "8", "memory": "32768Mi"},
			},
			input: edits{"pools.maxLimits.memory": "2Ti"},
			want: func(n *nodes) {
				n.private.cpu, n.private.memory = "2500m", "1.5Ti"
				n.public.cpu, n.public.memory = "8", "32768Mi"
			},
		},
		"LimitsAtTheBounds": {
			reason: "The largest limits a platform may allow still pass Karpenter's schema: one pool at the cluster's ceiling, the other off.",
			spec: edits{
				"pools.private.limits": map[string]string{"cpu": "10000", "memory": "40Ti"},
				"pools.public.enabled": false,
			},
			input: edits{
				"pools.maxLimits":        map[string]string{"cpu": "10000", "memory": "40Ti"},
				"pools.maxClusterLimits": map[string]string{"cpu": "10000", "memory": "40Ti"},
			},
			want: func(n *nodes) {
				n.private.cpu, n.private.memory = "10000", "40Ti"
				n.public = nil
			},
		},
		"ConsolidateAfter": {
			reason: "The consolidation delay takes compound durations, as Karpenter's pattern does.",
			spec: edits{
				"pools.private.consolidateAfter": "1h30m",
				"pools.public.consolidateAfter":  "30s",
			},
			input: edits{"pools.minConsolidateAfter": "30s"},
			want: func(n *nodes) {
				n.private.consolidateAfter = "1h30m"
				n.public.consolidateAfter = "30s"
			},
		},
		"AMIAlias": {
			reason: "Each pool may pin its own AL2023 release.",
			spec: edits{
				"pools.private.amiAlias": "al2023@v20260114",
				"pools.public.amiAlias":  "al2023@v20260403",
			},
			want: func(n *nodes) {
				n.private.amiAlias = "al2023@v20260114"
				n.public.amiAlias = "al2023@v20260403"
			},
		},
		"PlatformDefaultAMIAlias": {
			reason: "Pools that pin nothing take the platform's default alias.",
			input:  edits{"nodes.defaultAmiAlias": "al2023@v20260224"},
			want: func(n *nodes) {
				n.private.amiAlias = "al2023@v20260224"
				n.public.amiAlias = "al2023@v20260224"
			},
		},
		"NoStartupTaints": {
			reason: "A platform whose CNI sets no startup taint says so ([]): the pools start with none, not the example's Cilium taint.",
			input:  edits{"nodes.startupTaints": []any{}},
			want:   func(n *nodes) { n.startupTaints = []taint{} },
		},
		"ClusterStartupTaints": {
			reason: "A cluster on another CNI names its own startup taints, in place of the platform's.",
			input: edits{"tenancy.clusters": []any{map[string]any{
				"name": exampleCluster, "account": "111122223333", "region": "eu-west-3", "namespaces": []any{"team-a"},
				"nodeIdentity":  map[string]any{"roleArn": "arn:aws:iam::111122223333:role/prod-eu-bootstrap-nodes", "instanceProfile": "prod-eu-bootstrap-nodes"},
				"startupTaints": []any{map[string]any{"key": "example.com/cni-not-ready", "effect": "NoSchedule"}},
			}}},
			want: func(n *nodes) { n.startupTaints = []taint{{Key: "example.com/cni-not-ready", Effect: "NoSchedule"}} },
		},
		"FrozenCluster": {
			reason: "The break-glass: a frozen cluster's pools get a budget of 0 and no expiry for the nodes launched meanwhile, admitted by Karpenter's CRDs.",
			input: edits{"tenancy.clusters": []any{map[string]any{
				"name": exampleCluster, "account": "111122223333", "region": "eu-west-3", "namespaces": []any{"team-a"},
				"nodeIdentity":     map[string]any{"roleArn": "arn:aws:iam::111122223333:role/prod-eu-bootstrap-nodes", "instanceProfile": "prod-eu-bootstrap-nodes"},
				"freezeDisruption": true,
			}}},
			want: func(n *nodes) { n.budget, n.expireAfter = "0", "Never" },
		},
		"LatestAllowedByPlatform": {
			reason: "al2023@latest reaches the EC2NodeClass when the platform's input allows it.",
			spec:   edits{"pools.private.amiAlias": "al2023@latest"},
			input:  edits{"nodes.allowLatestAmi": true},
			want:   func(n *nodes) { n.private.amiAlias = "al2023@latest" },
		},
		"BoundedClaim": {
			reason: "A platform that confines pools to zones, raises the memory floor and the pod density, and sets its own grace period, budget and expiry: every pool carries them, and a claim's zones narrow the platform's.",
			spec:   edits{"pools.private.zones": []string{"eu-west-3b"}},
			input: edits{
				"pools.allowed.zones":  []string{"eu-west-3a", "eu-west-3b"},
				"pools.minMemory":      "16Gi",
				"pools.kubeletMaxPods": 250,
				"pools.defaults": map[string]string{
					"expireAfter": "Never", "terminationGracePeriod": "2h30m", "disruptionBudget": "1",
				},
			},
			want: func(n *nodes) {
				n.private.zones = []string{"eu-west-3b"}
				n.public.zones = []string{"eu-west-3a", "eu-west-3b"}
				n.private.memoryGt, n.public.memoryGt = "16383", "16383"
				n.kubelet = &kubelet{MaxPods: 250}
				n.expireAfter, n.terminationGracePeriod, n.budget = "Never", "2h30m", "1"
			},
		},
		"ClusterOverride": {
			reason: "The claimed cluster's override wins field by field over the platform-wide policy.",
			input: edits{
				"pools.defaults.disruptionBudget": "50%",
				"pools.minMemory":                 "4Gi",
				"tenancy.clusters": []map[string]any{{
					"name": exampleCluster, "account": "111122223333", "namespaces": []string{"team-a"}, "region": "eu-west-3",
					"nodeIdentity": map[string]string{"roleArn": "arn:aws:iam::111122223333:role/prod-eu-bootstrap-nodes", "instanceProfile": "prod-eu-bootstrap-nodes"},
					"pools":        map[string]any{"minMemory": "32Gi", "allowed": map[string]any{"zones": []string{"eu-west-3c"}}},
				}},
			},
			want: func(n *nodes) {
				n.budget = "50%"
				n.private.memoryGt, n.public.memoryGt = "32767", "32767"
				n.private.zones, n.public.zones = []string{"eu-west-3c"}, []string{"eu-west-3c"}
			},
		},
		"SubnetClusterTag": {
			reason: "The platform's tag scoping subnets to the cluster is added to both selectors, the cluster's name in place.",
			input:  edits{"nodes.subnetClusterTag": map[string]string{"key": "kubernetes.io/cluster/{cluster}"}},
			want:   func(n *nodes) { n.subnetClusterTag = map[string]string{"kubernetes.io/cluster/" + exampleCluster: "*"} },
		},
		"PublicPoolDisabled": {
			reason: "A claim that turns the public pool off gets neither the public NodePool nor its EC2NodeClass.",
			spec:   edits{"pools.public.enabled": false},
			want:   func(n *nodes) { n.public = nil },
		},
		"PlatformNodeSettings": {
			reason: "The platform's subnet tags, public security group suffix and root volume size reach the EC2NodeClasses.",
			input: edits{
				"nodes.privateSubnetTags":         map[string]string{"network": "private"},
				"nodes.publicSubnetTags":          map[string]string{"network": "public", "tier": "edge"},
				"nodes.publicSecurityGroupSuffix": "-edge",
				"nodes.rootVolumeSize":            "100Gi",
			},
			want: func(n *nodes) {
				n.privateSubnetTags = map[string]string{"network": "private"}
				n.publicSubnetTags = map[string]string{"network": "public", "tier": "edge"}
				n.publicSecurityGroup = exampleCluster + "-edge"
				n.rootVolumeSize = "100Gi"
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want := defaultNodes()
			if tc.want != nil {
				tc.want(&want)
			}
			c := load(t, tc.spec.with("version", v.Version), tc.input)
			k := nodesKustomization(t, c)
			got := byKindName(fluxBuild(t, k))

			wantObjects := []string{"NodePool/private", "EC2NodeClass/private"}
			if want.public != nil {
				wantObjects = append(wantObjects, "NodePool/public", "EC2NodeClass/public")
			}
			if diff := cmp.Diff(wantObjects, keys(got), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Fatalf("\n%s\nbuilt objects: -want, +got:\n%s", tc.reason, diff)
			}
			for _, o := range got {
				schemas.mustAdmit(t, o)
			}

			pools := map[string]pool{"private": want.private}
			if want.public != nil {
				pools["public"] = *want.public
			}
			for name, p := range pools {
				var np nodePool
				decodeStrict(t, got["NodePool/"+name], &np)
				if diff := cmp.Diff(want.nodePool(name, p), np, cmpopts.SortSlices(func(a, b requirement) bool { return a.Key < b.Key })); diff != "" {
					t.Errorf("\n%s\nNodePool %s: -want, +got:\n%s", tc.reason, name, diff)
				}
				var nc ec2NodeClass
				decodeStrict(t, got["EC2NodeClass/"+name], &nc)
				checkUserData(t, tc.reason, name, nc.Spec.UserData)
				nc.Spec.UserData = nil
				if diff := cmp.Diff(want.nodeClass(name, p), nc); diff != "" {
					t.Errorf("\n%s\nEC2NodeClass %s: -want, +got:\n%s", tc.reason, name, diff)
				}
				checkLaunchShape(t, c, nc)
			}
		})
	}
}

// nodesKustomization is step five's Kustomization for a claim, as its
// Object delivers it to the claimed cluster.
func nodesKustomization(t *testing.T, c *config.Config) *kustomizev1.Kustomization {
	t.Helper()
	return kustomization(t, flux.Nodes, c, version(t, c), flux.NodesKustomization)
}

// checkUserData parses a pool's user data: the private pool has none; the
// public pool's is a MIME multi-part document whose one NodeConfig part makes
// the kubelet label the node out of external load balancers.
func checkUserData(t *testing.T, reason, pool string, userData *string) {
	t.Helper()
	if pool != "public" {
		if userData != nil {
			t.Errorf("\n%s\nEC2NodeClass %s: want no userData, got %q", reason, pool, *userData)
		}
		return
	}
	if userData == nil {
		t.Errorf("\n%s\nEC2NodeClass public: want a NodeConfig in userData, got none", reason)
		return
	}
	msg, err := mail.ReadMessage(strings.NewReader(*userData))
	if err != nil {
		t.Fatalf("EC2NodeClass public: userData is not a MIME document: %v\n%s", err, *userData)
	}
	if v := msg.Header.Get("MIME-Version"); v != "1.0" {
		t.Errorf("EC2NodeClass public: userData MIME-Version = %q, want 1.0", v)
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mediaType != "multipart/mixed" || params["boundary"] == "" {
		t.Fatalf("EC2NodeClass public: userData Content-Type = %q (%v), want multipart/mixed with a boundary", msg.Header.Get("Content-Type"), err)
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	var configs []nodeConfig
	for {
		part, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("EC2NodeClass public: cannot read a userData part: %v\n%s", err, *userData)
		}
		if ct := part.Header.Get("Content-Type"); ct != "application/node.eks.aws" {
			t.Errorf("EC2NodeClass public: userData part of type %q, want only application/node.eks.aws", ct)
			continue
		}
		b, err := io.ReadAll(part)
		if err != nil {
			t.Fatal(err)
		}
		var nc nodeConfig
		if err := yaml.UnmarshalStrict(b, &nc); err != nil {
			t.Fatalf("EC2NodeClass public: the NodeConfig part does not decode: %v\n%s", err, b)
		}
		configs = append(configs, nc)
	}
	want := nodeConfig{APIVersion: "node.eks.aws/v1alpha1", Kind: "NodeConfig"}
	want.Spec.Kubelet.Flags = []string{"--node-labels=node.kubernetes.io/exclude-from-external-load-balancers=true"}
	if diff := cmp.Diff([]nodeConfig{want}, configs); diff != "" {
		t.Errorf("\n%s\nEC2NodeClass public: userData NodeConfigs: -want, +got:\n%s", reason, diff)
	}
}

// decodeStrict decodes a built object into a typed struct, refusing any
// field the struct does not know.
func decodeStrict(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	b, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(into); err != nil {
		t.Fatalf("%s %s does not decode into %T: %v\n%s", u.GetKind(), u.GetName(), into, err, b)
	}
}

// keys are m's keys, sorted.
func keys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// checkLaunchShape holds what the preflight's launch template declares of
// the launch (nodepools.Launch) against the EC2NodeClass Flux applies,
// whose metadata options and root volume Karpenter copies into its own
// launch templates: the preflight asks with the EC2NodeClass's values.
func checkLaunchShape(t *testing.T, c *config.Config, nc ec2NodeClass) {
	t.Helper()
	l := nodepools.Launch(c)
	m := nc.Spec.MetadataOptions
	got := nodepools.LaunchShape{
		HTTPEndpoint: m.HTTPEndpoint, HTTPProtocolIPv6: m.HTTPProtocolIPv6, HTTPTokens: m.HTTPTokens,
		HTTPPutResponseHopLimit: int32(m.HTTPPutResponseHopLimit),
	}
	if len(nc.Spec.BlockDeviceMappings) == 1 {
		b := nc.Spec.BlockDeviceMappings[0]
		got.RootDevice, got.VolumeType, got.Encrypted, got.DeleteOnTermination, got.VolumeSize = b.DeviceName, b.EBS.VolumeType, b.EBS.Encrypted, b.EBS.DeleteOnTermination, b.EBS.VolumeSize
	}
	if diff := cmp.Diff(l, got); diff != "" {
		t.Errorf("EC2NodeClass %s: the preflight's launch shape -want, the EC2NodeClass's +got:\n%s", nc.Metadata.Name, diff)
	}
}

// TestPreflightLaunchTypesExist: the instance types the preflight's fleet
// asks for are ones Karpenter knows (v1.15.0's
// pkg/providers/instancetype/zz_generated.bandwidth.go lists every type
// it knows the bandwidth of), for every category the platform allows by
// default, both architectures, and the generations from the default
// minimum up.
func TestPreflightLaunchTypesExist(t *testing.T) {
	src := string(karpenterModule(t, "github.com/aws/karpenter-provider-aws@v1.15.0").file(t, "pkg/providers/instancetype/zz_generated.bandwidth.go"))
	for _, cat := range []string{"c", "m", "r"} {
		for gen := int32(5); gen <= 7; gen++ {
			for _, arch := range []string{"amd64", "arm64"} {
				it := cluster.LaunchType(nodepools.Selection{Categories: []string{cat}, MinGeneration: gen}, arch)
				if !strings.Contains(src, `"`+it+`"`) {
					t.Errorf("the preflight launches %s (%s, generation %d, %s), which Karpenter does not know", it, cat, gen, arch)
				}
			}
		}
	}
}
