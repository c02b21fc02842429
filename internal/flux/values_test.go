package flux

import (
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/do-now/function-karpenter/internal/cluster"
	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/config/configtest"
	"github.com/do-now/function-karpenter/internal/versions"
)

// The system floor of PRODUCT.md §5 (seed 002): the controller's replicas
// and the access check share one system node of a small cluster with
// CoreDNS, the CNI operator and a ~3.2 GiB per-node DaemonSet slab. The
// node is the smallest the platform runs: 2 vCPU, and 8 GiB (the memory
// floor under which nodes flapped NotReady).
const (
	floorMilliCPU = 2000
	floorMiB      = 8192
	slabMiB       = 3277 // ~3.2 GiB
	floorMaxPods  = 110  // the overlay network's maxPods: the most kubelet reserves for
)

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
// controller replica the HelmRelease waits for, and the access check, are
// schedulable together on the floor's one system node, beside its
// DaemonSet slab. Karpenter's getting-started requests (1 CPU, 1Gi per
// replica, which main once defaulted to) are not, and the test says so.
func TestDefaultsFitTheSystemFloor(t *testing.T) {
	cpu, mem := allocatable(floorMilliCPU, floorMiB, floorMaxPods)
	if cpu != 1930 {
		t.Fatalf("a 2-vCPU node offers %dm, nodeadm's reservation leaves 1930m", cpu)
	}
	fits := func(replicas int32, r corev1.ResourceList) (int64, int64, bool) {
		check := cluster.AccessCheckResources().Requests
		needCPU := int64(replicas)*r.Cpu().MilliValue() + check.Cpu().MilliValue()
		needMiB := (int64(replicas)*r.Memory().Value() + check.Memory().Value()) >> 20
		return needCPU, needMiB, needCPU <= cpu && needMiB <= mem-slabMiB
	}
	v, err := versions.Get(versions.Known()[len(versions.Known())-1])
	if err != nil {
		t.Fatal(err)
	}
	values := ControllerValues(loadSized(t, nil), v)
	if needCPU, needMiB, ok := fits(values.Replicas, values.Controller.Resources.Requests); !ok {
		t.Errorf("%d replicas requesting %v and the access check need %dm and %dMi; the floor's system node offers %dm and %dMi beside its DaemonSets",
			values.Replicas, values.Controller.Resources.Requests, needCPU, needMiB, cpu, mem-slabMiB)
	} else {
		t.Logf("the defaults take %dm of %dm and %dMi of %dMi on the floor's system node, leaving the rest for CoreDNS and the CNI operator", needCPU, cpu, needMiB, mem-slabMiB)
	}
	guide := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	if _, _, ok := fits(2, guide); ok {
		t.Error("two replicas of 1 CPU fit the floor: the floor the test holds is not the one that kept a replica pending")
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
