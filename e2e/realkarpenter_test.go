//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	eventbridgetypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/do-now/function-karpenter/internal/ami"
)

// Karpenter's real controller, run out of cluster for a claimed cluster (E2E_KARPENTER, built from
// the module proxy at E2E_KARPENTER_VERSION: hack/e2e.mk), against the shard's AWS emulator. What
// it cannot find there is played by the node-join stand-in (joinNodes) alone: the kubelet of each
// instance it launches, and the CNI lifting the startup taint.

// karpenterEnv is the environment of the controller container the claimed cluster's Flux
// installed (the Deployment karpenter in ns, rendered by Karpenter's chart from the values the
// function composed), each valueFrom resolved as the kubelet resolves it for that container
// (k8s.io/api core/v1 types.go: ObjectFieldSelector, ResourceFieldSelector): what the real
// controller is configured with, read off the cluster rather than written again here.
func (c *claimedCluster) karpenterEnv(ctx context.Context, ns string) (map[string]string, error) {
	d, err := c.kube.AppsV1().Deployments(ns).Get(ctx, "karpenter", metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("the claimed cluster %s holds no Deployment %s/karpenter: %w", c.name, ns, err)
	}
	i := slices.IndexFunc(d.Spec.Template.Spec.Containers, func(k corev1.Container) bool { return k.Name == "controller" })
	if i < 0 {
		return nil, fmt.Errorf("Deployment %s/karpenter has no container controller", ns)
	}
	container := d.Spec.Template.Spec.Containers[i]
	env := map[string]string{}
	for _, e := range container.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env[e.Name] = ns
		case e.ValueFrom.ResourceFieldRef != nil:
			ref := e.ValueFrom.ResourceFieldRef
			kind, name, _ := strings.Cut(ref.Resource, ".")
			list := container.Resources.Limits
			if kind == "requests" {
				list = container.Resources.Requests
			}
			q, ok := list[corev1.ResourceName(name)]
			if !ok {
				return nil, fmt.Errorf("env %s: container controller sets no %s", e.Name, ref.Resource)
			}
			divisor := ref.Divisor
			if divisor.IsZero() {
				divisor = resource.MustParse("1")
			}
			// ceil(q / divisor), as the kubelet's ExtractContainerResourceValue does.
			env[e.Name] = strconv.FormatInt((q.MilliValue()+divisor.MilliValue()-1)/divisor.MilliValue(), 10)
		default:
			return nil, fmt.Errorf("env %s: a valueFrom the suite does not resolve: %+v", e.Name, e.ValueFrom)
		}
	}
	return env, nil
}

// karpenterTail is the end of the log of the Karpenter controller last started for c.
func (c *claimedCluster) karpenterTail() string { return tail(c.karpenterLog, 40) }

// startKarpenter runs Karpenter's real controller bin, of version, for the claimed cluster with the environment
// its installed Deployment gives it (karpenterEnv), changed only where running out of cluster
// needs it: the claimed cluster's admin kubeconfig for the ServiceAccount's token, the Lease of
// its leader election in its own namespace (no in-cluster namespace to default to:
// sigs.k8s.io/karpenter v1.14.3 pkg/operator/options/options.go, LeaderElectionNamespace), ports of
// its own on loopback, and the AWS SDK pointed at the emulator with the credentials of a session
// of the controller's role (roleARN, the composed role's ARN), as EKS Pod Identity gives the Pod:
// moto's STS AssumeRole stands in for the Pod Identity agent, which moto lacks. It returns once
// the controller answers its health probe and holds its leader election's Lease; the controller
// stops when ctx ends.
func (c *claimedCluster) startKarpenter(ctx context.Context, ns, roleARN, bin, version string) (*proc, error) {
	env, err := c.karpenterEnv(ctx, ns)
	if err != nil {
		return nil, err
	}
	if env["AWS_REGION"] == "" {
		// Without it the controller asks IMDS for its region (karpenter-provider-aws v1.14.3
		// pkg/operator/operator.go), which no Pod out of EC2 reaches.
		return nil, fmt.Errorf("the installed controller has no AWS_REGION: %v", env)
	}
	// The Lease its leader election holds (sigs.k8s.io/karpenter v1.15.0
	// pkg/operator/options/options.go, LeaderElectionName; v1.14.3's is the same), and who held
	// it before: a controller started after another leads once it holds the Lease itself.
	lease := env["LEADER_ELECTION_NAME"]
	if lease == "" {
		lease = "karpenter-leader-election"
	}
	heldBy := func() string {
		l, err := c.kube.CoordinationV1().Leases(ns).Get(ctx, lease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	before := heldBy()
	session, err := cp.aws.sts.AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: aws.String(roleARN),
		RoleSessionName: aws.String("eks-" + c.name + "-karpenter")})
	if err != nil {
		return nil, fmt.Errorf("a session of the controller's role %s: %w", roleARN, err)
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	maps.Copy(env, map[string]string{
		"KUBECONFIG":                c.kubeconfig,
		"LEADER_ELECTION_NAMESPACE": ns,
		"METRICS_PORT":              fmt.Sprint(ports[0]),
		"HEALTH_PROBE_PORT":         fmt.Sprint(ports[1]),
		"AWS_ENDPOINT_URL":          cp.aws.endpoint,
		"AWS_ACCESS_KEY_ID":         aws.ToString(session.Credentials.AccessKeyId),
		"AWS_SECRET_ACCESS_KEY":     aws.ToString(session.Credentials.SecretAccessKey),
		"AWS_SESSION_TOKEN":         aws.ToString(session.Credentials.SessionToken),
		"AWS_EC2_METADATA_DISABLED": "true",
	})
	var list []string
	for _, k := range sortedKeys(env) {
		list = append(list, k+"="+env[k])
	}
	p, err := startProc(c.logDir, "karpenter-"+version, list, bin)
	if err != nil {
		return nil, err
	}
	c.karpenterLog = p.log
	go func() { <-ctx.Done(); p.stop(10 * time.Second) }()
	// Ready once its caches synced and its CRDs are served (sigs.k8s.io/karpenter v1.14.3
	// pkg/operator/operator.go, AddReadyzCheck).
	if err := waitHealthy(ctx, 3*time.Minute, "Karpenter's controller healthy", p, fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[1])); err != nil {
		return p, fmt.Errorf("%w\n%s", err, tail(p.log, 30))
	}
	// It acts once it leads: the one before releases the Lease when it stops
	// (LeaderElectionReleaseOnCancel, pkg/operator/operator.go).
	err = waitFor(ctx, 3*time.Minute, "Karpenter's controller leading (Lease "+ns+"/"+lease+")", func() (bool, error) {
		now := heldBy()
		return now != "" && now != before, nil
	})
	if err != nil {
		return p, fmt.Errorf("%w\n%s", err, tail(p.log, 30))
	}
	return p, nil
}

// A network is what the platform's prerequisites hold of a cluster's VPC in the emulator.
type network struct {
	private, public []string // subnet IDs, one per zone
	clusterSG       string   // the cluster security group EKS creates
	publicSG        string   // the public nodes' group the platform creates (<cluster>-public-nodes)
}

// pool is what the pool of that name may launch into: its subnets and security groups.
func (n network) pool(name string) (subnets, groups []string) {
	if name == "public" {
		return n.public, []string{n.publicSG}
	}
	return n.private, []string{n.clusterSG}
}

// seedNetwork creates, in the emulator and the cluster's region, what an EKS cluster's account
// holds before any claim: a VPC with a private and a public subnet in each of zones, tagged as the
// AWS Load Balancer Controller's subnet discovery reads them (kubernetes.io/role/internal-elb and
// kubernetes.io/role/elb, value 1: its docs, latest/deploy/subnet_discovery); the cluster
// security group EKS creates for the cluster (eks-cluster-sg-<cluster>-<id>: the EKS user guide,
// sec-group-reqs), tagged aws:eks:cluster-name with the cluster's name, the tag the platform's
// base selects it by (examples/gitops/nodes/private.yaml); and the platform's security group for
// public nodes, named <cluster><publicSuffix> (the function input's
// nodes.publicSecurityGroupSuffix). Nothing here is read from what the function composed: a
// selector that does not select these fails the test. They are deleted when the test ends, so
// that the next test's selectors find its network alone.
func (a *emulatedAWS) seedNetwork(t *testing.T, cluster, region, publicSuffix string, zones []string) (network, error) {
	ctx := t.Context()
	in := func(o *ec2.Options) { o.Region = region }
	var n network
	vpc, err := a.ec2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.20.0.0/16")}, in)
	if err != nil {
		return n, fmt.Errorf("VPC: %w", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		var errs []error
		for _, g := range []string{n.clusterSG, n.publicSG} {
			if g != "" {
				_, err := a.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(g)}, in)
				errs = append(errs, err)
			}
		}
		for _, s := range slices.Concat(n.private, n.public) {
			_, err := a.ec2.DeleteSubnet(ctx, &ec2.DeleteSubnetInput{SubnetId: aws.String(s)}, in)
			errs = append(errs, err)
		}
		_, err := a.ec2.DeleteVpc(ctx, &ec2.DeleteVpcInput{VpcId: vpc.Vpc.VpcId}, in)
		if err := errors.Join(append(errs, err)...); err != nil {
			t.Errorf("deleting %s's seeded network: %v", cluster, err)
		}
	})
	subnet := func(i int, zone, role string) (string, error) {
		out, err := a.ec2.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, AvailabilityZone: aws.String(region + zone),
			CidrBlock: aws.String(fmt.Sprintf("10.20.%d.0/24", i)), TagSpecifications: tagged(ec2types.ResourceTypeSubnet,
				role, "1", "kubernetes.io/cluster/"+cluster, "shared")}, in)
		if err != nil {
			return "", fmt.Errorf("subnet in %s%s: %w", region, zone, err)
		}
		return aws.ToString(out.Subnet.SubnetId), nil
	}
	for i, zone := range zones {
		private, err := subnet(i, zone, "kubernetes.io/role/internal-elb")
		if err != nil {
			return n, err
		}
		public, err := subnet(100+i, zone, "kubernetes.io/role/elb")
		if err != nil {
			return n, err
		}
		n.private, n.public = append(n.private, private), append(n.public, public)
	}
	group := func(name string, tags ...string) (string, error) {
		out, err := a.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String(name),
			Description: aws.String(name), VpcId: vpc.Vpc.VpcId, TagSpecifications: tagged(ec2types.ResourceTypeSecurityGroup, tags...)}, in)
		if err != nil {
			return "", fmt.Errorf("security group %s: %w", name, err)
		}
		return aws.ToString(out.GroupId), nil
	}
	if n.clusterSG, err = group("eks-cluster-sg-"+cluster+"-0e2e", "aws:eks:cluster-name", cluster); err != nil {
		return n, err
	}
	n.publicSG, err = group(cluster + publicSuffix)
	return n, err
}

// tagged is a TagSpecifications of one resource type with the given key, value pairs.
func tagged(t ec2types.ResourceType, kv ...string) []ec2types.TagSpecification {
	if len(kv) == 0 {
		return nil
	}
	spec := ec2types.TagSpecification{ResourceType: t}
	for i := 0; i+1 < len(kv); i += 2 {
		spec.Tags = append(spec.Tags, ec2types.Tag{Key: aws.String(kv[i]), Value: aws.String(kv[i+1])})
	}
	return []ec2types.TagSpecification{spec}
}

// joinNodes is the node-join stand-in, every second until ctx ends: what cannot run here of an
// instance Karpenter launched, and nothing of Karpenter's own work.
//   - The kubelet registering: for each NodeClaim whose instance the emulator runs, a Node named
//     as the instance's private DNS name (EKS AL2023 nodes' hostname), with the NodeClaim's
//     providerID, labels, taints and startup taints, and the unregistered taint Karpenter's
//     bootstrap has the kubelet register with (sigs.k8s.io/karpenter v1.14.3
//     pkg/apis/v1/taints.go, UnregisteredNoExecuteTaint), and capacity and allocatable as the
//     NodeClaim says the instance type has them. kwok (--manage-all-nodes) then keeps it Ready.
//   - The CNI's agent: once Karpenter registered the Node (it removes the unregistered taint:
//     pkg/controllers/nodeclaim/lifecycle/registration.go), the NodeClaim's startup taints go.
func (c *claimedCluster) joinNodes(ctx context.Context, region string) {
	for ctx.Err() == nil {
		if err := c.joinOnce(ctx, region); err != nil && ctx.Err() == nil {
			fmt.Printf("e2e: claimed cluster %s: node join: %v\n", c.name, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (c *claimedCluster) joinOnce(ctx context.Context, region string) error {
	claims, err := c.dyn.Resource(nodeClaimGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil // no CRD yet
	}
	nodes, err := c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	byProvider := map[string]*corev1.Node{}
	for i := range nodes.Items {
		byProvider[nodes.Items[i].Spec.ProviderID] = &nodes.Items[i]
	}
	for _, nc := range claims.Items {
		providerID, _, _ := unstructured.NestedString(nc.Object, "status", "providerID")
		if providerID == "" || nc.GetDeletionTimestamp() != nil {
			continue
		}
		if node := byProvider[providerID]; node != nil {
			if err := c.liftStartupTaints(ctx, &nc, node); err != nil {
				return err
			}
			continue
		}
		// aws:///ZONE/INSTANCE-ID (karpenter-provider-aws v1.14.3 pkg/utils/utils.go, ParseInstanceID).
		id := providerID[strings.LastIndex(providerID, "/")+1:]
		out, err := cp.aws.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}},
			func(o *ec2.Options) { o.Region = region })
		if err != nil || len(out.Reservations) == 0 || len(out.Reservations[0].Instances) == 0 {
			continue // not (or no longer) in EC2: no kubelet starts
		}
		instance := out.Reservations[0].Instances[0]
		if instance.State == nil || instance.State.Name != ec2types.InstanceStateNameRunning {
			continue
		}
		if err := c.registerNode(ctx, &nc, providerID, aws.ToString(instance.PrivateDnsName)); err != nil {
			return err
		}
	}
	return nil
}

// registerNode creates the Node of NodeClaim nc as its kubelet registers it.
func (c *claimedCluster) registerNode(ctx context.Context, nc *unstructured.Unstructured, providerID, name string) error {
	labels := nc.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[corev1.LabelHostname] = name
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels,
		Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	taints, err := taintsAt(nc, "spec", "taints")
	if err != nil {
		return err
	}
	startup, err := taintsAt(nc, "spec", "startupTaints")
	if err != nil {
		return err
	}
	node.Spec.Taints = append(append(taints, startup...),
		corev1.Taint{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute})
	for field, list := range map[string]*corev1.ResourceList{"capacity": &node.Status.Capacity, "allocatable": &node.Status.Allocatable} {
		m, _, _ := unstructured.NestedStringMap(nc.Object, "status", field)
		*list = corev1.ResourceList{}
		for k, v := range m {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return fmt.Errorf("NodeClaim %s status.%s.%s: %w", nc.GetName(), field, k, err)
			}
			(*list)[corev1.ResourceName(k)] = q
		}
	}
	_, err = c.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err == nil {
		fmt.Printf("e2e: claimed cluster %s: instance %s joined as node %s\n", c.name, providerID, name)
	}
	return err
}

// liftStartupTaints removes, from a Node Karpenter registered, the startup taints of its NodeClaim.
func (c *claimedCluster) liftStartupTaints(ctx context.Context, nc *unstructured.Unstructured, node *corev1.Node) error {
	if node.Labels["karpenter.sh/registered"] != "true" {
		return nil
	}
	startup, err := taintsAt(nc, "spec", "startupTaints")
	if err != nil || len(startup) == 0 {
		return err
	}
	kept := slices.DeleteFunc(slices.Clone(node.Spec.Taints), func(t corev1.Taint) bool {
		return slices.ContainsFunc(startup, func(s corev1.Taint) bool { return s.MatchTaint(&t) })
	})
	if len(kept) == len(node.Spec.Taints) {
		return nil
	}
	node.Spec.Taints = kept
	_, err = c.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	return err
}

// taintsAt reads the taints at path of u.
func taintsAt(u *unstructured.Unstructured, path ...string) ([]corev1.Taint, error) {
	list, _, _ := unstructured.NestedSlice(u.Object, path...)
	var out []corev1.Taint
	for _, t := range list {
		m, _ := t.(map[string]any)
		var taint corev1.Taint
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &taint); err != nil {
			return nil, fmt.Errorf("%s %s %s: %w", u.GetKind(), u.GetName(), strings.Join(path, "."), err)
		}
		out = append(out, taint)
	}
	return out, nil
}

// TestRealKarpenter runs the claim for prod-eu with Karpenter's real controller, built from the
// module proxy (E2E_KARPENTER at E2E_KARPENTER_VERSION), against the real claimed cluster, its
// real Flux, the real provider-kubernetes and the shard's AWS emulator, which the fake
// provider-aws applies the AWS half in. The network the platform's prerequisites hold is seeded in
// the emulator first (seedNetwork); the controller starts once the function's controller step
// is Ready, configured as the installed chart configures it (startKarpenter). The stand-in for
// Karpenter is off (realKarpenter); only the kubelet and the CNI of the nodes it launches are
// played (joinNodes). The platform's input pins prod-eu to the AMI release before the default
// and lets its pools consolidate after 30 s; the claim caps its public pool at 4 vCPU. Each
// scenario asserts what the real controller did:
//  1. both EC2NodeClasses Ready by Karpenter's own validation, resolving the seeded subnets,
//     security groups and instance profile, and the AMIs of the pin (the emulator's seeded public
//     parameters), and the claim Ready through NodeClassesValidated;
//  2. pending pods get nodes: of the private pool when they tolerate no taint, of the public pool
//     when they tolerate its taint and select it; instances the emulator runs in that pool's
//     subnets and security group, of the platform's instance categories and generations, on the
//     pin's AMI, tagged as the pool's EC2NodeClass says; the pods run on them. More pods than the
//     public pool's limits hold stay pending: Karpenter says the limits stop it, launches nothing
//     more, and the claim's PoolsWithinLimits turns False;
//  3. a Spot interruption warning put on the emulator's event bus for one instance reaches
//     Karpenter through the composed rule, target and queue: Karpenter terminates that instance
//     and launches a replacement the pods run on;
//  4. once the public pool's pods are gone, Karpenter consolidates its empty node away after the
//     pool's consolidateAfter, and the claim's PoolsWithinLimits turns True again;
//  5. the platform freezes prod-eu's disruption (tenancy.clusters[].freezeDisruption) and moves
//     its pin to the default release: the EC2NodeClasses resolve its AMIs and Karpenter finds the
//     private nodes drifted, yet replaces none while frozen; thawed, it replaces them (AMIDrift),
//     no more at once than the pool's disruption budget allows;
//  6. the claim asks for the next minor (E2E_KARPENTER_NEXT_VERSION): once the function has
//     upgraded the installed chart, its controller, started as that chart configures it, takes
//     over the nodes the old one launched and disrupts none of them;
//  7. deleting the claim while nodes run: the new controller terminates every instance the old
//     one launched; the final check, listing them with the real AWS CLI against the emulator,
//     lets the uninstall go on once none is left, and the emulator runs none of the cluster's.
func TestRealKarpenter(t *testing.T) {
	timed(t)
	previous, latest := mustSeededReleases(t)
	const consolidateAfter = 30 * time.Second
	r := startRealKarpenter(t, claimAPI, func(cluster map[string]any) {
		cluster["amiAlias"] = ami.Prefix + previous
		cluster["pools"] = map[string]any{"minConsolidateAfter": consolidateAfter.String(),
			"defaults": map[string]any{"consolidateAfter": consolidateAfter.String()}}
	}, func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedStringMap(u.Object, map[string]string{"cpu": "4", "memory": "64Gi"}, "spec", "pools", "public", "limits")
	})
	eu, c, net, region, ns, roleARN := r.cluster, r.karpenter, r.net, r.region, r.ns, r.roleARN
	ctx := t.Context()
	var err error
	var start time.Time

	// 1. The EC2NodeClasses, validated by Karpenter against the emulator.
	walk(t, nil, func() bool { return conditionStatus(c.get(), "Ready") == "True" }, c)
	// The claim can go Ready before it reads the classes' validation: the observe-only Objects of
	// the classes may have been read before Karpenter wrote their status, and provider-kubernetes
	// reads them again on its poll (20 s here), then Crossplane and the function (3 minutes on a
	// busy machine, where one took over a minute).
	c.waitCondition("NodeClassesValidated", "True", converge)
	assertNodeClasses(t, eu, net, previous)

	// 2. Pending pods get nodes: of the private pool when they tolerate no taint, of the public
	// pool when they tolerate its taint and select it.
	const replicas = 3
	for _, pool := range []string{"private", "public"} {
		start = time.Now()
		if err := eu.inflate(ctx, "inflate-"+pool, pool, replicas); err != nil {
			t.Fatal(err)
		}
		nodes := eu.waitRunningOnKarpenterNodes(t, "inflate-"+pool, replicas, 8*time.Minute)
		assertInstances(t, eu, net, region, pool, previous, nodes)
		t.Logf("%d pending pods running on %v %.1fs after their creation", replicas, nodes, time.Since(start).Seconds())
	}
	// The public pool is at its limits (4 vCPU): two pods more stay pending.
	publicClaims, _ := eu.poolNodeClaims(t, "public")
	if err := eu.scale(ctx, "inflate-public", replicas+2); err != nil {
		t.Fatal(err)
	}
	eu.waitLimitsRefusal(t, "inflate-public", "public")
	c.waitCondition("PoolsWithinLimits", "False", converge, "public: cpu")
	if got, _ := eu.poolNodeClaims(t, "public"); !equalSets(got, publicClaims) {
		t.Errorf("at its limits the public pool has NodeClaims %v, had %v: Karpenter launched past the limits", got, publicClaims)
	}
	launched := eu.waitRunningOnKarpenterNodes(t, "inflate-private", replicas, time.Minute)

	// 3. A Spot interruption warning for one of them, through the composed wiring.
	interrupted := launched[0]
	start = time.Now()
	if err := cp.aws.interruptSpot(ctx, region, interrupted.instance); err != nil {
		t.Fatal(err)
	}
	err = waitFor(ctx, 5*time.Minute, "Karpenter to terminate the interrupted instance "+interrupted.instance, func() (bool, error) {
		running, err := cp.aws.runningInstances(ctx, region, eu.name)
		return err == nil && !slices.Contains(running, interrupted.instance), nil
	})
	if err != nil {
		t.Fatalf("%v\nKarpenter's log:\n%s", err, eu.karpenterTail())
	}
	after := eu.waitRunningOnKarpenterNodes(t, "inflate-private", replicas, 8*time.Minute)
	if slices.ContainsFunc(after, func(n karpenterNode) bool { return n.instance == interrupted.instance }) {
		t.Errorf("the pods still run on the interrupted instance %s", interrupted.instance)
	}
	t.Logf("Spot interruption of %s: the pods running on %v %.1fs after the warning", interrupted.instance, after, time.Since(start).Seconds())

	// 4. The public pool's pods go: Karpenter consolidates its empty node away.
	start = time.Now()
	if err := eu.scale(ctx, "inflate-public", 0); err != nil {
		t.Fatal(err)
	}
	err = waitFor(ctx, 5*time.Minute, "Karpenter to consolidate the public pool's empty node", func() (bool, error) {
		left, _ := eu.poolNodeClaims(t, "public")
		return len(left) == 0, nil
	})
	if err != nil {
		t.Fatalf("%v\nKarpenter's log:\n%s", err, eu.karpenterTail())
	}
	if elapsed := time.Since(start); elapsed < consolidateAfter {
		t.Errorf("the public pool's empty node went %.1fs after its pods, before its consolidateAfter %s", elapsed.Seconds(), consolidateAfter)
	}
	t.Logf("the public pool's empty node consolidated %.1fs after its pods went", time.Since(start).Seconds())
	// The public pool is no longer at its limits. The private pool may be near its own: the
	// interrupted node's replacement may be as large as the pool allows (96 of its 100 vCPU in
	// one CI run), which PoolsWithinLimits rightly reports.
	c.wait(converge, "PoolsWithinLimits to name the public pool no more", func() (bool, error) {
		cond := c.condition("PoolsWithinLimits")
		msg, _ := cond["message"].(string)
		return cond["status"] == "True" || cond["reason"] == "NearLimits" && !strings.Contains(msg, "public:"), nil
	})

	// 5. The platform freezes prod-eu's disruption (the break-glass), then moves its pin to the
	// default release: the EC2NodeClasses resolve its AMIs and Karpenter finds the private nodes
	// drifted, yet replaces none while frozen. Thawed, Karpenter drifts them away.
	changeTenancy(t, eu.name, func(cluster map[string]any) { cluster["freezeDisruption"] = true })
	eu.waitFrozen(t, "private", true)
	changeTenancy(t, eu.name, func(cluster map[string]any) { cluster["amiAlias"] = ami.Prefix + latest })
	eu.heldWhileFrozen(t, region, "private", after, amisOf(latest))
	start = time.Now()
	changeTenancy(t, eu.name, func(cluster map[string]any) { delete(cluster, "freezeDisruption") })
	eu.waitFrozen(t, "private", false)
	eu.waitDriftReplaced(t, region, "private", after, latest)
	moved := eu.waitRunningOnKarpenterNodes(t, "inflate-private", replicas, 8*time.Minute)
	assertInstances(t, eu, net, region, "private", latest, moved)
	assertNodeClasses(t, eu, net, latest)
	t.Logf("AMI pin %s -> %s: the pods running on %v %.1fs after the platform's change", previous, latest, moved, time.Since(start).Seconds())

	// 6. The claim moves to the next minor: once the function has upgraded the installed chart,
	// the new controller, started as that chart configures it, takes over the nodes the old one
	// launched and leaves them be.
	start = time.Now()
	var claimsBefore []string
	err = waitFor(ctx, 2*time.Minute, "the drifted NodeClaims of the private pool gone", func() (bool, error) {
		var deleting int
		claimsBefore, deleting = eu.poolNodeClaims(t, "private")
		return deleting == 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	next := r.next
	if err := c.setVersion(next); err != nil {
		t.Fatal(err)
	}
	walk(t, nil, func() bool {
		v := c.condition("VersionReady")
		msg, _ := v["message"].(string)
		return v != nil && v["status"] == "True" && strings.Contains(msg, "Karpenter "+next)
	}, c)
	r.controller.stop(10 * time.Second)
	if _, err := eu.startKarpenter(r.ctx, ns, roleARN, r.nextBin, next); err != nil {
		t.Fatal(err)
	}
	t.Logf("Karpenter %s's controller up %.1fs after the claim asked for it", next, time.Since(start).Seconds())
	eu.holdNodes(t, region, "private", claimsBefore, moved)
	if still := eu.waitRunningOnKarpenterNodes(t, "inflate-private", replicas, time.Minute); !equalSets(nodeNames(still), nodeNames(moved)) {
		t.Errorf("under the new controller the pods run on %v, before on %v", still, moved)
	}
	c.waitCondition("Ready", "True", converge)

	// 7. The uninstall terminates every instance, and the final check lets go once the real AWS
	// CLI lists none.
	c.deleteAndWait()
	eu.assertUninstalled(t, region)
}

// assertUninstalled checks, once a request for c is gone, that the emulator runs none of c's
// instances, and that the final check let the uninstall go on only after listing them with the
// real AWS CLI (emulatedAWSEnv): its log says it listed them under its own identity while the
// request lived, and found none once it was deleted (internal/cluster FinalCheckScript's words).
func (c *claimedCluster) assertUninstalled(t *testing.T, region string) {
	t.Helper()
	running, err := cp.aws.runningInstances(t.Context(), region, c.name)
	if err != nil || len(running) != 0 {
		t.Errorf("after the uninstall the emulator still runs %v of %s's instances (%v)", running, c.name, err)
	}
	// Lines the script printed, whole: the log also starts with the command, the script itself,
	// which holds the same words inside its echo commands.
	logs, _ := filepath.Glob(filepath.Join(c.logDir, "final-check-*.log"))
	said := map[string]bool{}
	var ends strings.Builder
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		for _, line := range strings.Split(string(b), "\n") {
			said[line] = true
		}
		fmt.Fprintf(&ends, "%s:\n%s\n", filepath.Base(l), tail(l, 10))
	}
	for _, want := range []string{"final check: its AWS identity lists the instances", "final check: no instance left, the uninstall goes on"} {
		if !said[want] {
			t.Errorf("the final check did not print %q:\n%s", want, ends.String())
		}
	}
}

// holdNodes checks that a newly started controller leaves the pool's nodes be: for a minute, six
// rounds of Karpenter's disruption controller (sigs.k8s.io/karpenter v1.15.0
// pkg/controllers/disruption/controller.go, pollingPeriod), the pool keeps exactly the NodeClaims
// it had, none deleting nor Drifted, and the instances of nodes run.
func (c *claimedCluster) holdNodes(t *testing.T, region, pool string, claims []string, nodes []karpenterNode) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		list, err := c.dyn.Resource(nodeClaimGVR).List(t.Context(), metav1.ListOptions{LabelSelector: "karpenter.sh/nodepool=" + pool})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, nc := range list.Items {
			names = append(names, nc.GetName())
			if nc.GetDeletionTimestamp() != nil || conditionStatus(&nc, "Drifted") == "True" {
				t.Fatalf("the new controller disrupts NodeClaim %s: %s\nKarpenter's log:\n%s", nc.GetName(), conditionsText(&nc), c.karpenterTail())
			}
		}
		if !equalSets(names, claims) {
			t.Fatalf("the pool %s has NodeClaims %v under the new controller, had %v\nKarpenter's log:\n%s", pool, names, claims, c.karpenterTail())
		}
		running, err := cp.aws.runningInstances(t.Context(), region, c.name)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if !slices.Contains(running, n.instance) {
				t.Fatalf("instance %s of node %s no longer runs under the new controller", n.instance, n.node)
			}
		}
		time.Sleep(5 * time.Second)
	}
}

// A realKarpenterRun is a request for prod-eu whose controller step is Ready, with Karpenter's
// real controller running for it (startRealKarpenter).
type realKarpenterRun struct {
	cluster    *claimedCluster
	karpenter  *karpenter
	net        network // the network seeded in the emulator
	region, ns string  // the cluster's region, the controller's namespace
	roleARN    string  // the composed controller role's
	controller *proc   // the controller, of E2E_KARPENTER_VERSION
	// ctx ends once everything the request composed is gone: the controllers and the node-join
	// stand-in run until then.
	ctx           context.Context
	nextBin, next string // the controller the claim may be upgraded to, and its version
}

// startRealKarpenter starts prod-eu's claimed cluster with Karpenter's stand-in off, seeds its
// network in the emulator, changes the claim API's tenancy entry of prod-eu with tenancy (nil:
// none), creates the request of API a at E2E_KARPENTER_VERSION (mutated by mutate), walks it to
// ControllerReady, and starts Karpenter's real controller and the node-join stand-in.
func startRealKarpenter(t *testing.T, a *api, tenancy func(map[string]any), mutate func(*unstructured.Unstructured)) *realKarpenterRun {
	t.Helper()
	var bin, version string
	r := &realKarpenterRun{}
	for env, into := range map[string]*string{"E2E_KARPENTER": &bin, "E2E_KARPENTER_VERSION": &version,
		"E2E_KARPENTER_NEXT": &r.nextBin, "E2E_KARPENTER_NEXT_VERSION": &r.next} {
		if *into = strings.TrimPrefix(os.Getenv(env), "v"); *into == "" {
			t.Fatalf("%s must be set: run the suite with `make e2e-test`", env)
		}
	}
	waitForKarpenterBuild(t, bin, r.nextBin)
	claimed, _, _ := realClaimedClusters(t, claimedOptions{poll: 20 * time.Second,
		prepare: func(c *claimedCluster) { c.realKarpenter = true }}, "prod-eu")
	r.cluster = claimed["prod-eu"]
	input := platformInput(t, a)
	declared, err := r.cluster.declared()
	if err != nil {
		t.Fatal(err)
	}
	r.region, _ = declared["region"].(string)
	suffix, _, _ := unstructured.NestedString(input, "nodes", "publicSecurityGroupSuffix")
	r.ns, _, _ = unstructured.NestedString(input, "podIdentity", "namespace")
	if r.net, err = cp.aws.seedNetwork(t, r.cluster.name, r.region, suffix, []string{"a", "b", "c"}); err != nil {
		t.Fatalf("seeding prod-eu's network in the emulator: %v", err)
	}
	if tenancy != nil {
		changeTenancy(t, r.cluster.name, tenancy)
	}

	// Registered before the request's deletion, this cleanup runs after it.
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	r.ctx = ctx
	r.karpenter = newKarpenterFrom(t, a, "team-a", "karpenter", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, version, "spec", "version")
		mutate(u)
	})
	walk(t, nil, func() bool { return conditionStatus(r.karpenter.get(), "ControllerReady") == "True" }, r.karpenter)
	resources, _ := r.karpenter.composed()
	r.roleARN, _, _ = unstructured.NestedString(resources["controller-role"].Object, "status", "atProvider", "arn")
	start := time.Now()
	if r.controller, err = r.cluster.startKarpenter(ctx, r.ns, r.roleARN, bin, version); err != nil {
		t.Fatal(err)
	}
	go r.cluster.joinNodes(ctx, r.region)
	t.Logf("Karpenter %s's controller up in %.1fs", version, time.Since(start).Seconds())
	return r
}

// waitForKarpenterBuild waits until Karpenter's controllers bins exist: make e2e-test builds them
// beside the running suite (E2E_KARPENTER_BUILD_LOG, hack/e2e.mk), which on a cold machine takes
// a good part of the suite's first half. It fails at once when that build failed.
func waitForKarpenterBuild(t *testing.T, bins ...string) {
	t.Helper()
	buildLog := os.Getenv("E2E_KARPENTER_BUILD_LOG")
	start := time.Now()
	err := waitFor(t.Context(), 60*time.Minute, fmt.Sprintf("Karpenter's controllers %v built (%s)", bins, buildLog), func() (bool, error) {
		if _, err := os.Stat(buildLog + ".failed"); err == nil {
			return false, fmt.Errorf("their build failed:\n%s", tail(buildLog, 30))
		}
		for _, b := range bins {
			if _, err := os.Stat(b); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Logf("waited %.0fs for Karpenter's controllers to be built", waited.Seconds())
	}
}

// TestRealKarpenterNamespaced runs a namespaced XR for prod-eu with Karpenter's real controller,
// as TestRealKarpenter runs the claim, on the platform's input as shipped: both EC2NodeClasses
// Ready by Karpenter's own validation, resolving what the emulator holds and the default pin's
// AMIs, and the XR Ready through NodeClassesValidated; pending pods get a node of the private
// pool; deleting the XR while it runs terminates its instance before the final check, listing
// with the real AWS CLI, lets the uninstall go on.
func TestRealKarpenterNamespaced(t *testing.T) {
	timed(t)
	_, latest := mustSeededReleases(t)
	r := startRealKarpenter(t, namespacedAPI, nil, func(*unstructured.Unstructured) {})
	walk(t, nil, func() bool { return conditionStatus(r.karpenter.get(), "Ready") == "True" }, r.karpenter)
	r.karpenter.waitCondition("NodeClassesValidated", "True", converge)
	assertNodeClasses(t, r.cluster, r.net, latest)

	const replicas = 3
	start := time.Now()
	if err := r.cluster.inflate(t.Context(), "inflate-private", "private", replicas); err != nil {
		t.Fatal(err)
	}
	nodes := r.cluster.waitRunningOnKarpenterNodes(t, "inflate-private", replicas, 8*time.Minute)
	assertInstances(t, r.cluster, r.net, r.region, "private", latest, nodes)
	t.Logf("%d pending pods running on %v %.1fs after their creation", replicas, nodes, time.Since(start).Seconds())

	r.karpenter.deleteAndWait()
	r.cluster.assertUninstalled(t, r.region)
}

// changeTenancy changes, in the claim API's function input, the tenancy entry of cluster.
func changeTenancy(t *testing.T, cluster string, change func(map[string]any)) {
	t.Helper()
	changeInput(t, claimAPI, func(input map[string]any) {
		clusters, _, _ := unstructured.NestedSlice(input, "tenancy", "clusters")
		i := slices.IndexFunc(clusters, func(cl any) bool { return cl.(map[string]any)["name"] == cluster })
		if i < 0 {
			t.Fatalf("the tenancy declares no cluster %s", cluster)
		}
		change(clusters[i].(map[string]any))
		_ = unstructured.SetNestedSlice(input, clusters, "tenancy", "clusters")
	})
}

// poolNodeClaims are the names of the NodeClaims of pool in the claimed cluster, deleting or not,
// and how many of them are being deleted.
func (c *claimedCluster) poolNodeClaims(t *testing.T, pool string) (names []string, deleting int) {
	t.Helper()
	list, err := c.dyn.Resource(nodeClaimGVR).List(t.Context(), metav1.ListOptions{LabelSelector: "karpenter.sh/nodepool=" + pool})
	if err != nil {
		t.Fatalf("NodeClaims of pool %s: %v", pool, err)
	}
	for _, nc := range list.Items {
		names = append(names, nc.GetName())
		if nc.GetDeletionTimestamp() != nil {
			deleting++
		}
	}
	return names, deleting
}

// scale sets the replicas of the inflate Deployment app.
func (c *claimedCluster) scale(ctx context.Context, app string, replicas int32) error {
	s, err := c.kube.AppsV1().Deployments("workload").GetScale(ctx, app, metav1.GetOptions{})
	if err != nil {
		return err
	}
	s.Spec.Replicas = replicas
	_, err = c.kube.AppsV1().Deployments("workload").UpdateScale(ctx, app, s, metav1.UpdateOptions{})
	return err
}

// limitsRefusal is what Karpenter's scheduler says of a pod only a pool at its limits could take
// (sigs.k8s.io/karpenter v1.14.3 pkg/controllers/provisioning/scheduling/scheduler.go,
// addToNewNodeClaim), in the FailedScheduling event it records on the pod (events.go,
// PodFailedToScheduleEvent).
const limitsRefusal = "all available instance types exceed limits for nodepool"

// waitLimitsRefusal waits until Karpenter records, on a pending pod of the inflate Deployment app,
// that pool's limits leave it no instance type.
func (c *claimedCluster) waitLimitsRefusal(t *testing.T, app, pool string) {
	t.Helper()
	var seen []string
	err := waitFor(t.Context(), 3*time.Minute, "Karpenter to refuse "+app+"'s pending pods for "+pool+"'s limits", func() (bool, error) {
		pods, err := c.kube.CoreV1().Pods("workload").List(t.Context(), metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodPending {
				continue
			}
			events, err := c.kube.CoreV1().Events("workload").List(t.Context(), metav1.ListOptions{
				FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + p.Name + ",reason=FailedScheduling"})
			if err != nil {
				return false, nil
			}
			for _, e := range events.Items {
				seen = append(seen, e.Message)
				if strings.Contains(e.Message, limitsRefusal) && strings.Contains(e.Message, pool) {
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("%v; events seen: %q\nKarpenter's log:\n%s", err, seen, c.karpenterTail())
	}
}

// waitFrozen waits until the claimed cluster's NodePool pool is frozen by the platform's
// break-glass (a budget of "0" nodes and expireAfter Never: internal/nodepools), or, with frozen
// false, no longer is.
func (c *claimedCluster) waitFrozen(t *testing.T, pool string, frozen bool) {
	t.Helper()
	what := fmt.Sprintf("NodePool %s frozen", pool)
	if !frozen {
		what = fmt.Sprintf("NodePool %s thawed", pool)
	}
	err := waitFor(t.Context(), converge, what, func() (bool, error) {
		np, err := c.dyn.Resource(nodePoolGVR).Get(t.Context(), pool, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		budgets, _, _ := unstructured.NestedSlice(np.Object, "spec", "disruption", "budgets")
		expire, _, _ := unstructured.NestedString(np.Object, "spec", "template", "spec", "expireAfter")
		zero := len(budgets) == 1 && budgets[0].(map[string]any)["nodes"] == "0"
		return (zero && expire == "Never") == frozen && (frozen || !zero && expire != "Never"), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// frozenHold is how long heldWhileFrozen watches a frozen pool's drifted nodes stay: nine rounds
// of Karpenter's disruption controller, which looks for nodes to disrupt every 10 s
// (sigs.k8s.io/karpenter v1.14.3 pkg/controllers/disruption/controller.go, pollingPeriod).
const frozenHold = 90 * time.Second

// heldWhileFrozen waits until the frozen pool's EC2NodeClass resolves the AMIs amis and every
// NodeClaim of the pool is Drifted, then watches for frozenHold: every one of nodes keeps running
// in the emulator and no NodeClaim of the pool is deleted. Frozen, the NodeClaims are Drifted for
// NodePoolDrifted, not AMIDrift: the freeze's expireAfter is part of the pool's hash
// (pkg/apis/v1/nodepool.go, Hash: its spec.template), and Karpenter reports a pool's static drift
// before asking the cloud provider (pkg/controllers/nodeclaim/disruption/drift.go, isDrifted).
// Thawed, the hash is the nodes' own again, and AMIDrift shows (waitDriftReplaced).
func (c *claimedCluster) heldWhileFrozen(t *testing.T, region, pool string, nodes []karpenterNode, amis []string) {
	t.Helper()
	err := waitFor(t.Context(), converge, fmt.Sprintf("EC2NodeClass %s to resolve %v and the pool's NodeClaims Drifted", pool, amis), func() (bool, error) {
		class, err := c.dyn.Resource(ec2NodeClassGVR).Get(t.Context(), pool, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		ids := statusIDs(class, "amis")
		list, err := c.dyn.Resource(nodeClaimGVR).List(t.Context(), metav1.ListOptions{LabelSelector: "karpenter.sh/nodepool=" + pool})
		if err != nil || !equalSets(ids, amis) || len(list.Items) == 0 {
			return false, nil
		}
		for _, nc := range list.Items {
			if d := condition(&nc, "Drifted"); d == nil || d["status"] != "True" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("%v\nKarpenter's log:\n%s", err, c.karpenterTail())
	}
	claims, _ := c.poolNodeClaims(t, pool)
	deadline := time.Now().Add(frozenHold)
	for time.Now().Before(deadline) {
		running, err := cp.aws.runningInstances(t.Context(), region, c.name)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if !slices.Contains(running, n.instance) {
				t.Fatalf("frozen, the drifted instance %s of pool %s was terminated\nKarpenter's log:\n%s", n.instance, pool, c.karpenterTail())
			}
		}
		if now, deleting := c.poolNodeClaims(t, pool); deleting > 0 || !equalSets(now, claims) {
			t.Fatalf("frozen, pool %s's NodeClaims went from %v to %v (%d deleting)", pool, claims, now, deleting)
		}
		time.Sleep(5 * time.Second)
	}
	t.Logf("frozen, pool %s's %d drifted NodeClaims were held for %s", pool, len(claims), frozenHold)
}

// waitDriftReplaced waits until Karpenter has replaced every one of nodes, the pool's nodes before
// a change of its AMI pin, by nodes of release: each old NodeClaim Drifted for AMIDrift
// (karpenter-provider-aws v1.14.3 pkg/cloudprovider/drift.go; the condition Drifted:
// sigs.k8s.io/karpenter v1.14.3 pkg/apis/v1/nodeclaim_status.go) and its instance terminated. It
// fails when more of the pool's NodeClaims are deleted at once than the pool's disruption budget
// allows, rounded up as Karpenter rounds it (pkg/apis/v1/nodepool.go, GetAllowedDisruptions).
func (c *claimedCluster) waitDriftReplaced(t *testing.T, region, pool string, nodes []karpenterNode, release string) {
	t.Helper()
	np, err := c.dyn.Resource(nodePoolGVR).Get(t.Context(), pool, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	budgets, _, _ := unstructured.NestedSlice(np.Object, "spec", "disruption", "budgets")
	if len(budgets) != 1 {
		t.Fatalf("NodePool %s has budgets %v: the suite reads one", pool, budgets)
	}
	budget, _ := budgets[0].(map[string]any)["nodes"].(string)
	drifted := map[string]bool{}
	var old []string
	for _, n := range nodes {
		old = append(old, n.instance)
	}
	mostDeleting, mostNodes := 0, 0
	err = waitFor(t.Context(), 10*time.Minute, fmt.Sprintf("Karpenter to replace %v by nodes of %s", old, release), func() (bool, error) {
		list, err := c.dyn.Resource(nodeClaimGVR).List(t.Context(), metav1.ListOptions{LabelSelector: "karpenter.sh/nodepool=" + pool})
		if err != nil {
			return false, nil
		}
		deleting := 0
		for _, nc := range list.Items {
			if nc.GetDeletionTimestamp() != nil {
				deleting++
			}
			if d := condition(&nc, "Drifted"); d != nil && d["status"] == "True" && d["reason"] == "AMIDrift" {
				drifted[nc.GetName()] = true
			}
		}
		mostDeleting, mostNodes = max(mostDeleting, deleting), max(mostNodes, len(list.Items)-deleting)
		running, err := cp.aws.runningInstances(t.Context(), region, c.name)
		return err == nil && !slices.ContainsFunc(old, func(id string) bool { return slices.Contains(running, id) }), nil
	})
	if err != nil {
		t.Fatalf("%v\nKarpenter's log:\n%s", err, c.karpenterTail())
	}
	if len(drifted) == 0 {
		t.Errorf("no NodeClaim of pool %s was seen Drifted for AMIDrift", pool)
	}
	allowed, err := intstr.GetScaledValueFromIntOrPercent(new(intstr.Parse(budget)), mostNodes, true)
	if err != nil {
		t.Fatalf("NodePool %s budget %q: %v", pool, budget, err)
	}
	if mostDeleting > allowed {
		t.Errorf("Karpenter deleted %d of pool %s's NodeClaims at once; its budget %s of %d nodes allows %d", mostDeleting, pool, budget, mostNodes, allowed)
	}
}

// runningInstances are the IDs of the instances the emulator runs (pending or running) that
// Karpenter launched for cluster: tagged with a NodePool and the cluster's name, as Karpenter
// lists its own (karpenter-provider-aws v1.14.3 pkg/providers/instance/instance.go, List; tags
// from pkg/utils/utils.go, GetTags).
func (a *emulatedAWS) runningInstances(ctx context.Context, region, cluster string) ([]string, error) {
	out, err := a.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag-key"), Values: []string{"karpenter.sh/nodepool"}},
		{Name: aws.String("tag:eks:eks-cluster-name"), Values: []string{cluster}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}},
	}}, func(o *ec2.Options) { o.Region = region })
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			ids = append(ids, aws.ToString(i.InstanceId))
		}
	}
	return ids, nil
}

// interruptSpot puts on the region's default event bus the warning EC2 sends before it reclaims
// a Spot instance, shaped as Karpenter v1.14.3 parses it: detail-type "EC2 Spot Instance
// Interruption Warning" (pkg/controllers/interruption/messages/spotinterruption/parser.go,
// DetailType), detail instance-id and instance-action (model.go); source aws.ec2 as in its design
// (designs/interruption-handling.md). The emulator delivers it to the targets of the rules whose
// pattern matches: the function's composed rules, nothing of ours.
func (a *emulatedAWS) interruptSpot(ctx context.Context, region, instance string) error {
	out, err := a.events.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []eventbridgetypes.PutEventsRequestEntry{{
		Source: aws.String("aws.ec2"), DetailType: aws.String("EC2 Spot Instance Interruption Warning"),
		Resources: []string{fmt.Sprintf("arn:aws:ec2:%s:%s:instance/%s", region, a.account, instance)},
		Detail:    aws.String(fmt.Sprintf(`{"instance-id":%q,"instance-action":"terminate"}`, instance)),
	}}}, eventsRegion(region))
	if err == nil && out.FailedEntryCount > 0 {
		err = fmt.Errorf("PutEvents failed: %s", aws.ToString(out.Entries[0].ErrorMessage))
	}
	return err
}

// assertNodeClasses checks what Karpenter resolved of each EC2NodeClass against what the
// emulator holds: Ready by its own validation; the private class the private subnets and the
// cluster security group, the public one the public subnets and the public nodes' group; both the
// instance profile the tenancy declares and AMIs of release the emulator publishes.
func assertNodeClasses(t *testing.T, claimed *claimedCluster, net network, release string) {
	t.Helper()
	declared, _ := claimed.declared()
	profile, _, _ := unstructured.NestedString(declared, "nodeIdentity", "instanceProfile")
	for _, name := range []string{"private", "public"} {
		subnets, groups := net.pool(name)
		class, err := claimed.dyn.Resource(ec2NodeClassGVR).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("EC2NodeClass %s: %v", name, err)
			continue
		}
		if !readyFor(class) {
			t.Errorf("EC2NodeClass %s is not Ready: %s", name, conditionsText(class))
		}
		ids := func(field string) []string { return statusIDs(class, field) }
		if got := ids("subnets"); !equalSets(got, subnets) {
			t.Errorf("EC2NodeClass %s resolved subnets %v, want the seeded %v", name, got, subnets)
		}
		if got := ids("securityGroups"); !equalSets(got, groups) {
			t.Errorf("EC2NodeClass %s resolved security groups %v, want %v", name, got, groups)
		}
		if got, _, _ := unstructured.NestedString(class.Object, "status", "instanceProfile"); got != profile {
			t.Errorf("EC2NodeClass %s resolved instance profile %q, want the tenancy's %q", name, got, profile)
		}
		if got, want := ids("amis"), amisOf(release); !equalSets(got, want) {
			t.Errorf("EC2NodeClass %s resolved AMIs %v, want release %s's %v", name, got, release, want)
		}
	}
}

// statusIDs are the ids of an EC2NodeClass's resolved status list field (subnets, securityGroups,
// amis).
func statusIDs(class *unstructured.Unstructured, field string) []string {
	list, _, _ := unstructured.NestedSlice(class.Object, "status", field)
	var out []string
	for _, e := range list {
		id, _ := e.(map[string]any)["id"].(string)
		out = append(out, id)
	}
	return out
}

// inflate creates, in the claimed cluster's namespace workload, a Deployment app of replicas pods
// that fit on no node it has yet (the system nodes' taints: addSystemNode). For the private pool
// they tolerate no taint; for the public pool they tolerate its taint, as the platform's input
// puts it on the pool's nodes (the pool's spec.template.spec.taints in the claimed cluster), and
// select its nodes.
func (c *claimedCluster) inflate(ctx context.Context, app, pool string, replicas int32) error {
	if err := c.ensureNamespace(ctx, "workload"); err != nil {
		return err
	}
	// The claimed cluster's kube-controller-manager runs no serviceaccount controller, which
	// gives each namespace its default ServiceAccount: the pods get one of their own.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: "workload"}}
	if _, err := c.kube.CoreV1().ServiceAccounts("workload").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		return err
	}
	labels := map[string]string{"app": app}
	spec := corev1.PodSpec{ServiceAccountName: sa.Name, AutomountServiceAccountToken: new(false),
		Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}
	if pool == "public" {
		p, err := c.dyn.Resource(nodePoolGVR).Get(ctx, pool, metav1.GetOptions{})
		if err != nil {
			return err
		}
		taints, err := taintsAt(p, "spec", "template", "spec", "taints")
		if err != nil || len(taints) == 0 {
			return fmt.Errorf("the public NodePool has no taint to tolerate (%v)", err)
		}
		for _, taint := range taints {
			spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: taint.Key, Operator: corev1.TolerationOpEqual,
				Value: taint.Value, Effect: taint.Effect})
		}
		spec.NodeSelector = map[string]string{"karpenter.sh/nodepool": pool}
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: "workload"}, Spec: appsv1.DeploymentSpec{
		Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
	}}
	_, err := c.kube.AppsV1().Deployments("workload").Create(ctx, d, metav1.CreateOptions{})
	return err
}

// A karpenterNode is a node Karpenter launched that pods of an inflate Deployment run on.
type karpenterNode struct{ node, pool, instance string }

// nodeNames are the names of nodes.
func nodeNames(nodes []karpenterNode) []string {
	var names []string
	for _, n := range nodes {
		names = append(names, n.node)
	}
	return names
}

// waitRunningOnKarpenterNodes waits until n pods of the inflate Deployment app are Running, each
// on a node of a NodePool, and returns those nodes.
func (c *claimedCluster) waitRunningOnKarpenterNodes(t *testing.T, app string, n int, timeout time.Duration) []karpenterNode {
	t.Helper()
	var nodes []karpenterNode
	err := waitFor(t.Context(), timeout, fmt.Sprintf("%d pods of %s running on Karpenter's nodes", n, app), func() (bool, error) {
		pods, err := c.kube.CoreV1().Pods("workload").List(t.Context(), metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, nil
		}
		seen := map[string]karpenterNode{}
		running := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "" {
				continue
			}
			node, err := c.kube.CoreV1().Nodes().Get(t.Context(), p.Spec.NodeName, metav1.GetOptions{})
			if err != nil || node.Labels["karpenter.sh/nodepool"] == "" {
				continue
			}
			running++
			id := node.Spec.ProviderID[strings.LastIndex(node.Spec.ProviderID, "/")+1:]
			seen[node.Name] = karpenterNode{node: node.Name, pool: node.Labels["karpenter.sh/nodepool"], instance: id}
		}
		nodes = slices.Collect(maps.Values(seen))
		return running == n, nil
	})
	if err != nil {
		claims, _ := c.dyn.Resource(nodeClaimGVR).List(t.Context(), metav1.ListOptions{})
		var b strings.Builder
		for _, nc := range claims.Items {
			fmt.Fprintf(&b, "  NodeClaim %s: %s\n", nc.GetName(), conditionsText(&nc))
		}
		t.Fatalf("%v\nNodeClaims:\n%sKarpenter's log:\n%s", err, b.String(), c.karpenterTail())
	}
	return nodes
}

// assertInstances checks each launched node's instance as the emulator runs it: of the pool
// wanted, in one of its subnets and its security group (network.pool), of an instance type within the pool's requirements
// (category and generation, as its NodePool in the claimed cluster states them), with an AMI of
// release, tagged with its EC2NodeClass's tags and its pool.
func assertInstances(t *testing.T, claimed *claimedCluster, net network, region, wantPool, release string, nodes []karpenterNode) {
	t.Helper()
	subnets, securityGroups := net.pool(wantPool)
	for _, n := range nodes {
		if n.pool != wantPool {
			t.Errorf("node %s is of pool %q, want %q", n.node, n.pool, wantPool)
			continue
		}
		out, err := cp.aws.ec2.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{InstanceIds: []string{n.instance}},
			func(o *ec2.Options) { o.Region = region })
		if err != nil || len(out.Reservations) == 0 || len(out.Reservations[0].Instances) == 0 {
			t.Errorf("node %s: the emulator has no instance %s (%v)", n.node, n.instance, err)
			continue
		}
		i := out.Reservations[0].Instances[0]
		if !slices.Contains(subnets, aws.ToString(i.SubnetId)) {
			t.Errorf("instance %s is in subnet %s, not one of the %s pool's %v", n.instance, aws.ToString(i.SubnetId), wantPool, subnets)
		}
		var groups []string
		for _, g := range i.SecurityGroups {
			groups = append(groups, aws.ToString(g.GroupId))
		}
		if !equalSets(groups, securityGroups) {
			t.Errorf("instance %s has security groups %v, want the %s pool's %v", n.instance, groups, wantPool, securityGroups)
		}
		if got := aws.ToString(i.ImageId); seededAMIs[got] != release {
			t.Errorf("instance %s runs AMI %s (release %q), not one of release %s's", n.instance, got, seededAMIs[got], release)
		}
		pool, err := claimed.dyn.Resource(nodePoolGVR).Get(t.Context(), n.pool, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if why := outsideRequirements(pool, string(i.InstanceType)); why != "" {
			t.Errorf("instance %s: %s", n.instance, why)
		}
		class, err := claimed.dyn.Resource(ec2NodeClassGVR).Get(t.Context(), n.pool, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want, _, _ := unstructured.NestedStringMap(class.Object, "spec", "tags")
		want["karpenter.sh/nodepool"] = n.pool
		got := map[string]string{}
		for _, tag := range i.Tags {
			got[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("instance %s: tag %s = %q, want %q (its EC2NodeClass's and pool's)", n.instance, k, got[k], v)
			}
		}
	}
}

// instanceFamily reads an EC2 instance type's category (group 1) and generation (group 3) from its
// name, as Karpenter derives the instance-category and instance-generation labels the pools'
// requirements select (karpenter-provider-aws v1.14.3 pkg/providers/instancetype/types.go,
// instanceTypeScheme: m6i.large is category m, generation 6; u-6tb1.metal category u, generation 1).
var instanceFamily = regexp.MustCompile(`(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.`)

// outsideRequirements says how instanceType falls outside the NodePool's instance-category and
// instance-generation requirements ("" when it is within).
func outsideRequirements(pool *unstructured.Unstructured, instanceType string) string {
	m := instanceFamily.FindStringSubmatch(instanceType)
	if m == nil {
		return fmt.Sprintf("instance type %q is not named as EC2 names them", instanceType)
	}
	generation, _ := strconv.Atoi(m[3])
	reqs, _, _ := unstructured.NestedSlice(pool.Object, "spec", "template", "spec", "requirements")
	for _, r := range reqs {
		req := r.(map[string]any)
		key, op := req["key"], req["operator"]
		var values []string
		for _, v := range req["values"].([]any) {
			values = append(values, v.(string))
		}
		switch {
		case key == "karpenter.k8s.aws/instance-category" && op == "In" && !slices.Contains(values, m[1]):
			return fmt.Sprintf("instance type %s is of category %s, the pool allows %v", instanceType, m[1], values)
		case key == "karpenter.k8s.aws/instance-generation" && op == "Gt":
			if min, _ := strconv.Atoi(values[0]); generation <= min {
				return fmt.Sprintf("instance type %s is of generation %d, the pool wants more than %d", instanceType, generation, min)
			}
		}
	}
	return ""
}
