//go:build e2e

package e2e

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// Where a claim's walk goes, read from the hub's audit log. Crossplane v2.4.2 composes an XR in
// passes: one pass of its reconcile applies the XR's resource references (field manager
// fieldOwnerXR), then every composed resource the functions desire, one after the other (a field
// manager of fieldOwnerComposed and a hash of the XR's name and kind), then the XR's status
// (fieldOwnerXR again): internal/controller/apiextensions/composite/composition_functions.go,
// held by TestCrossplaneFacts. So a claim's time from its creation to Ready is spent in its
// passes, in waiting for its providers between them, and in waiting for a pass once they
// answered: for one of Crossplane's reconcile workers.
const (
	fieldOwnerXR       = "apiextensions.crossplane.io/composite"
	fieldOwnerComposed = "apiextensions.crossplane.io/composed/"
)

// A pass is one of Crossplane's compose passes over an XR.
type pass struct {
	start, end       time.Time // its resource references applied; its status applied
	applied, created int       // the composed resources it applied, and of them those it created
	// answered is when a provider last wrote the status of one of the XR's composed resources
	// after the pass before this one; zero if none did.
	answered time.Time
}

// passes reads the compose passes over each XR from the audit log, from from until to. The
// resource references are xr's; a composed resource is its XR's by name and namespace: Crossplane
// generates its name from the XR's crossplane.io/composite label, the XR's own name, and "-" and a
// suffix (composition_render.go, held by TestCrossplaneFacts; names.ChildName truncates a name
// too long for Kubernetes, which the suite's short XR names never are), in the XR's namespace or,
// for an XR without one, cluster-scoped. A provider's write is the fake provider's: the test
// process's (e2e.test).
func (c *controlPlane) passes(xr schema.GroupVersionResource, from, to time.Time) (map[xrRef][]pass, error) {
	type event struct {
		at   time.Time
		what string // "start", "end", "applied", "created" or "answered"
		xr   xrRef
	}
	var events []event
	err := c.auditEvents(from, to, func(e *auditv1.Event) {
		o, at := e.ObjectRef, e.RequestReceivedTimestamp.Time
		manager := fieldManager(e.RequestURI)
		composer := xrRef{o.Namespace, o.Name[:max(0, strings.LastIndex(o.Name, "-"))]}
		switch {
		case o.APIGroup == xr.Group && o.Resource == xr.Resource && e.Verb == "patch" && manager == fieldOwnerXR:
			what := map[string]string{"": "start", "status": "end"}[o.Subresource]
			if what != "" {
				events = append(events, event{at: at, what: what, xr: xrRef{o.Namespace, o.Name}})
			}
		case e.Verb == "patch" && strings.HasPrefix(manager, fieldOwnerComposed) && e.ResponseStatus != nil:
			what := "applied"
			if e.ResponseStatus.Code == 201 {
				what = "created"
			}
			events = append(events, event{at: at, what: what, xr: composer})
		case strings.HasPrefix(e.UserAgent, "e2e.test/") && o.Subresource == "status" && e.ResponseStatus != nil && e.ResponseStatus.Code < 300:
			events = append(events, event{at: at, what: "answered", xr: composer})
		}
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(events, func(a, b event) int { return a.at.Compare(b.at) })
	out := map[xrRef][]pass{}
	open, answered := map[xrRef]*pass{}, map[xrRef]time.Time{}
	for _, e := range events {
		p := open[e.xr]
		switch e.what {
		case "start":
			open[e.xr] = &pass{start: e.at, answered: answered[e.xr]}
			delete(answered, e.xr)
		case "applied", "created":
			if p != nil {
				p.applied++
				if e.what == "created" {
					p.created++
				}
			}
		case "end":
			if p != nil {
				p.end = e.at
				out[e.xr] = append(out[e.xr], *p)
				delete(open, e.xr)
			}
		case "answered":
			answered[e.xr] = e.at
		}
	}
	return out, nil
}

// fieldManager is the fieldManager parameter of a request's URI, "" if none.
func fieldManager(requestURI string) string {
	u, err := url.ParseRequestURI(requestURI)
	if err != nil {
		return ""
	}
	return u.Query().Get("fieldManager")
}

// walkShares splits each claim's walk, from its creation until it was seen Ready, into its passes
// (those that ended before), the providers' time (from the end of a pass until their last answer
// before the next), the wait for a worker (from that answer until the next pass), and the rest
// (before the first pass; between passes no provider answered in between, when the claim waited
// on its TTL; from its last pass until the claim showed Ready); and says it summed over the
// claims, with how many passes a claim took and what its last one did.
type walkShares struct {
	walk, inPasses, providers, worker time.Duration
	passes, creating, claims          int
	lastApplied                       []int
	lastTook                          []time.Duration
}

// add counts one claim's walk, and returns how many of its passes it counted.
func (s *walkShares) add(created, ready time.Time, passes []pass) (counted int) {
	s.claims++
	s.walk += ready.Sub(created)
	var last *pass
	for i := range passes {
		p := &passes[i]
		// The pass that made the XR Ready ended before its claim was seen Ready; a pass that
		// ends after it is the settled claim's.
		if p.end.After(ready) {
			break
		}
		s.passes++
		counted++
		if p.created > 0 {
			s.creating++
		}
		s.inPasses += p.end.Sub(p.start)
		if last != nil && !p.answered.IsZero() {
			// An answer may come while the pass before applies: the wait starts at its end.
			answered := later(p.answered, last.end)
			s.providers += answered.Sub(last.end)
			s.worker += p.start.Sub(answered)
		}
		last = p
	}
	if last != nil {
		s.lastApplied = append(s.lastApplied, last.applied)
		s.lastTook = append(s.lastTook, last.end.Sub(last.start))
	}
	return counted
}

func (s *walkShares) String() string {
	share := func(d time.Duration) float64 { return 100 * d.Seconds() / s.walk.Seconds() }
	rest := s.walk - s.inPasses - s.providers - s.worker
	applied := slices.Sorted(slices.Values(s.lastApplied))
	return fmt.Sprintf("where the claims' time from creation to Ready went: Crossplane's compose passes %.0f%%, "+
		"waiting for a pass once the providers had answered %.0f%%, the providers (the suite's fake) %.0f%%, "+
		"the rest (before the first pass, a TTL's wait, the claim's sync) %.0f%%; %.1f passes a claim (%.1f created something), "+
		"its last applying %d resources one after the other in %.1fs (p50)",
		share(s.inPasses), share(s.worker), share(s.providers), share(rest),
		float64(s.passes)/float64(s.claims), float64(s.creating)/float64(s.claims),
		applied[len(applied)/2], percentile(s.lastTook, 50).Seconds())
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// printPasses prints where the claims' walks went (walkShares): each claim ks[i] created at
// created[i] and seen Ready at readyAt[i]; the audit log read from from.
func printPasses(t *testing.T, a *api, ks []*karpenter, created, readyAt []time.Time, from time.Time) {
	t.Helper()
	all, err := cp.passes(a.xrResource(), from, slices.MaxFunc(readyAt, time.Time.Compare).Add(time.Second))
	var s walkShares
	for i, k := range ks {
		// A claim gets Ready only through a pass that ended before it was seen Ready: none read
		// means the reader is wrong, not the walk.
		if s.add(created[i], readyAt[i], all[k.xr]) == 0 && err == nil {
			err = fmt.Errorf("%d compose passes of %s read from %s*.log in %s, none ended before its claim was seen Ready at %s",
				len(all[k.xr]), k.xr, auditLog, cp.logDir, readyAt[i].Format(time.RFC3339))
		}
	}
	if err != nil {
		t.Errorf("the claims' compose passes: %v", err)
		return
	}
	fmt.Printf("load: walk: %s\n", &s)
}
