package main

import (
	"encoding/json"
	"sort"
	"testing"

	"github.com/crossplane/function-sdk-go/logging"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/do-now/function-karpenter/internal/cache"
)

// FuzzRunFunction runs the function on arbitrary XR specs and arbitrary
// observed states: it must never panic nor return an error, a refusal must
// be a Fatal result that composes nothing, and an accepted call must keep
// every resource that exists.
func FuzzRunFunction(f *testing.F) {
	// Every resource the example claim composes, as providers report it.
	aws := fakeProviders{t: f, account: account}
	all := map[resource.Name]map[string]any{}
	for range 6 {
		all = aws.observe(run(f, aRequest(f).observing(all).build()), true)
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, string(n))
	}
	sort.Strings(names)

	f.Add(`{}`, []byte{})
	f.Add(`{"cluster":{"name":"prod-eu2"}}`, []byte{1, 1, 1, 1, 1, 1, 1, 1})
	f.Add(`{"cluster":{"region":"us-gov-west-1"}}`, []byte{2, 0, 3, 2, 4})
	f.Add(`{"pools":{"public":{"enabled":false}}}`, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	f.Add(`{"nodeIdentity":{"roleArn":"arn:aws:iam::999988887777:role/x"}}`, []byte{255, 255})
	f.Fuzz(func(t *testing.T, specPatch string, states []byte) {
		var patch map[string]any
		if json.Unmarshal([]byte(specPatch), &patch) != nil {
			return
		}
		b := aRequest(t)
		// The patch's keys are the spec's own, as a tenant writes them:
		// any string, never a path (a dotted or empty key included).
		spec := b.xr["spec"].(map[string]any)
		for k, v := range patch {
			spec[k] = v
		}
		observed := map[resource.Name]map[string]any{}
		for i, n := range names {
			if i >= len(states) {
				break
			}
			o := all[resource.Name(n)]
			switch states[i] % 5 {
			case 0: // absent
			case 1:
				observed[resource.Name(n)] = o
			case 2:
				observed[resource.Name(n)] = deepCopy(o)
				observed[resource.Name(n)]["status"] = map[string]any{}
			case 3:
				observed[resource.Name(n)] = deepCopy(o)
				delete(observed[resource.Name(n)], "spec")
			case 4:
				observed[resource.Name(n)] = map[string]any{"apiVersion": o["apiVersion"], "kind": o["kind"], "status": "not an object"}
			}
		}
		req := b.observing(observed).build()
		rsp := run(t, req)
		// Served, the request is decoded apart and the desired resources
		// written straight in their encoding: the same answer.
		served, _, err := fetching(t.Context(), throughCodec(&Function{log: logging.NewNopLogger(), cache: cache.New(1)}), req)
		if err != nil {
			t.Fatalf("served through the codec: %v", err)
		}
		if diff := cmp.Diff(rsp, served, protocmp.Transform()); diff != "" {
			t.Errorf("served through the codec otherwise than the function answers (-function +served):\n%s", diff)
		}
		if fatal(rsp) != "" {
			if len(rsp.GetDesired().GetResources()) != 0 {
				t.Errorf("a refused call composed %v", desiredNames(rsp))
			}
			return
		}
		for n, o := range observed {
			if _, ok := rsp.GetDesired().GetResources()[string(n)]; !ok && !superseded(n, o, rsp) {
				t.Errorf("%s exists but is not desired", n)
			}
		}
		if rsp.GetDesired().GetComposite() == nil {
			t.Error("no desired composite")
		}
	})
}
