package sequence

import (
	"fmt"

	"github.com/crossplane/function-sdk-go/resource"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/do-now/function-karpenter/internal/awsres"
	"github.com/do-now/function-karpenter/internal/cluster"
	"github.com/do-now/function-karpenter/internal/flux"
	"github.com/do-now/function-karpenter/internal/spec"
	"github.com/do-now/function-karpenter/internal/versions"
)

// Condition types of the steps, reported on the XR and the claim.
const (
	IdentityReady    = "IdentityAndQueueReady"
	WiringReady      = "InterruptionWiringReady"
	AccessCheckReady = "AccessCheckReady"
	ControllerReady  = "ControllerReady"
	NodePoolsReady   = "NodePoolsReady"
)

// Steps is the whole sequence for one XR, in order; o is what AWS reported
// for step one, which step two is built from; the controller and the node
// pools are built for the Karpenter versions controller and nodes (an
// upgrade decides them; step one always has the claim's version's policy).
// Every resource is built in the claim API's kinds and composed as the XR's
// API composes it.
func Steps(c *spec.Config, o awsres.Observed, controller, nodes versions.Version) []Step {
	steps := []Step{
		{
			Condition: IdentityReady,
			Build:     func() (map[resource.Name]runtime.Object, error) { return awsres.Identity(c) },
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
			Needs:     cluster.Needs(),
		},
		{
			Condition: ControllerReady,
			Build:     func() (map[resource.Name]runtime.Object, error) { return flux.Controller(c, controller) },
		},
		{
			Condition: NodePoolsReady,
			Build:     func() (map[resource.Name]runtime.Object, error) { return flux.Nodes(c, nodes) },
		},
	}
	for i := range steps {
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
				out[name] = cd
			}
			return out, nil
		}
	}
	return steps
}
