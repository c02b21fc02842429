package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/do-now/function-karpenter/internal/cache"
	"github.com/do-now/function-karpenter/internal/cluster"
	"github.com/do-now/function-karpenter/internal/requeue"
)

var propertySequences = flag.Int("sequences", 16, "how many random sequences TestInvariantsUnderRandomProviders drives, per API")

// stepOf maps every composed resource to its step, in order.
var stepOf = func() map[string]int {
	m := map[string]int{}
	for i, s := range [][]string{step1, step2, step3, step4, union(step5, observers)} {
		for _, n := range s {
			m[n] = i
		}
	}
	return m
}()

// TestInvariantsUnderRandomProviders drives the function through random
// sequences of what providers report — resources appearing, turning Ready,
// unready, failing with provider errors, disappearing — and checks, at
// every call, the invariants the product promises, for both APIs.
//
// Every reconcile is also served by a function with its response cache, as
// the function runs in production, and must answer exactly what the
// uncached function answers: the reconcile itself (two calls of one tag when
// the requirements were not answered yet), and a replay of an earlier
// reconcile of the sequence, for the first cachedSequences seeds (each
// costs three more compositions a call). Odd seeds send no meta.tag, so the
// cache keys by its own digest.
//
// Its size is a number of sequences (-sequences), not a duration: the unit
// run takes 16, a few seconds of a 2-core machine; make fuzz takes 200.
func TestInvariantsUnderRandomProviders(t *testing.T) {
	const calls = 30
	sequences := int64(*propertySequences)
	cachedSequences := max(sequences/8, 2)
	for _, a := range apis {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			settledState := walkToSettled(t, a)
			totalHits := 0
			for seed := int64(1); seed <= sequences; seed++ {
				rng := rand.New(rand.NewSource(seed))
				aws := fakeProviders{t: t, account: account}
				// Two slots: the first call's answer and the composed one.
				served := &Function{log: logging.NewNopLogger(), cache: cache.New(2)}
				var history []reconciled
				hits := 0
				observed := map[resource.Name]map[string]any{}
				for call := 0; call < calls; call++ {
					b := a.request(t).observing(observed)
					if rng.Intn(2) == 0 {
						b = b.requiring()
					}
					req := b.build()
					if seed%2 == 1 {
						req.Meta = nil
					}
					rsp := run(t, proto.CloneOf(req))
					where := fmt.Sprintf("seed %d call %d", seed, call)
					checkInvariants(t, where, observed, rsp)
					a.checkScope(t, where, rsp)
					if seed <= cachedSequences {
						history = append(history, reconciled{req, rsp})
						hits += checkCached(t, where, served, history[len(history)-1])
						hits += checkCached(t, where+" (replayed)", served, history[rng.Intn(len(history))])
					}
					if t.Failed() {
						return
					}
					if seed <= cachedSequences && rng.Intn(4) == 0 {
						// Everything settles now and then, where the
						// cache serves; the providers go on from there.
						observed = maps.Clone(settledState)
					} else {
						observed = mutate(rng, aws, observed, rsp)
					}
				}
				totalHits += hits
			}
			// Settled answers were served from the cache, against the
			// uncached answers: the cached path was tested, not just asked.
			t.Logf("%d answers served from the cache", totalHits)
			if int64(totalHits) < cachedSequences {
				t.Errorf("only %d settled answers served from the cache in %d sequences: the cached path went untested", totalHits, cachedSequences)
			}
		})
	}
}

// walkToSettled is what providers that answer at once report once the API's
// example claim is Ready.
func walkToSettled(t *testing.T, a api) map[resource.Name]map[string]any {
	t.Helper()
	aws := fakeProviders{t: t, account: account}
	var observed map[resource.Name]map[string]any
	for round := 0; round < 20; round++ {
		rsp := run(t, a.request(t).observing(observed).build())
		if rsp.GetDesired().GetComposite().GetReady() != fnv1.Ready_READY_FALSE && len(observed) == len(rsp.GetDesired().GetResources()) {
			return observed
		}
		observed = aws.observe(rsp, true)
	}
	t.Fatal("the example claim did not settle in 20 rounds")
	return nil
}

// A reconciled request and what the uncached function answered.
type reconciled struct {
	req *fnv1.RunFunctionRequest
	rsp *fnv1.RunFunctionResponse
}

// checkCached serves a reconcile through the cached function, as Crossplane
// calls it, and wants the uncached answer, then serves it again: an answer
// not paced by the clock must now come from the cache, still equal to the
// uncached one and to the encoding the cache keeps of it.
func checkCached(t *testing.T, where string, served *Function, r reconciled) (hits int) {
	t.Helper()
	var first *fnv1.RunFunctionResponse
	for i := range 2 {
		got, _, err := fetching(context.Background(), served.RunFunction, proto.CloneOf(r.req))
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if diff := cmp.Diff(r.rsp, got, protocmp.Transform()); diff != "" {
			t.Errorf("%s, served %d: the cached function answers otherwise than the function (-uncached +cached):\n%s", where, i+1, diff)
		}
		if i == 0 {
			first = got
			continue
		}
		if got.GetMeta().GetTtl().AsDuration() != requeue.Settled {
			continue // paced: composed every time
		}
		wire, ok := served.cache.Encoded(got)
		if got != first || !ok {
			t.Errorf("%s: a settled answer served again was not served from the cache", where)
			continue
		}
		hits++
		var kept fnv1.RunFunctionResponse
		if err := proto.Unmarshal(wire, &kept); err != nil || !proto.Equal(&kept, got) {
			t.Errorf("%s: the cached answer no longer equals its kept encoding", where)
		}
	}
	return hits
}

func checkInvariants(t *testing.T, where string, observed map[resource.Name]map[string]any, rsp *fnv1.RunFunctionResponse) {
	t.Helper()
	if msg := fatal(rsp); msg != "" {
		t.Fatalf("%s: fatal result for a valid claim: %s", where, msg)
	}
	desired := rsp.GetDesired().GetResources()

	// Nothing that exists is ever withheld or dropped, but an access
	// check another one supersedes.
	for n, o := range observed {
		if _, ok := desired[string(n)]; !ok && !superseded(n, o, rsp) {
			t.Errorf("%s: %s exists but is not desired: Crossplane would delete it", where, n)
		}
	}
	if checks := checksOf(rsp); len(checks) > 1 {
		t.Errorf("%s: %d access checks composed, want the current one only: %v", where, len(checks), checks)
	}
	// The steps know the access check by its first name.
	observed = byStepName(observed)

	// A resource that does not exist yet appears only once every resource of
	// every earlier step is observed Ready. The pools' observers follow
	// step 5 but hold nothing back, whatever they report, even absent.
	firstUnready := 5
	for n, s := range stepOf {
		if slices.Contains(observers, n) {
			continue
		}
		if s < firstUnready && !observedReady(observed[resource.Name(n)]) {
			firstUnready = s
		}
	}
	for n := range desired {
		if cluster.IsCheckName(resource.Name(n)) {
			n = string(cluster.AccessCheck)
		}
		s, ours := stepOf[n]
		if _, exists := observed[resource.Name(n)]; ours && !exists && s > firstUnready {
			t.Errorf("%s: %s (step %d) appeared while step %d is not Ready", where, n, s+1, firstUnready+1)
		}
	}

	// The XR is Ready only when everything is.
	heldBack := rsp.GetDesired().GetComposite().GetReady() == fnv1.Ready_READY_FALSE
	if everything := firstUnready == 5; heldBack == everything {
		t.Errorf("%s: XR held back %v while everything Ready is %v", where, heldBack, everything)
	}

	// A provider error on a resource of the step being worked on reaches the
	// XR's conditions with the provider's message.
	var messages []string
	for _, c := range rsp.GetConditions() {
		messages = append(messages, c.GetMessage())
	}
	all := strings.Join(messages, "\n")
	for n, o := range observed {
		if s, ours := stepOf[string(n)]; ours && s == firstUnready {
			if msg := syncMessage(o); msg != "" && !strings.Contains(all, msg) {
				t.Errorf("%s: provider error of %s (%q) is not on the XR's conditions:\n%s", where, n, msg, all)
			}
		}
	}
}

// mutate plays the providers for one round: each desired resource may be
// created; each existing one may turn Ready, unready, fail or vanish.
func mutate(rng *rand.Rand, aws fakeProviders, observed map[resource.Name]map[string]any, rsp *fnv1.RunFunctionResponse) map[resource.Name]map[string]any {
	next := map[resource.Name]map[string]any{}
	names := make([]string, 0, len(rsp.GetDesired().GetResources()))
	for n := range rsp.GetDesired().GetResources() {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		desired := rsp.GetDesired().GetResources()[n].GetResource().AsMap()
		o, exists := observed[resource.Name(n)]
		switch r := rng.Intn(10); {
		case !exists && r < 6:
			next[resource.Name(n)] = aws.created(desired, r < 3)
		case !exists:
		case r < 5:
			next[resource.Name(n)] = aws.created(desired, true)
		case r < 7:
			next[resource.Name(n)] = o
		case r < 8:
			next[resource.Name(n)] = aws.created(desired, false)
		case r < 9 && o["kind"] != "Pod" && o["kind"] != "Namespace" && o["kind"] != "ServiceAccount" && o["kind"] != "Kustomization":
			next[resource.Name(n)] = failing(aws.created(desired, false), fmt.Sprintf("provider error %d on %s", rng.Intn(1000), n))
		default:
			// Vanished: deleted out of band, or not yet in the cache.
		}
	}
	return next
}

func observedReady(o map[string]any) bool {
	if o == nil {
		return false
	}
	switch o["kind"] {
	case "ServiceAccount":
		return true
	case "Namespace":
		return o["status"].(map[string]any)["phase"] == "Active"
	}
	status, _ := o["status"].(map[string]any)
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		c := c.(map[string]any)
		if (c["type"] == "Ready" || c["type"] == "Complete") && c["status"] == "True" {
			return true
		}
	}
	return false
}

func syncMessage(o map[string]any) string {
	status, _ := o["status"].(map[string]any)
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		c := c.(map[string]any)
		if c["type"] == "Synced" && c["status"] == "False" {
			msg, _ := c["message"].(string)
			return msg
		}
	}
	return ""
}
