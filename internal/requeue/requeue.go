// Package requeue paces a claim on its way to Ready: how soon Crossplane
// should call the function again (the response's TTL, after which it
// requeues the XR whether or not a watch event came; an XR with this many
// composed resources often has its watch events throttled by Crossplane's
// circuit breaker, so the TTL is what moves it on).
//
// The pace follows what the claim waits on. Right after a resource was
// emitted, written, or changed state, the next call comes soon; the longer the
// unready resources have stayed as they are — a slow provider at work —
// the longer the wait, up to Longest. A settled claim gets the platform's
// input.settledInterval.
package requeue

import (
	"time"

	xpv1 "github.com/crossplane/crossplane-runtime/v2/apis/common/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"

	"github.com/do-now/function-karpenter/internal/sequence"
)

// The bounds of the pace.
const (
	// Settled is the TTL of an answer given before the platform's input is
	// read (a refusal of an XR or input that is not valid): the SDK's
	// default. A claim with nothing to wait for gets the platform's
	// input.settledInterval, by default the same.
	Settled = time.Minute
	// Shortest is the TTL right after a resource was emitted or changed.
	Shortest = 2 * time.Second
	// Longest is the TTL of a claim that waited long on a slow provider.
	Longest = 30 * time.Second
	// Fraction of the time already waited that the next wait is: a
	// resource that turns Ready is seen at most half as late again as it
	// took.
	Fraction = 2
	// Unnamed is the TTL of a claim held back with nothing named to pace
	// by (an upgrade between steps, say).
	Unnamed = 15 * time.Second
)

// Waiting is the TTL of a claim that waits on the unready resources named,
// at now. A name not observed yet has just been emitted. Otherwise the
// claim has waited since the latest moment any of them was created,
// written (by Crossplane applying a change, or its provider: the times of
// its managed fields) or changed its Ready or Synced condition.
func Waiting(now time.Time, unready []resource.Name, observed map[resource.Name]resource.ObservedComposed) time.Duration {
	if len(unready) == 0 {
		return Unnamed
	}
	var since time.Time
	for _, name := range unready {
		ocd, ok := observed[name]
		if !ok {
			return Shortest
		}
		for _, t := range changes(ocd.Resource) {
			if t.After(since) {
				since = t
			}
		}
	}
	if since.IsZero() {
		return Shortest
	}
	return min(max(now.Sub(since)/Fraction, Shortest), Longest)
}

// changes are when a resource was created, last written by each of its
// managers and when its Ready and Synced conditions last changed, as far
// as it says.
func changes(r *composed.Unstructured) []time.Time {
	var at []time.Time
	if t := r.GetCreationTimestamp(); !t.IsZero() {
		at = append(at, t.Time)
	}
	meta, _ := r.Object["metadata"].(map[string]any)
	managed, _ := meta["managedFields"].([]any)
	for _, m := range managed {
		m, _ := m.(map[string]any)
		raw, _ := m["time"].(string)
		if t, err := time.Parse(time.RFC3339, raw); err == nil {
			at = append(at, t)
		}
	}
	for _, t := range []xpv1.ConditionType{xpv1.TypeReady, xpv1.TypeSynced} {
		if c := sequence.ConditionOf(r, t); !c.LastTransitionTime.IsZero() {
			at = append(at, c.LastTransitionTime.Time)
		}
	}
	return at
}
