// Package sequence is the step graph: it emits each step's resources only
// once every resource of the steps before it is observed Ready, never
// withholds a resource that already exists, and reports one condition per
// step saying what is Ready and what it waits on.
package sequence

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/do-now/function-karpenter/internal/convert"
	"github.com/do-now/function-karpenter/internal/scope"
)

// A Step is a set of resources emitted together once the steps before it are
// Ready.
type Step struct {
	// Condition is the XR condition type that reports this step.
	Condition string
	// Build returns the step's desired resources by composed resource name.
	Build func() (map[resource.Name]runtime.Object, error)
	// Needs orders resources within the step: a resource is emitted only
	// once the siblings it names are Ready (or once it exists).
	Needs map[resource.Name][]resource.Name
	// Beside: the steps after this one do not wait for it; it waits for
	// the steps before it, and the XR for it.
	Beside bool
	// Observe: the step only observes (observe-only Objects). Its
	// resources follow the steps before it like any step's, but count
	// Ready whatever they report, hold nothing back, and the step reports
	// no condition.
	Observe bool
	// NotReady are resources counted unready whatever they report, each
	// with why: an upgrade's say (AWS reports another policy than the one
	// the next steps need).
	NotReady map[resource.Name]string
}

// ResourceLabel carries a composed resource's name on the object itself, so
// Usages can select it among the XR's resources.
const ResourceLabel = "socle.do-now.io/composition-resource"

// Reasons of step conditions.
const (
	ReasonAvailable = "Available"
	ReasonCreating  = "Creating"
	ReasonWaiting   = "WaitingForPrerequisites"
)

// A Condition is the state of one step.
type Condition struct {
	Type  string
	Ready bool
	// Unknown: neither Ready nor not; Ready is then ignored.
	Unknown bool
	Reason  string
	Message string
}

// Outcome is what one pass over the steps decided.
type Outcome struct {
	// Desired are the composed resources to emit, each with its readiness.
	Desired map[resource.Name]*resource.DesiredComposed
	// Conditions has one entry per step, in step order.
	Conditions []Condition
	// Ready is true when every step's resources exist and are Ready.
	Ready bool
	// Refs identifies every resource of every step, emitted or withheld.
	Refs map[resource.Name]Ref
	// Unready are the emitted resources not Ready yet, in step order: what
	// the claim waits on.
	Unready []resource.Name
}

// Ref identifies a composed resource by kind and namespace.
type Ref struct {
	APIVersion string
	Kind       string
	Namespace  string
}

// Run walks the steps in order. A step whose prerequisites are not all Ready
// emits only those of its resources that already exist, so a prerequisite
// that turns unready later never makes Crossplane delete what runs.
//
// Every emitted resource carries labels, besides ResourceLabel.
func Run(steps []Step, observed map[resource.Name]resource.ObservedComposed, labels map[string]string) (Outcome, error) {
	out := Outcome{Desired: map[resource.Name]*resource.DesiredComposed{}, Ready: true, Refs: map[resource.Name]Ref{}}
	var blockedBy []string // the first unready step, and what in it is unready
	for _, s := range steps {
		objs, err := s.Build()
		if err != nil {
			return Outcome{}, fmt.Errorf("cannot build step %s: %w", s.Condition, err)
		}
		allowed := blockedBy == nil
		if s.Observe {
			if err := out.observe(objs, observed, allowed, labels); err != nil {
				return Outcome{}, err
			}
			continue
		}
		health := map[resource.Name]Health{}
		for name := range objs {
			if ocd, exists := observed[name]; exists {
				health[name] = s.observe(name, objs[name], ocd)
			}
		}
		var pending, problems, notes []string
		for _, name := range sortedNames(objs) {
			out.Refs[name] = refOf(objs[name])
			_, exists := observed[name]
			if !exists && (!allowed || !siblingsReady(s.Needs[name], health)) {
				pending = append(pending, string(name))
				continue
			}
			cd, err := labelled(name, objs[name], labels)
			if err != nil {
				return Outcome{}, err
			}
			dc := &resource.DesiredComposed{Resource: cd, Ready: resource.ReadyFalse}
			h := health[name]
			if h.Ready {
				dc.Ready = resource.ReadyTrue
				for _, n := range h.Notes {
					notes = append(notes, fmt.Sprintf("%s: %s", name, n))
				}
			} else {
				pending = append(pending, string(name))
				out.Unready = append(out.Unready, name)
				for _, p := range h.Problems {
					problems = append(problems, fmt.Sprintf("%s: %s", name, p))
				}
			}
			out.Desired[name] = dc
		}

		c := Condition{Type: s.Condition, Ready: allowed && len(pending) == 0, Reason: ReasonAvailable}
		switch {
		case !allowed:
			c.Reason = ReasonWaiting
			c.Message = fmt.Sprintf("waiting for %s: %s not Ready yet", blockedBy[0], strings.Join(blockedBy[1:], ", "))
		case len(pending) > 0:
			c.Reason = ReasonCreating
			c.Message = fmt.Sprintf("waiting for %s to become Ready", strings.Join(pending, ", "))
			if len(problems) > 0 {
				c.Message += "; " + strings.Join(problems, "; ")
			}
		default:
			c.Message = fmt.Sprintf("%d resources Ready", len(objs))
			if len(notes) > 0 {
				c.Message += "; " + strings.Join(notes, "; ")
			}
		}
		out.Conditions = append(out.Conditions, c)
		if !c.Ready {
			out.Ready = false
			if blockedBy == nil && !s.Beside {
				blockedBy = append([]string{s.Condition}, pending...)
			}
		}
	}
	return out, nil
}

// observe is an existing resource's health in this step: what it reports,
// unless the step counts it unready, or it is an Object whose object the
// claimed cluster has not yet acted on as desired.
func (s Step) observe(name resource.Name, desired runtime.Object, ocd resource.ObservedComposed) Health {
	object := scope.IsObject(ocd.Resource.GroupVersionKind().GroupKind())
	var cd *composed.Unstructured
	if object {
		var ok bool
		if cd, ok = desired.(*composed.Unstructured); !ok {
			var err error
			if cd, err = convert.Composed(desired); err != nil {
				return Health{Problems: []string{err.Error()}}
			}
		}
		// What an Object observes is the object of the name it was last
		// applied with: an access check's new Pod has not run while the
		// old one, passed or failed, is all it reports.
		want, _ := cd.GetString("spec.forProvider.manifest.metadata.name")
		if got, _ := ocd.Resource.GetString("status.atProvider.manifest.metadata.name"); got != want {
			why := fmt.Sprintf("the claimed cluster reports %q, not %q yet", got, want)
			if got == "" {
				why = "the claimed cluster reports nothing of it yet"
			}
			return Health{Problems: append([]string{why}, problemsOf(ocd.Resource)...)}
		}
	}
	h := Observe(ocd)
	if !h.Ready {
		return h
	}
	if why, ok := s.NotReady[name]; ok {
		// With its own controller's words: AWS refusing the new
		// document, say, which it reports as Synced=False.
		return Health{Problems: append([]string{why}, problemsOf(ocd.Resource)...)}
	}
	if !object {
		return h
	}
	if kind, _ := ocd.Resource.GetString("status.atProvider.manifest.kind"); kind == "Pod" {
		return h // the access check: its Pod's name changes with its spec
	}
	if why := Behind(cd, ocd.Resource); why != "" {
		// With provider-kubernetes' own words when the claimed cluster
		// refuses the change (an admission webhook, a validation error),
		// which it reports as Synced=False while the Object stays Ready
		// for the object as it was.
		return Health{Problems: append([]string{why}, problemsOf(ocd.Resource)...)}
	}
	return h
}

// labelled is a step's resource as it is emitted: composed, with labels
// and its own name as ResourceLabel.
func labelled(name resource.Name, o runtime.Object, labels map[string]string) (*composed.Unstructured, error) {
	cd, err := convert.Composed(o)
	if err != nil {
		return nil, fmt.Errorf("cannot convert composed resource %q: %w", name, err)
	}
	l := cd.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	maps.Copy(l, labels)
	l[ResourceLabel] = string(name)
	cd.SetLabels(l)
	return cd, nil
}

// observe emits an observing step's resources: those that exist, and the
// others once allowed, each Ready for Crossplane whatever it reports.
func (out *Outcome) observe(objs map[resource.Name]runtime.Object, observed map[resource.Name]resource.ObservedComposed, allowed bool, labels map[string]string) error {
	for _, name := range sortedNames(objs) {
		out.Refs[name] = refOf(objs[name])
		if _, exists := observed[name]; !exists && !allowed {
			continue
		}
		cd, err := labelled(name, objs[name], labels)
		if err != nil {
			return err
		}
		out.Desired[name] = &resource.DesiredComposed{Resource: cd, Ready: resource.ReadyTrue}
	}
	return nil
}

func siblingsReady(needs []resource.Name, health map[resource.Name]Health) bool {
	for _, n := range needs {
		if !health[n].Ready {
			return false
		}
	}
	return true
}

func refOf(o runtime.Object) Ref {
	apiVersion, kind := o.GetObjectKind().GroupVersionKind().ToAPIVersionAndKind()
	r := Ref{APIVersion: apiVersion, Kind: kind}
	if m, ok := o.(metav1.Object); ok {
		r.Namespace = m.GetNamespace()
	}
	return r
}

func sortedNames(objs map[resource.Name]runtime.Object) []resource.Name {
	names := make([]resource.Name, 0, len(objs))
	for n := range objs {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}
