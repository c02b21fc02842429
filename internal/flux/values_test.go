package flux

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/do-now/function-karpenter/internal/cluster"
	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/config/configtest"
	"github.com/do-now/function-karpenter/internal/versions"
)

// The system floor of PRODUCT.md §5 (seed 002): the controller's replicas
// and the checks share one system node of a small cluster with CoreDNS,
// the CNI operator and the per-node DaemonSets, whose memory is a ~3.2 GiB
// slab. The node is the smallest the platform runs: 2 vCPU, and 8 GiB (the
// memory floor under which nodes flapped NotReady).
const (
	floorMilliCPU = 2000
	floorMiB      = 8192
	slabMiB       = 3277 // ~3.2 GiB: the DaemonSets' memory, their requests included
	floorMaxPods  = 110  // the overlay network's maxPods: the most kubelet reserves for
)

// systemPod is a workload on the floor's system node that is not
// Karpenter's: how many of its pods run there and what each requests.
type systemPod struct {
	name     string
	replicas int64
	milliCPU int64
	mib      int64
}

// daemonSets are the per-node DaemonSets' CPU requests; their memory is the
// slab's. A pod requests the larger of its containers' sum and its largest
// init container. Where the docs allow two networkings (docs/platform.md:
// Cilium with pods on VPC addresses, in ENI mode or chained on the Amazon VPC
// CNI), the larger is counted, as is kube-proxy, which Cilium can replace.
// The slab's other agents and exporters (PRODUCT.md §5 names them, not what
// they request) are not counted: nothing read here says.
var daemonSets = []systemPod{
	// EKS's kube-proxy DaemonSet as a cluster returned it (v1.25.6-minimal-
	// eksbuild.1): eksctl-io/eksctl 99984adb pkg/addons/default/testdata/
	// sample-1.25.json, requests cpu 100m; kubernetes v1.35.4 cluster/gce/gci/
	// configure-helper.sh defaults KUBE_PROXY_CPU_REQUEST to 100m too.
	{name: "kube-proxy", replicas: 1, milliCPU: 100},
	// Cilium v1.20.2 (its module zip) install/kubernetes/cilium/values.yaml:
	// the agent's resources {}, its install-cni-binaries init container's
	// cni.resources.requests cpu 100m.
	{name: "cilium", replicas: 1, milliCPU: 100},
	// The same values.yaml: envoy.resources {}.
	{name: "cilium-envoy", replicas: 1},
	// Chained on the Amazon VPC CNI: eksctl-io/eksctl 99984adb pkg/addons/
	// default/assets/aws-node.yaml (v1.23.0), aws-node and aws-eks-nodeagent
	// 25m each, the init container 25m (aws/eks-charts 5239609 stable/
	// aws-vpc-cni/values.yaml, v1.22.4: resources.requests.cpu 25m).
	{name: "aws-node", replicas: 1, milliCPU: 50},
	// The add-on the function needs (README): aws/eks-pod-identity-agent
	// d4dc0f3f charts/eks-pod-identity-agent/values.yaml (chart 1.2.0),
	// resources {}.
	{name: "eks-pod-identity-agent", replicas: 1},
}

// systemDeployments are the Deployments beside Karpenter on the system node.
var systemDeployments = []systemPod{
	// EKS's CoreDNS (v1.14.3-eksbuild.11): eksctl-io/eksctl 99984adb
	// pkg/addons/default/assets/coredns-1.36.json, 2 replicas requesting cpu
	// 100m and memory 70Mi, with a preferred (not required) anti-affinity:
	// on a floor of one system node both run there. AWS's EKS user guide
	// (managing-coredns): "two replicas of the CoreDNS image are deployed by
	// default"; kubernetes v1.35.4 cluster/addons/dns/coredns/coredns.yaml.base
	// requests the same.
	{name: "coredns", replicas: 2, milliCPU: 100, mib: 70},
	// The CNI's operator: Cilium v1.20.2 values.yaml, operator.replicas 2
	// with a required anti-affinity per node (one here), operator.resources {}.
	{name: "cilium-operator", replicas: 1},
}

// allocatable is what the kubelet of an EKS AL2023 node offers pods, as
// nodeadm computes its reservations (awslabs/amazon-eks-ami
// nodeadm/internal/kubelet/config.go at 81fec2e8: getCPUMillicoresToReserve
// reserves 6% of the first core, 1% of the second, 0.5% of the next two,
// 0.25% above; getMemoryMebibytesToReserve 11 MiB per pod plus 255; and
// evictionHard memory.available 100Mi).
func allocatable(milliCPU, mib, maxPods int64) (int64, int64) {
	ranges := []int64{0, 1000, 2000, 4000, milliCPU}
	perTenThousand := []int64{600, 100, 50, 25}
	reserved := int64(0)
	for i, p := range perTenThousand {
		if milliCPU > ranges[i] {
			reserved += (min(milliCPU, ranges[i+1]) - ranges[i]) * p / 10000
		}
	}
	return milliCPU - reserved, mib - (11*maxPods + 255) - 100
}

// podRequests is what the scheduler counts for a pod: the larger of its
// containers' sum and its largest init container, in millicores and bytes.
func podRequests(spec corev1.PodSpec) (int64, int64) {
	var cpu, mem int64
	for _, c := range spec.Containers {
		cpu += c.Resources.Requests.Cpu().MilliValue()
		mem += c.Resources.Requests.Memory().Value()
	}
	for _, c := range spec.InitContainers {
		cpu = max(cpu, c.Resources.Requests.Cpu().MilliValue())
		mem = max(mem, c.Resources.Requests.Memory().Value())
	}
	return cpu, mem
}

// checks is what the access check and the final check request on the system
// node, as step three composes them: the access check's Pod while a run
// lasts, the final check's Deployment, in the same Pod spec, always.
func checks(c *config.Config) (int64, int64) {
	var cpu, mem int64
	for _, m := range cluster.Manifests(c) {
		replicas, spec := int64(1), corev1.PodSpec{}
		switch o := m.(type) {
		case *corev1.Pod:
			spec = o.Spec
		case *appsv1.Deployment:
			spec = o.Spec.Template.Spec
			if o.Spec.Replicas != nil {
				replicas = int64(*o.Spec.Replicas)
			}
		default:
			continue
		}
		pc, pm := podRequests(spec)
		cpu += replicas * pc
		mem += replicas * pm
	}
	return cpu, mem
}

func loadSized(t *testing.T, clusterController map[string]any) *config.Config {
	t.Helper()
	cl := map[string]any{"name": "prod-eu", "account": "111122223333", "region": "eu-west-3",
		"nodeIdentity": map[string]any{"roleArn": "arn:aws:iam::111122223333:role/nodes", "instanceProfile": "nodes"}}
	if clusterController != nil {
		cl["controller"] = clusterController
	}
	in, err := structpb.NewStruct(configtest.Pinned(map[string]any{"tenancy": map[string]any{"clusters": []any{cl}}}))
	if err != nil {
		t.Fatal(err)
	}
	c, errs := config.Load(config.Owner{Name: "platform"}, map[string]any{"cluster": map[string]any{"name": "prod-eu"}}, in)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return c
}

// TestDefaultsFitTheSystemFloor: with the platform's defaults, every
// controller replica the HelmRelease waits for, the access check during a
// run and the final check are schedulable together on the floor's one system
// node, beside CoreDNS, the CNI's operator and the DaemonSets. Karpenter's
// getting-started requests (1 CPU, 1Gi per replica, which main once
// defaulted to) are not, and the test says so. docs/platform.md "The system
// floor" states the test's figures.
func TestDefaultsFitTheSystemFloor(t *testing.T) {
	cpu, mem := allocatable(floorMilliCPU, floorMiB, floorMaxPods)
	if cpu != 1930 {
		t.Fatalf("a 2-vCPU node offers %dm, nodeadm's reservation leaves 1930m", cpu)
	}
	mem -= slabMiB
	var dsCPU, otherCPU, otherMiB int64
	for _, p := range daemonSets {
		dsCPU += p.replicas * p.milliCPU
	}
	for _, p := range systemDeployments {
		otherCPU += p.replicas * p.milliCPU
		otherMiB += p.replicas * p.mib
	}
	c := loadSized(t, nil)
	checkCPU, checkMem := checks(c)
	fits := func(replicas int32, r corev1.ResourceList) (int64, int64, bool) {
		karpenterCPU := int64(replicas)*r.Cpu().MilliValue() + checkCPU
		karpenterMiB := (int64(replicas)*r.Memory().Value() + checkMem) >> 20
		needCPU := karpenterCPU + dsCPU + otherCPU
		needMiB := karpenterMiB + otherMiB
		return needCPU, needMiB, needCPU <= cpu && needMiB <= mem
	}
	v, err := versions.Get(versions.Known()[len(versions.Known())-1])
	if err != nil {
		t.Fatal(err)
	}
	values := ControllerValues(c, v)
	needCPU, needMiB, ok := fits(values.Replicas, values.Controller.Resources.Requests)
	if !ok {
		r := values.Controller.Resources.Requests
		t.Errorf("%d replicas requesting %s CPU and %s, the checks, CoreDNS, the CNI's operator and the DaemonSets need %dm and %dMi; the floor's system node offers %dm and %dMi beside the slab",
			values.Replicas, r.Cpu(), r.Memory(), needCPU, needMiB, cpu, mem)
	}
	karpenterCPU := needCPU - dsCPU - otherCPU
	karpenterMiB := needMiB - otherMiB
	t.Logf("DaemonSets %dm; CoreDNS and the CNI's operator %dm, %dMi; Karpenter's %dm, %dMi: %dm of %dm and %dMi of %dMi",
		dsCPU, otherCPU, otherMiB, karpenterCPU, karpenterMiB, needCPU, cpu, needMiB, mem)
	guide := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	if _, _, ok := fits(2, guide); ok {
		t.Error("two replicas of 1 CPU fit the floor: the floor the test holds is not the one that kept a replica pending")
	}
	doc, err := os.ReadFile("../../docs/platform.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "## The system floor\n")
	section, _, _ = strings.Cut(section, "\n## ")
	section = strings.Join(strings.Fields(section), " ")
	for _, figure := range []string{
		fmt.Sprintf("%dm CPU", cpu), fmt.Sprintf("%dMi beside the slab", mem),
		fmt.Sprintf("%dm of CPU", dsCPU), fmt.Sprintf("%dm and %dMi", otherCPU, otherMiB),
		fmt.Sprintf("%dm and %dMi", karpenterCPU, karpenterMiB),
		fmt.Sprintf("%dm of %dm", needCPU, cpu), fmt.Sprintf("%dMi of %dMi", needMiB, mem),
		fmt.Sprintf("%dm left", cpu-needCPU),
	} {
		if !strings.Contains(section, figure) {
			t.Errorf("docs/platform.md \"The system floor\" does not say %q, as the test counts it", figure)
		}
	}
}

// TestControllerSizePerCluster: a cluster's tenancy entry overrides the
// platform's replicas and resources field by field.
func TestControllerSizePerCluster(t *testing.T) {
	one := ControllerValues(loadSized(t, map[string]any{"replicas": 1}), versions.All[0])
	if one.Replicas != 1 {
		t.Errorf("replicas %d, want the cluster's 1", one.Replicas)
	}
	if got, want := one.Controller.Resources.Requests.Cpu().String(), "500m"; got != want {
		t.Errorf("requests cpu %s, want the platform's %s: the cluster set only replicas", got, want)
	}
	big := ControllerValues(loadSized(t, map[string]any{"resources": map[string]any{"requests": map[string]any{"cpu": "2"}}}), versions.All[0])
	if big.Replicas != 2 || big.Controller.Resources.Requests.Cpu().String() != "2" {
		t.Errorf("replicas %d, requests %v: want the platform's 2 replicas and the cluster's 2 CPU", big.Replicas, big.Controller.Resources.Requests)
	}
}
