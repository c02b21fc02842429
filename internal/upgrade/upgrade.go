// Package upgrade orders a change of Karpenter version: the controller
// policy first, the controller only once AWS reports that policy applied
// (at once when it is the same policy), the node pools only once the
// controller is Ready at the new version. It reads which version each part
// was last built for from what Crossplane observes, so every call decides
// afresh and nothing that exists is dropped: a part keeps its old version
// until its turn.
package upgrade

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	xpv1 "github.com/crossplane/crossplane-runtime/v2/apis/common/v1"
	"github.com/crossplane/function-sdk-go/resource"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/do-now/function-karpenter/internal/awsres"
	"github.com/do-now/function-karpenter/internal/flux"
	"github.com/do-now/function-karpenter/internal/sequence"
	"github.com/do-now/function-karpenter/internal/spec"
	"github.com/do-now/function-karpenter/internal/versions"
)

// A Plan says which Karpenter version each part is built for in this call.
type Plan struct {
	// From is the oldest version a part was last built for, To the
	// claim's; From is empty before the controller exists.
	From, To string
	// Controller and Nodes are the versions the controller's and the node
	// pools' Kustomizations are built for.
	Controller, Nodes versions.Version
	// Upgrading is true while a part is built for another version than To.
	Upgrading bool
	// Message says where the upgrade is and what it waits on.
	Message string
}

// Decide plans this call for c, from what is observed. It refuses, at
// spec.version, a downgrade and a jump the new version forbids.
func Decide(c *spec.Config, observed map[resource.Name]resource.ObservedComposed) (p Plan, _ *field.Error) {
	path := field.NewPath("spec", "version")
	to, err := versions.Get(string(c.Spec.Version))
	if err != nil {
		return Plan{}, field.NotSupported(path, c.Spec.Version, versions.Known())
	}
	p = Plan{To: to.Version, Controller: to, Nodes: to}
	cv := applied(observed, flux.ControllerKustomization)
	if cv == "" {
		return p, nil // nothing runs yet: install To
	}
	nv := applied(observed, flux.NodesKustomization)
	if nv == "" {
		nv = cv // not composed yet, or built before it recorded its version
	}
	p.From = cv
	if versions.Compare(nv, cv) < 0 {
		p.From = nv
	}
	newest := cv
	if versions.Compare(nv, cv) > 0 {
		newest = nv
	}
	if c.VersionDefaulted && versions.Compare(to.Version, newest) < 0 {
		// The platform's default went below what runs: a claim that names
		// no version keeps it rather than be refused for a version it
		// never asked for.
		kept, err := versions.Get(newest)
		if err == nil {
			to = kept
			p = Plan{To: to.Version, Controller: to, Nodes: to}
		}
	}
	for _, part := range []struct{ name, version string }{{"the controller was", cv}, {"the node pools were", nv}} {
		switch err := versions.CheckUpgrade(part.version, to.Version); {
		case errors.Is(err, versions.ErrDowngrade):
			return Plan{}, field.Forbidden(path, fmt.Sprintf("a downgrade from %s, which %s last built for, is refused: Karpenter does not support moving its CRDs back", part.version, part.name))
		case err != nil:
			return Plan{}, field.Forbidden(path, err.Error())
		}
	}
	controller, err := versions.Get(cv)
	if err != nil {
		return Plan{}, field.Forbidden(path, fmt.Sprintf("the controller runs Karpenter %s, which this function no longer knows: it cannot build it to upgrade from", cv))
	}
	nodes, err := versions.Get(nv)
	if err != nil {
		return Plan{}, field.Forbidden(path, fmt.Sprintf("the node pools were built for Karpenter %s, which this function no longer knows", nv))
	}
	if cv == to.Version && nv == to.Version {
		return p, nil
	}
	p.Upgrading = true
	var says []string
	defer func() { p.Message = fmt.Sprintf("%s → %s: %s", p.From, to.Version, strings.Join(says, "; ")) }()

	if cv != to.Version {
		same, err := samePolicy(c, cv, to.Version)
		if err != nil {
			return Plan{}, field.InternalError(path, err)
		}
		applied, err := policyApplied(c, observed[awsres.ControllerRolePolicy])
		if err != nil {
			return Plan{}, field.InternalError(path, err)
		}
		switch {
		case same:
			says = append(says, fmt.Sprintf("Karpenter %s's controller policy is %s's, so the controller follows at once", to.Version, cv))
		case applied:
			says = append(says, fmt.Sprintf("AWS reports %s applied with %s's policy, so the controller follows", awsres.ControllerRolePolicy, to.Version))
		default:
			p.Controller, p.Nodes = controller, nodes
			says = append(says, fmt.Sprintf("waiting for AWS to report %s applied with %s's policy; the controller stays at %s until then", awsres.ControllerRolePolicy, to.Version, cv))
			return p, nil
		}
	}
	if !readyAt(observed[flux.ControllerKustomization], to) {
		p.Nodes = nodes
		says = append(says, fmt.Sprintf("waiting for %s to be Ready at %s (its chart brings the new CRDs first); the node pools stay at %s until then", flux.ControllerKustomization, to.Version, nv))
		return p, nil
	}
	says = append(says, fmt.Sprintf("%s is Ready at %s, so the node pools follow", flux.ControllerKustomization, to.Version))
	return p, nil
}

// applied is the version a Kustomization's Object was last composed with,
// as its manifest records it; empty when it does not exist.
func applied(observed map[resource.Name]resource.ObservedComposed, name resource.Name) string {
	ocd, ok := observed[name]
	if !ok {
		return ""
	}
	v, _ := ocd.Resource.GetString("spec.forProvider.manifest.spec.postBuild.substitute." + flux.VarKarpenterVersion)
	return chartVersion(v)
}

// chartVersion maps a chart version back to its Karpenter version.
func chartVersion(chart string) string {
	for _, v := range versions.All {
		if v.Chart == chart {
			return v.Version
		}
	}
	return chart
}

// readyAt tells whether the controller's Kustomization, as the claimed
// cluster reports it, is Ready at v: its Object Ready, and the
// Kustomization there built for v's chart, Ready for its current generation.
func readyAt(ocd resource.ObservedComposed, v versions.Version) bool {
	if ocd.Resource == nil || sequence.ConditionOf(ocd.Resource, xpv1.TypeReady).Status != corev1.ConditionTrue {
		return false
	}
	var remote struct {
		Metadata struct {
			Generation int64 `json:"generation"`
		} `json:"metadata"`
		Spec struct {
			PostBuild struct {
				Substitute map[string]string `json:"substitute"`
			} `json:"postBuild"`
		} `json:"spec"`
		Status struct {
			ObservedGeneration int64 `json:"observedGeneration"`
			Conditions         []struct {
				Type   string `json:"type"`
				Status string `json:"status"`
			} `json:"conditions"`
		} `json:"status"`
	}
	if err := ocd.Resource.GetValueInto("status.atProvider.manifest", &remote); err != nil {
		return false
	}
	if remote.Spec.PostBuild.Substitute[flux.VarKarpenterVersion] != v.Chart ||
		remote.Metadata.Generation == 0 || remote.Status.ObservedGeneration != remote.Metadata.Generation {
		return false
	}
	for _, c := range remote.Status.Conditions {
		if c.Type == string(xpv1.TypeReady) {
			return c.Status == string(corev1.ConditionTrue)
		}
	}
	return false
}

// samePolicy tells whether two versions' controller policies are the same
// document for c.
func samePolicy(c *spec.Config, a, b string) (bool, error) {
	pa, err := awsres.ControllerPolicyOf(c, a)
	if err != nil {
		return false, err
	}
	pb, err := awsres.ControllerPolicyOf(c, b)
	if err != nil {
		return false, err
	}
	return pa == pb, nil
}

// policyApplied tells whether AWS reports the role policy Ready with c's
// version's document, compared as parsed JSON (AWS does not keep the
// spacing or key order of what it was sent).
func policyApplied(c *spec.Config, ocd resource.ObservedComposed) (bool, error) {
	if ocd.Resource == nil || sequence.ConditionOf(ocd.Resource, xpv1.TypeReady).Status != corev1.ConditionTrue {
		return false, nil
	}
	reported, _ := ocd.Resource.GetString("status.atProvider.policy")
	want, err := awsres.ControllerPolicy(c)
	if err != nil {
		return false, err
	}
	var got, wanted any
	if json.Unmarshal([]byte(reported), &got) != nil {
		return false, nil
	}
	if err := json.Unmarshal([]byte(want), &wanted); err != nil {
		return false, err
	}
	return reflect.DeepEqual(got, wanted), nil
}
