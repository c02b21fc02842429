// Package usage orders deletion with Crossplane Usages: every instance goes
// before the controller, the controller before the final check, the final
// check before the AWS access and namespace they both run with, the
// controller before its interruption pipeline and its monitoring, each
// EventBridge target before its rule. An uninstall then never strands a running
// instance or a controller without credentials, and it has no timeout:
// one that cannot finish waits.
//
// Each Usage protects an order that matters, and no more: every one is a
// composed resource, and every composed resource's watch events count
// against Crossplane's circuit breaker.
//   - Each pool's EC2NodeClass before the controller: the Object observing
//     the class deletes it and stays until it is gone (see package
//     poolstatus), and Karpenter lets a class go only once no NodeClaim,
//     so no instance, uses it. Nothing there gives up: Flux's timeout on
//     the nodes Kustomization (which also goes first) may end its own
//     wait, not this one.
//   - The controller before the final check (package cluster, finalcheck.go),
//     and the final check before the controller's AWS access (its Pod
//     Identity association, role and policy), namespace and ServiceAccount,
//     and before its own AWS access, ServiceAccount and RBAC: it lists the
//     instances once the controller is gone, and holds the uninstall while
//     one is left. Without the controller's, the controller cannot
//     terminate an instance, or runs no more; without its own, the check
//     cannot list them.
//   - The controller before its queue, queue policy and the EventBridge
//     targets (and so their rules): it keeps handling
//     interruptions (a Spot notice) while the nodes drain, and they keep
//     reaching it. Before its monitoring: a stuck uninstall still alerts.
//   - Each target before its rule: AWS refuses to delete a rule that still
//     has targets.
//
// A target need not go before the queue it points at: nothing refuses the
// queue's deletion, and the target goes with the uninstall anyway.
package usage

import (
	"fmt"

	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/do-now/function-karpenter/internal/awsres"
	"github.com/do-now/function-karpenter/internal/cluster"
	"github.com/do-now/function-karpenter/internal/flux"
	"github.com/do-now/function-karpenter/internal/interruption"
	"github.com/do-now/function-karpenter/internal/nodepools"
	"github.com/do-now/function-karpenter/internal/poolstatus"
	"github.com/do-now/function-karpenter/internal/sequence"
)

// APIVersion of the Usages this package composes.
const APIVersion = "protection.crossplane.io/v1beta1"

// An Edge says By must be deleted before Of. A retired edge, one whose
// order another now protects, is no longer composed: its Usage is kept
// while it exists and the Usage of its replacement does not yet, so that an
// upgrade leaves no moment when the order goes unprotected.
type Edge struct {
	By, Of resource.Name
	// ReplacedBy is a retired edge's replacement.
	ReplacedBy *Edge
}

// Edges is the deletion order of everything the function composes.
func Edges() []Edge {
	edges := []Edge{{By: flux.NodesKustomization, Of: flux.ControllerKustomization}}
	for _, pool := range nodepools.Pools {
		edges = append(edges, Edge{By: poolstatus.NodeClassName(pool), Of: flux.ControllerKustomization})
	}
	// The controller before the final check, and the final check before
	// the controller's AWS access, namespace and ServiceAccount (so the
	// controller before them: the controller's own Usages of these five are
	// retired), then before its own AWS access, ServiceAccount and RBAC.
	edges = append(edges, Edge{By: flux.ControllerKustomization, Of: cluster.FinalCheck})
	for _, of := range []resource.Name{
		awsres.PodIdentityAssociation, awsres.ControllerRole, awsres.ControllerRolePolicy,
		cluster.Namespace, cluster.ServiceAccount,
	} {
		replacement := Edge{By: cluster.FinalCheck, Of: of}
		edges = append(edges, replacement, Edge{By: flux.ControllerKustomization, Of: of, ReplacedBy: &replacement})
	}
	for _, of := range []resource.Name{
		awsres.FinalCheckPodIdentityAssociation, awsres.FinalCheckRole, awsres.FinalCheckRolePolicy,
		cluster.FinalCheckRBAC, cluster.FinalCheckRBACBinding, cluster.FinalCheckServiceAccount,
	} {
		edges = append(edges, Edge{By: cluster.FinalCheck, Of: of})
	}
	held := []resource.Name{awsres.InterruptionQueue, awsres.InterruptionQueuePolicy, flux.MonitoringKustomization}
	for _, r := range interruption.Rules {
		held = append(held, awsres.TargetResource(r))
	}
	for _, of := range held {
		edges = append(edges, Edge{By: flux.ControllerKustomization, Of: of})
	}
	for _, r := range interruption.Rules {
		edges = append(edges, Edge{By: awsres.TargetResource(r), Of: awsres.RuleResource(r)})
	}
	return edges
}

// Name is the composed resource name of an edge's Usage. It is API.
func Name(e Edge) resource.Name {
	return resource.Name(fmt.Sprintf("usage-%s-before-%s", e.By, e.Of))
}

// Usages returns the Usage of every edge whose two ends both exist, plus
// every Usage that exists already, whatever became of its ends, but for a
// retired edge's once its replacement's exists. It is
// rebuilt from the observed state on every call, so no early return and no
// withheld step can drop one. Each carries labels, as every composed
// resource does.
func Usages(refs map[resource.Name]sequence.Ref, observed map[resource.Name]resource.ObservedComposed, labels map[string]string) map[resource.Name]*resource.DesiredComposed {
	out := map[resource.Name]*resource.DesiredComposed{}
	for _, e := range Edges() {
		name := Name(e)
		_, exists := observed[name]
		_, byObserved := observed[e.By]
		_, ofObserved := observed[e.Of]
		if !exists && (!byObserved || !ofObserved) {
			continue
		}
		if e.ReplacedBy != nil {
			if _, replaced := observed[Name(*e.ReplacedBy)]; !exists || replaced {
				continue
			}
		}
		had := observed[name].Resource // nil until the Usage exists
		u := build(e, refs[e.By], refs[e.Of], end(observed, e.By, had, "by"), end(observed, e.Of, had, "of"))
		u.SetLabels(labels)
		// A Usage is bookkeeping, not part of what the claim waits for.
		out[name] = &resource.DesiredComposed{Resource: u, Ready: resource.ReadyTrue}
	}
	return out
}

// end is the name of the object at one end of a Usage: the observed composed
// resource's, or, once that is gone, the one the existing Usage names (field
// "of" or "by"), or "" when neither is known.
func end(observed map[resource.Name]resource.ObservedComposed, n resource.Name, had *composed.Unstructured, field string) string {
	if o, ok := observed[n]; ok && o.Resource.GetName() != "" {
		return o.Resource.GetName()
	}
	if had == nil {
		return ""
	}
	name, _, _ := unstructured.NestedString(had.Object, "spec", field, "resourceRef", "name")
	return name
}

// build names each end by its resourceRef where its name is known, as it
// always is once both ends were observed. A selector would be resolved by
// Crossplane's Usage controller with an update of the Usage, which races the
// XR's own apply (a conflict, retried), and in Crossplane v2.4.2 the first
// reconcile of a Usage whose "of" is a selector panics: Reconcile reads
// spec.of before ResolveSelectors fills it in and dereferences its nil
// resourceRef (internal/controller/protection/usage/reconciler.go, lines 286
// and 311), to succeed only on the retry; until "by" is resolved, its
// admission webhook panics too when it would refuse a deletion
// (crossplane/crossplane#7243, open). The selector is left only for an end
// whose name is unknown: an existing Usage's, whose end is gone.
func build(e Edge, by, of sequence.Ref, byName, ofName string) *composed.Unstructured {
	u := composed.New()
	u.SetAPIVersion(APIVersion)
	ref := func(r sequence.Ref, n resource.Name, name, namespace string) map[string]any {
		key, which := "resourceRef", map[string]any{"name": name}
		if name == "" {
			key, which = "resourceSelector", map[string]any{
				"matchControllerRef": true,
				"matchLabels":        map[string]any{sequence.ResourceLabel: string(n)},
			}
		}
		if namespace != "" {
			which["namespace"] = namespace
		}
		return map[string]any{"apiVersion": r.APIVersion, "kind": r.Kind, key: which}
	}
	// A namespaced Usage lives with its user; a cluster-scoped user needs a
	// ClusterUsage. A namespaced Usage names the namespace of what it
	// protects; a ClusterUsage cannot.
	ofNamespace := ""
	if by.Namespace != "" {
		u.SetKind("Usage")
		u.SetNamespace(by.Namespace)
		ofNamespace = of.Namespace
	} else {
		u.SetKind("ClusterUsage")
	}
	// Set as is: its values are JSON's own types already, which is all
	// SetValue's JSON round trip would make sure of.
	u.Object["spec"] = map[string]any{
		"of": ref(of, e.Of, ofName, ofNamespace),
		"by": ref(by, e.By, byName, ""),
		// Retry the used resource's deletion as soon as the Usage is gone,
		// instead of waiting for its controller's backoff.
		"replayDeletion": true,
	}
	return u
}
