package sequence

import (
	"fmt"
	"maps"
	"slices"

	"github.com/crossplane/function-sdk-go/resource"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/do-now/function-karpenter/internal/awsres"
	"github.com/do-now/function-karpenter/internal/cluster"
	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/flux"
	"github.com/do-now/function-karpenter/internal/poolstatus"
	"github.com/do-now/function-karpenter/internal/versions"
)

// Condition types of the steps, reported on the XR and the claim.
const (
	IdentityReady    = "IdentityAndQueueReady"
	WiringReady      = "InterruptionWiringReady"
	AccessCheckReady = "AccessCheckReady"
	ControllerReady  = "ControllerReady"
	MonitoringReady  = "MonitoringReady"
	NodePoolsReady   = "NodePoolsReady"
)

// Parts is what an upgrade decides for one call: which Karpenter version
// the controller and the node pools are built for, which fields of which
// resources stay as they are observed, and which resources count unready
// whatever they report.
type Parts struct {
	Controller, Nodes versions.Version
	// Keep maps a composed resource to field paths and the values they
	// keep.
	Keep map[resource.Name]map[string]any
	// NotReady are resources counted unready, each with why.
	NotReady map[resource.Name]string
}

// Steps is the whole sequence for one XR, in order, its lease first (h: does
// the XR hold its cluster); o is what AWS reported
// for step one, which step two is built from; p says what an upgrade
// decided (step one always has the claim's version's policy, unless p
// keeps another); observed is what exists. Every resource is built in the claim API's kinds and
// composed as the XR's API composes it.
func Steps(c *config.Config, o awsres.Observed, p Parts, observed map[resource.Name]resource.ObservedComposed, h Hold) []Step {
	steps := []Step{
		leaseStep(c, h),
		{
			Condition: IdentityReady,
			Build:     func() (map[resource.Name]runtime.Object, error) { return awsres.Identity(c) },
			// The controller policy names the cluster's VPC, which only
			// the observed cluster tells.
			Needs:    map[resource.Name][]resource.Name{awsres.ControllerRolePolicy: {awsres.EKSCluster}},
			NotReady: vpcUnobserved(o, p.NotReady),
		},
		{
			Condition: WiringReady,
			Build: func() (map[resource.Name]runtime.Object, error) {
				return awsres.Wiring(c, o), nil
			},
		},
		{
			Condition: AccessCheckReady,
			Build:     func() (map[resource.Name]runtime.Object, error) { return cluster.Objects(c) },
			Needs:     cluster.Needs(c),
		},
		{
			Condition: ControllerReady,
			Build:     func() (map[resource.Name]runtime.Object, error) { return flux.Controller(c, p.Controller) },
		},
		{
			Condition: MonitoringReady,
			Build:     func() (map[resource.Name]runtime.Object, error) { return flux.Monitoring(c, p.Controller) },
			// Alerts matter most when the pools are in trouble: the
			// node pools do not wait for the monitoring.
			Beside: true,
		},
		{
			// What Karpenter reports of each pool, shown on the claim.
			Condition: "PoolsObserved",
			Build:     func() (map[resource.Name]runtime.Object, error) { return poolstatus.Objects(c, observed) },
			Observe:   true,
		},
		{
			Condition: NodePoolsReady,
			Build:     func() (map[resource.Name]runtime.Object, error) { return flux.Nodes(c, p.Nodes) },
		},
	}
	if !*c.Input.Monitoring.Enabled {
		steps = slices.DeleteFunc(steps, func(s Step) bool { return s.Condition == MonitoringReady })
	}
	for i := range steps {
		if steps[i].NotReady == nil {
			steps[i].NotReady = p.NotReady
		}
		build := steps[i].Build
		steps[i].Build = func() (map[resource.Name]runtime.Object, error) {
			objs, err := build()
			if err != nil {
				return nil, err
			}
			out := make(map[resource.Name]runtime.Object, len(objs))
			for name, o := range objs {
				cd, err := c.XR.Compose(o)
				if err != nil {
					return nil, fmt.Errorf("cannot compose %s: %w", name, err)
				}
				for path, v := range p.Keep[name] {
					if err := cd.SetValue(path, v); err != nil {
						return nil, fmt.Errorf("cannot keep %s of %s: %w", path, name, err)
					}
				}
				out[name] = cd
			}
			return out, nil
		}
	}
	return steps
}

// vpcUnobserved is notReady, plus the observed EKS cluster while it reports
// no VPC: a new controller policy waits for the VPC, not only for the
// cluster to be Ready, and the step says why.
func vpcUnobserved(o awsres.Observed, notReady map[resource.Name]string) map[resource.Name]string {
	if o.ClusterVPC != "" {
		return notReady
	}
	out := maps.Clone(notReady)
	if out == nil {
		out = map[resource.Name]string{}
	}
	out[awsres.EKSCluster] = "provider-aws reports no VPC of the cluster yet, and the controller policy names it"
	return out
}

// ProvenFirst holds the node pools back while the access check has not
// passed on the Pod this call desires: a day-two change of what the
// preflight proves (an AMI pin, zones, subnets, the instance profile, the
// boundary, the cluster's Kubernetes version) runs the check again as a
// new Pod, and until that Pod succeeded the nodes' Kustomization, once it
// exists, keeps the manifest it was observed with, as the controller keeps
// its own while it waits for its permissions (internal/upgrade).
func ProvenFirst(c *config.Config, observed map[resource.Name]resource.ObservedComposed, p *Parts) {
	nodes, exists := observed[flux.NodesKustomization]
	if !exists {
		return
	}
	if check, ok := observed[cluster.CheckName(c)]; ok && Observe(check).Ready {
		if name, _ := check.Resource.GetString("status.atProvider.manifest.metadata.name"); name == cluster.PodName(c) {
			return
		}
	}
	manifest, err := nodes.Resource.GetValue(pathManifest)
	if err != nil {
		return
	}
	// No message of its own: the node pools' step already waits for
	// AccessCheckReady, which names the Pod it waits on.
	if p.Keep == nil {
		p.Keep = map[resource.Name]map[string]any{}
	}
	keep := p.Keep[flux.NodesKustomization]
	if keep == nil {
		keep = map[string]any{}
		p.Keep[flux.NodesKustomization] = keep
	}
	keep[pathManifest] = manifest
}

// pathManifest is where an Object holds the manifest it applies.
const pathManifest = "spec.forProvider.manifest"
