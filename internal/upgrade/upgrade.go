// Package upgrade orders a change of Karpenter version: the controller
// policy first, the controller only once AWS reports that policy applied
// (at once when it is the same policy), the node pools only once the
// controller is Ready at the new version. It reads which version each part
// was last built for from what Crossplane observes, so every call decides
// afresh and nothing that exists is dropped: a part keeps its old version
// until its turn.
package upgrade

import (
	"errors"
	"fmt"
	"strings"

	xpv1 "github.com/crossplane/crossplane-runtime/v2/apis/common/v1"
	"github.com/crossplane/function-sdk-go/resource"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/do-now/function-karpenter/internal/awsres"
	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/convert"
	"github.com/do-now/function-karpenter/internal/flux"
	"github.com/do-now/function-karpenter/internal/naming"
	"github.com/do-now/function-karpenter/internal/sequence"
	"github.com/do-now/function-karpenter/internal/versions"
)

// A Plan says which Karpenter version each part is built for in this call,
// and what stays as it is observed until its turn.
type Plan struct {
	sequence.Parts
	// From is the oldest version a part was last built for, To the
	// claim's; From is empty before the controller exists.
	From, To string
	// Upgrading is true while a part is built for another version than To.
	Upgrading bool
	// Installing is true while the controller or the node pools were
	// never composed yet.
	Installing bool
	// Message says where the upgrade is and what it waits on.
	Message string
}

// Decide plans this call for c, from what is observed. It refuses, at
// spec.version, a downgrade and a jump the new version forbids.
//
// Whatever the version, the controller never runs ahead of its
// permissions: while AWS does not report the role policy granting every
// statement of the policy c needs, the controller's manifest stays as it
// is observed and the role policy counts unready; while the controller
// does not yet run as desired, the role policy keeps the statements the
// new one drops; while the observed cluster reports no VPC, which the
// policy names, neither moves.
func Decide(c *config.Config, observed map[resource.Name]resource.ObservedComposed) (p Plan, _ *field.Error) {
	path := field.NewPath("spec", "version")
	to, err := versions.Get(string(c.Spec.Version))
	if err != nil {
		return Plan{}, field.NotSupported(path, c.Spec.Version, versions.Known())
	}
	cv := applied(observed, flux.ControllerKustomization)
	nv := applied(observed, flux.NodesKustomization)
	_, nodesExist := observed[flux.NodesKustomization]
	if nv == "" {
		nv = cv // not composed yet, or built before it recorded its version
	}
	if cv != "" && c.VersionDefaulted {
		newest := cv
		if versions.Compare(nv, cv) > 0 {
			newest = nv
		}
		if versions.Compare(to.Version, newest) < 0 {
			// The platform's default went below what runs: a claim that
			// names no version keeps it rather than be refused for a
			// version it never asked for.
			if kept, err := versions.Get(newest); err == nil {
				to = kept
			}
		}
	}
	p = Plan{To: to.Version, Parts: sequence.Parts{Controller: to, Nodes: to}, Installing: cv == "" || !nodesExist}
	nodes := to
	if cv != "" {
		p.From = cv
		if versions.Compare(nv, cv) < 0 {
			p.From = nv
		}
		for _, part := range []struct{ name, version string }{{"the controller was", cv}, {"the node pools were", nv}} {
			switch err := versions.CheckUpgrade(part.version, to.Version); {
			case errors.Is(err, versions.ErrDowngrade):
				return Plan{}, field.Forbidden(path, fmt.Sprintf("a downgrade from %s, which %s last built for, is refused: Karpenter does not support moving its CRDs back", part.version, part.name))
			case err != nil:
				return Plan{}, field.Forbidden(path, err.Error())
			}
		}
		if _, err = versions.Get(cv); err != nil {
			return Plan{}, field.Forbidden(path, fmt.Sprintf("the controller runs Karpenter %s, which this function no longer knows: it cannot build it to upgrade from", cv))
		}
		if nodes, err = versions.Get(nv); err != nil {
			return Plan{}, field.Forbidden(path, fmt.Sprintf("the node pools were built for Karpenter %s, which this function no longer knows", nv))
		}
	}

	perm, err := permissions(c, to, observed)
	if err != nil {
		return Plan{}, field.InternalError(path, err)
	}
	// A controller that waits for its permissions keeps its observed
	// manifest (perm.keep), whatever version it is built for here.
	p.Keep, p.NotReady = perm.keep, perm.notReady
	if cv == "" || (cv == to.Version && nv == to.Version) {
		return p, nil
	}
	p.Upgrading, p.Installing = true, false
	var says []string
	defer func() { p.Message = fmt.Sprintf("%s → %s: %s", p.From, to.Version, strings.Join(says, "; ")) }()

	if cv != to.Version {
		switch {
		case perm.noVPC:
			p.Nodes = nodes
			says = append(says, fmt.Sprintf("waiting for the claimed cluster's VPC, which %s's policy names, to be observed; the controller stays at %s until then", to.Version, cv))
			return p, nil
		case perm.controllerWaits:
			p.Nodes = nodes
			says = append(says, fmt.Sprintf("waiting for AWS to report %s applied with %s's policy; the controller stays at %s until then", awsres.ControllerRolePolicy, to.Version, cv))
			return p, nil
		}
		same, err := samePolicy(c, cv, to.Version)
		if err != nil {
			return Plan{}, field.InternalError(path, err)
		}
		switch {
		case same:
			says = append(says, fmt.Sprintf("Karpenter %s's controller policy is %s's, so the controller follows at once", to.Version, cv))
		default:
			says = append(says, fmt.Sprintf("AWS reports %s applied with %s's policy, so the controller follows", awsres.ControllerRolePolicy, to.Version))
		}
	}
	if !perm.controllerAt(to) {
		p.Nodes = nodes
		says = append(says, fmt.Sprintf("waiting for %s to be Ready at %s (its chart brings the new CRDs first); the node pools stay at %s until then", flux.ControllerKustomization, to.Version, nv))
		return p, nil
	}
	says = append(says, fmt.Sprintf("%s is Ready at %s, so the node pools follow", flux.ControllerKustomization, to.Version))
	return p, nil
}

// A permissionOrder is how one call orders a change of the controller's
// policy against the controller.
type permissionOrder struct {
	// controllerWaits: AWS does not report a policy that grants every
	// statement the controller is to need, or that policy cannot be built
	// yet (noVPC), and the controller exists.
	controllerWaits bool
	// noVPC: the observed cluster reports no VPC yet, so the policy the
	// controller is to get cannot be built.
	noVPC    bool
	keep     map[resource.Name]map[string]any
	notReady map[resource.Name]string
	// controllerAt tells whether the controller runs as desired at v.
	controllerAt func(v versions.Version) bool
}

// Field paths an ordering keeps as observed.
const (
	pathManifest = "spec.forProvider.manifest"
	pathPolicy   = "spec.forProvider.policy"
)

func permissions(c *config.Config, to versions.Version, observed map[resource.Name]resource.ObservedComposed) (permissionOrder, error) {
	o := permissionOrder{keep: map[resource.Name]map[string]any{}, notReady: map[resource.Name]string{}}
	ctrl, exists := observed[flux.ControllerKustomization]
	o.controllerAt = func(v versions.Version) bool {
		if !exists || !sequence.Observe(ctrl).Ready {
			return false
		}
		objs, err := flux.Controller(c, v)
		if err != nil {
			return false
		}
		desired, err := convert.Composed(objs[flux.ControllerKustomization])
		return err == nil && sequence.Behind(desired, ctrl.Resource) == ""
	}
	want, err := awsres.ControllerPolicyOf(c, to.Version)
	if o.noVPC = errors.Is(err, awsres.ErrNoVPC); err != nil && !o.noVPC {
		return o, err
	}
	rp, ok := observed[awsres.ControllerRolePolicy]
	if o.noVPC {
		// Nothing moves until the VPC is observed again: the policy
		// keeps the document the function last wrote (never dropped,
		// never emptied), and the controller its manifest.
		if ok {
			wrote, _ := rp.Resource.GetValue(pathPolicy)
			o.keep[awsres.ControllerRolePolicy] = map[string]any{pathPolicy: wrote}
		}
		if exists {
			o.controllerWaits = true
			manifest, _ := ctrl.Resource.GetValue(pathManifest)
			o.keep[flux.ControllerKustomization] = map[string]any{pathManifest: manifest}
		}
		return o, nil
	}
	if !ok {
		return o, nil // step one composes it first
	}
	held, _ := rp.Resource.GetString("status.atProvider.policy")
	hd, hok := parsePolicy(held)
	wd, _ := parsePolicy(want)
	hk, wk := hd.keys(), wd.keys()
	ready := sequence.ConditionOf(rp.Resource, xpv1.TypeReady).Status == corev1.ConditionTrue
	if granted := hok && covers(hk, wk); !granted || !ready {
		if ready {
			o.notReady[awsres.ControllerRolePolicy] = "AWS reports a policy that lacks statements the controller is to get; the controller keeps running as it is until AWS reports them"
		}
		if exists {
			o.controllerWaits = true
			manifest, _ := ctrl.Resource.GetValue(pathManifest)
			o.keep[flux.ControllerKustomization] = map[string]any{pathManifest: manifest}
		}
	}
	// What the new policy drops is judged against the document the
	// function last wrote (the composed resource's spec), never against
	// what AWS reports: a statement added out of band, in the console,
	// is no statement of the controller's, and the provider removes it.
	wrote, _ := rp.Resource.GetString(pathPolicy)
	wrd, wok := parsePolicy(wrote)
	if !wok || covers(wk, wrd.keys()) || !exists {
		return o, nil
	}
	// The new policy drops statements: the controller moves first, on
	// the policy it has, and the statements go once it runs as desired.
	if !o.controllerWaits && o.controllerAt(to) {
		return o, nil
	}
	kept, err := union(wrote, want)
	if err != nil {
		return o, err
	}
	if len(kept) > naming.MaxInlinePolicy {
		// IAM would refuse it, and the claim would wait for ever: the
		// new policy goes at once instead, and the controller may lack
		// what it drops until it moves.
		return o, nil
	}
	o.keep[awsres.ControllerRolePolicy] = map[string]any{pathPolicy: kept}
	return o, nil
}

// applied is the version a Kustomization's Object was last composed with,
// as its manifest records it; empty when it does not exist.
func applied(observed map[resource.Name]resource.ObservedComposed, name resource.Name) string {
	ocd, ok := observed[name]
	if !ok {
		return ""
	}
	v, _ := ocd.Resource.GetString("spec.forProvider.manifest.spec.postBuild.substitute." + flux.VarKarpenterVersion)
	if known, ok := versions.OfChart(v); ok {
		return known.Version
	}
	return v
}

// samePolicy tells whether two versions' controller policies are the same
// document for c.
func samePolicy(c *config.Config, a, b string) (bool, error) {
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
