package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/response"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/do-now/function-karpenter/internal/cache"
	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/requeue"
)

// TestFirstCallAsksOnly: a call whose requirements Crossplane has not
// answered yet is discarded whole (Crossplane v2.4 calls again, in the same
// reconcile, and applies only the last response), so the function says what
// it requires and nothing else — even for a settled claim — and the second
// call composes everything.
func TestFirstCallAsksOnly(t *testing.T) {
	all := benchStates(t)[2].observed
	f := &Function{log: logging.NewNopLogger()}
	first, err := f.RunFunction(context.Background(), aRequest(t).observing(all).build())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(first.GetDesired().GetResources()); n != 0 {
		t.Errorf("the first call composed %d resources", n)
	}
	if len(first.GetConditions()) != 0 || len(first.GetResults()) != 0 {
		t.Errorf("the first call says more than its requirements: %v %v", first.GetConditions(), first.GetResults())
	}
	if got := len(first.GetRequirements().GetResources()); got != 4 {
		t.Errorf("the first call requires %d resources, want the roles and leases of both APIs", got)
	}
	rsp, calls, err := fetching(context.Background(), f.RunFunction, aRequest(t).observing(all).build())
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 || len(rsp.GetDesired().GetResources()) != len(all) {
		t.Errorf("after %d calls %d resources desired, want 2 calls and the %d observed", calls, len(rsp.GetDesired().GetResources()), len(all))
	}
}

// TestCacheServesWhatDoesNotDependOnTheClock: a settled claim's answer is
// served from the cache, identical to the composed one; the answer of a
// claim that waits is paced by the clock, so it is composed every time.
func TestCacheServesWhatDoesNotDependOnTheClock(t *testing.T) {
	states := benchStates(t)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f := &Function{log: logging.NewNopLogger(), cache: cache.New(8), clock: func() time.Time { return now }}
	uncached := &Function{log: logging.NewNopLogger(), clock: f.clock}

	settledReq := settled(aRequest(t)).observing(states[2].observed).build()
	want, _ := uncached.RunFunction(context.Background(), settledReq)
	first, _ := f.RunFunction(context.Background(), settledReq)
	again, _ := f.RunFunction(context.Background(), settledReq)
	if again != first {
		t.Error("the settled claim's second call was composed again, not served")
	}
	if diff := cmp.Diff(want, again, protocmp.Transform()); diff != "" {
		t.Errorf("served answer differs from the composed one (-composed +served):\n%s", diff)
	}
	if got := again.GetMeta().GetTtl().AsDuration(); got != requeue.Settled {
		t.Errorf("settled TTL %v, want %v", got, requeue.Settled)
	}
	// The platform's settled interval is the settled claim's TTL; the
	// default is the SDK's default TTL, which the function kept before.
	if d, err := time.ParseDuration(config.DefaultSettledInterval); err != nil || d != response.DefaultTTL || requeue.Settled != response.DefaultTTL {
		t.Errorf("the default settled interval %s is not the SDK's default TTL %s", config.DefaultSettledInterval, response.DefaultTTL)
	}
	slower, _ := uncached.RunFunction(context.Background(), settled(aRequest(t)).withInput("settledInterval", "10m").observing(states[2].observed).build())
	if got := slower.GetMeta().GetTtl().AsDuration(); got != 10*time.Minute {
		t.Errorf("with input.settledInterval 10m, the settled TTL is %v", got)
	}
	wire, ok := f.cache.Encoded(again)
	var kept fnv1.RunFunctionResponse
	if !ok || proto.Unmarshal(wire, &kept) != nil || !proto.Equal(&kept, again) {
		t.Error("the served answer is not what the cache keeps of it")
	}

	// The first call of a reconcile whose requirements are not answered
	// has a slot of its own: serving it evicts nothing.
	asking := aRequest(t).observing(states[2].observed).build()
	askedFirst, _ := f.RunFunction(context.Background(), asking)
	if askedAgain, _ := f.RunFunction(context.Background(), asking); askedAgain != askedFirst {
		t.Error("a first call's answer was composed again, not served")
	}
	if got, _ := f.RunFunction(context.Background(), settledReq); got != first {
		t.Error("serving a first call evicted the settled claim's answer")
	}

	waiting := settled(aRequest(t)).observing(states[1].observed).build()
	first, _ = f.RunFunction(context.Background(), waiting)
	again, _ = f.RunFunction(context.Background(), waiting)
	if again == first {
		t.Error("a waiting claim's answer was served from the cache although its TTL depends on the clock")
	}
	if got := again.GetMeta().GetTtl().AsDuration(); got < requeue.Shortest || got > requeue.Longest {
		t.Errorf("waiting TTL %v, want within [%v, %v]", got, requeue.Shortest, requeue.Longest)
	}
	if f.cache.Len() != 2 {
		t.Errorf("%d answers cached, want the settled one and its first call's", f.cache.Len())
	}
}

// TestAnswersAreByteStable: composing one request twice gives the same
// bytes, for every state, so the cache is exact and Crossplane is not
// handed a changed desired state by a call that changed nothing.
func TestAnswersAreByteStable(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f := &Function{log: logging.NewNopLogger(), clock: func() time.Time { return now }}
	for _, s := range benchStates(t) {
		req := settled(aRequest(t)).observing(s.observed).build()
		encoded := make([][]byte, 2)
		for i := range encoded {
			rsp, _ := f.RunFunction(context.Background(), req)
			raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(rsp)
			if err != nil {
				t.Fatal(err)
			}
			encoded[i] = raw
		}
		if !bytes.Equal(encoded[0], encoded[1]) {
			t.Errorf("%s: two compositions of one request differ", s.name)
		}
	}
}
