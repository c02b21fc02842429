package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/do-now/function-karpenter/internal/cluster"
	"github.com/do-now/function-karpenter/internal/sequence"
)

// released are the resources an uninstall must keep while an EC2NodeClass
// of the claim exists (so, through Karpenter's finalizers, a NodeClaim and
// its instance): the controller, its AWS access and namespace, the
// interruption pipeline that feeds it, its monitoring, and the final check
// with what it runs with.
var released = append([]string{
	"controller-kustomization", "interruption-queue", "interruption-queue-policy", "monitoring-kustomization",
	"rule-capacity-reservation", "rule-health", "rule-rebalance", "rule-spot-interruption", "rule-state-change",
	"target-capacity-reservation", "target-health", "target-rebalance", "target-spot-interruption", "target-state-change",
	"final-check",
}, finalCheckNeeds...)

// controllerNeeds are what the controller runs with, and so what must stay
// while it does.
var controllerNeeds = []string{
	"controller-namespace", "controller-service-account",
	"controller-role", "controller-role-policy", "pod-identity-association",
}

// finalCheckNeeds are what must stay while an instance Karpenter let go of
// is still listed: what the final check runs with (its own AWS access,
// ServiceAccount and RBAC, the namespace) and the controller's AWS access
// and ServiceAccount.
var finalCheckNeeds = append([]string{"final-check-rbac", "final-check-rbac-binding", "final-check-service-account",
	"final-check-role", "final-check-role-policy", "final-check-pod-identity-association"}, controllerNeeds...)

// uninstall models the deletion of a settled claim on the rules of the real
// parts, each cited, with the function's own answer as its input:
//   - Crossplane deletes every composed resource at once, Usages included;
//     a resource a Usage protects is refused deletion while the Usage's
//     using resource exists, and a composed Usage goes only once its using
//     resource is gone (crossplane v2.4.2
//     internal/controller/protection/usage/reconciler.go).
//   - An Object whose managementPolicies hold Delete deletes its manifest
//     in the claimed cluster and stays until a Get finds it no more; one
//     that only observes goes at once (crossplane-runtime v2.4.0
//     pkg/reconciler/managed; provider-kubernetes v1.4.1
//     internal/controller/cluster/object/object.go).
//   - An EC2NodeClass, once asked to go (by that Object, or by Flux pruning
//     the nodes Kustomization), goes when its NodeClaims are gone: drain
//     ticks later, never if drain < 0 (a stuck finalizer, Karpenter down,
//     its credentials revoked).
//   - The final check's Deployment, once asked to go, goes when its Pod
//     lists no instance and removes its finalizer (internal/cluster,
//     finalcheck.go): never while an instance Karpenter let go of is still
//     listed (leak ticks; never if leak < 0), nor once what it runs with is
//     gone.
//   - Everything else goes as soon as nothing holds it: Flux's timeout may
//     let the nodes Kustomization go at once, so the model lets it.
type uninstall struct {
	policies map[string][]string  // by resource: managementPolicies
	usages   map[string][2]string // by Usage: {by, of}
	gone     map[string]int       // by resource or class: the tick it went
	classes  map[string]string    // by observer Object: the class it observes
	order    []string             // what went, in order
	asked    map[string]bool      // classes asked to go
	leak     int                  // the tick an instance Karpenter let go of stops being listed: 0 none, < 0 never
	guarded  bool                 // the final check's Deployment carries its finalizer
}

func newUninstall(desired map[string]map[string]any) *uninstall {
	u := &uninstall{policies: map[string][]string{}, usages: map[string][2]string{},
		gone: map[string]int{}, classes: map[string]string{}, asked: map[string]bool{}}
	selected := func(o map[string]any, end string) string {
		sel, _ := dig(o, "spec", end, "resourceSelector", "matchLabels").(map[string]any)
		s, _ := sel[sequence.ResourceLabel].(string)
		return s
	}
	for name, o := range desired {
		if strings.HasPrefix(name, "usage-") {
			u.usages[name] = [2]string{selected(o, "by"), selected(o, "of")}
			continue
		}
		u.policies[name] = []string{"*"}
		if ps, ok := dig(o, "spec", "managementPolicies").([]any); ok {
			u.policies[name] = nil
			for _, p := range ps {
				u.policies[name] = append(u.policies[name], p.(string))
			}
		}
		if name == "final-check" {
			fins, _ := dig(o, "spec", "forProvider", "manifest", "metadata", "finalizers").([]any)
			u.guarded = slices.Contains(fins, any(cluster.FinalCheckFinalizer))
		}
		if dig(o, "spec", "forProvider", "manifest", "kind") == "EC2NodeClass" {
			u.classes[name] = "class/" + dig(o, "spec", "forProvider", "manifest", "metadata", "name").(string)
		}
	}
	return u
}

func dig(o map[string]any, path ...string) any {
	var v any = o
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func (u *uninstall) isGone(name string) bool { _, ok := u.gone[name]; return ok }

func (u *uninstall) goes(name string, tick int) {
	u.gone[name] = tick
	u.order = append(u.order, name)
}

// held says whether a Usage still protects name.
func (u *uninstall) held(name string) bool {
	for un, e := range u.usages {
		if e[1] == name && !u.isGone(un) {
			return true
		}
	}
	return false
}

// run deletes the claim and ticks until everything is gone or ticks ran
// out. check is called after every tick.
func (u *uninstall) run(drain func(class string) int, ticks int, check func(tick int)) {
	for tick := 1; tick <= ticks; tick++ {
		// The claimed cluster: classes asked to go go once drained.
		for _, class := range u.classes {
			if d := drain(class); u.asked[class] && !u.isGone(class) && d >= 0 && tick > d {
				u.goes(class, tick)
			}
		}
		var names []string
		for n := range u.policies {
			names = append(names, n)
		}
		for n := range u.usages {
			names = append(names, n)
		}
		sort.Strings(names)
		// Every controller acts at once on what it saw at the start of
		// the tick: what goes, goes at its end.
		var going []string
		for _, n := range names {
			if u.isGone(n) {
				continue
			}
			if e, ok := u.usages[n]; ok {
				if e[0] == "" || u.isGone(e[0]) {
					going = append(going, n)
				}
				continue
			}
			if u.held(n) {
				continue
			}
			if n == "nodes-kustomization" {
				// Flux prunes the NodePools and classes it applied.
				for _, c := range u.classes {
					u.asked[c] = true
				}
			}
			if n == "final-check" && u.guarded && !u.finalCheckPasses(tick) {
				continue
			}
			if class, ok := u.classes[n]; ok && deletes(u.policies[n]) {
				u.asked[class] = true
				if !u.isGone(class) {
					continue
				}
			}
			going = append(going, n)
		}
		for _, n := range going {
			u.goes(n, tick)
		}
		check(tick)
		if len(u.gone) == len(u.policies)+len(u.usages)+len(u.classes) {
			return
		}
	}
}

// leaking tells whether an instance Karpenter let go of is still listed.
func (u *uninstall) leaking(tick int) bool { return u.leak < 0 || tick <= u.leak }

// finalCheckPasses tells whether the final check finds no instance left
// (none of a NodeClaim's, none Karpenter let go of) and can say so: what it
// runs with is all there.
func (u *uninstall) finalCheckPasses(tick int) bool {
	for _, need := range finalCheckNeeds {
		if u.isGone(need) {
			return false
		}
	}
	for _, class := range u.classes {
		if !u.isGone(class) {
			return false
		}
	}
	return !u.leaking(tick)
}

func deletes(policies []string) bool {
	return slices.Contains(policies, "Delete") || slices.Contains(policies, "*")
}

// uninstallChecked runs one uninstall and returns the first breach of the
// invariant: a resource of released gone while a class still exists, one of
// finalCheckNeeds while an instance Karpenter let go of is still listed, or
// one of controllerNeeds while the controller runs.
func uninstallChecked(desired map[string]map[string]any, drain func(class string) int, leak, ticks int) (*uninstall, string) {
	u := newUninstall(desired)
	u.leak = leak
	breach := ""
	u.run(drain, ticks, func(tick int) {
		check := func(what string, rs []string) {
			for _, r := range rs {
				if _, composed := u.policies[r]; composed && u.isGone(r) && breach == "" {
					breach = fmt.Sprintf("tick %d: %s released while %s (gone so far: %v)", tick, r, what, u.order)
				}
			}
		}
		for _, class := range u.classes {
			if !u.isGone(class) {
				check(class+" exists", released)
			}
		}
		if u.leaking(tick) {
			check("an instance is still listed", finalCheckNeeds)
		}
		// Not even at once with the controller: it may still be running.
		for _, r := range controllerNeeds {
			if at, gone := u.gone[r]; gone && breach == "" {
				if c, ok := u.gone["controller-kustomization"]; !ok || c >= at {
					breach = fmt.Sprintf("tick %d: %s released while the controller runs (gone so far: %v)", tick, r, u.order)
				}
			}
		}
	})
	return u, breach
}

// TestUninstallNeverOutrunsAnInstance holds the invariant of an uninstall
// for both APIs, on the function's own answer at the settled state: the
// controller and everything it needs are released only once the claimed
// cluster holds none of the claim's EC2NodeClasses, whether the NodeClaims
// drain at once, late, or never (a stuck finalizer, Karpenter down); its
// AWS access, namespace and ServiceAccount only once it is gone and the
// final check lists no instance, even one Karpenter let go of while it was
// still running; and an uninstall that can finish does. Then it mutates
// the answer: dropping the final check's finalizer, the Delete policy of a
// class's Object, or any one Usage but the nodes Kustomization's (which the
// classes' own now cover), must break it.
func TestUninstallNeverOutrunsAnInstance(t *testing.T) {
	for _, a := range apis {
		t.Run(a.name, func(t *testing.T) {
			rsp := run(t, a.request(t).observing(walkToSettled(t, a)).build())
			desired := map[string]map[string]any{}
			for n, r := range rsp.GetDesired().GetResources() {
				desired[n] = r.GetResource().AsMap()
			}
			if len(newUninstall(desired).classes) != 2 {
				t.Fatalf("want an Object for each pool's EC2NodeClass, got %v", newUninstall(desired).classes)
			}
			for _, drain := range []int{0, 1, 5, 50, -1} {
				for _, leak := range []int{0, 3, 80, -1} {
					u, breach := uninstallChecked(desired, func(string) int { return drain }, leak, 200)
					when := fmt.Sprintf("NodeClaims drained after %d ticks, an instance they let go of listed for %d", drain, leak)
					if breach != "" {
						t.Errorf("%s: %s", when, breach)
					}
					done := len(u.gone) == len(u.policies)+len(u.usages)+len(u.classes)
					switch {
					case drain >= 0 && leak >= 0 && !done:
						t.Errorf("%s: the uninstall never finished; gone: %v", when, u.order)
					case (drain < 0 || leak < 0) && done:
						t.Errorf("%s: the uninstall finished anyway, stranding an instance", when)
					case drain < 0:
						for _, r := range released {
							if u.isGone(r) {
								t.Errorf("%s: %s released", when, r)
							}
						}
					}
				}
			}

			// Mutations: each must let an instance be outrun.
			mutated := func(what string, change func(map[string]map[string]any)) {
				m := map[string]map[string]any{}
				for n, o := range desired {
					m[n] = deepCopy(o)
				}
				change(m)
				// Either class the last to drain: a Usage of one class
				// matters only while the other is gone; and an instance
				// listed after both.
				for _, last := range []string{"class/private", "class/public"} {
					for _, leak := range []int{0, 30} {
						if _, breach := uninstallChecked(m, func(c string) int { return map[bool]int{true: 11, false: 5}[c == last] }, leak, 200); breach != "" {
							return
						}
					}
				}
				t.Errorf("mutation %s: the invariant still holds, so the test does not see it", what)
			}
			mutated("the final check without its finalizer", func(m map[string]map[string]any) {
				delete(dig(m["final-check"], "spec", "forProvider", "manifest", "metadata").(map[string]any), "finalizers")
			})
			mutated("class Objects observe only", func(m map[string]map[string]any) {
				for n := range newUninstall(m).classes {
					m[n]["spec"].(map[string]any)["managementPolicies"] = []any{"Observe"}
				}
			})
			for n := range desired {
				if !strings.HasPrefix(n, "usage-") || n == "usage-nodes-kustomization-before-controller-kustomization" {
					continue
				}
				mutated("without "+n, func(m map[string]map[string]any) { delete(m, n) })
			}
		})
	}
}
