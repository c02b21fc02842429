package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"google.golang.org/protobuf/proto"
)

// A caller is the function as Crossplane reaches it: in process or over
// gRPC.
type caller func(context.Context, *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error)

// fetching calls the function as Crossplane v2.4's FetchingFunctionRunner
// does in one reconcile (internal/xfn/required_resources.go): while a
// response asks for required resources the request does not answer, it
// calls again with them answered — here, by what the request already had
// for them, or nothing found — keeping the first call's meta.tag, as
// Crossplane does; it stops when two responses in a row ask the same, or at
// once when the first call's requirements were all answered already, or on
// a Fatal result. It returns the response Crossplane applies and how many
// calls it took.
func fetching(ctx context.Context, call caller, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, int, error) {
	var asked *fnv1.Requirements
	for calls := 1; calls <= 6; calls++ {
		rsp, err := call(ctx, req)
		if err != nil {
			return nil, calls, err
		}
		if fatal(rsp) != "" || proto.Equal(rsp.GetRequirements(), asked) {
			return rsp, calls, nil
		}
		answered := true
		next := map[string]*fnv1.Resources{}
		for name := range rsp.GetRequirements().GetResources() {
			found, ok := req.GetRequiredResources()[name]
			if !ok {
				answered, found = false, &fnv1.Resources{}
			}
			next[name] = found
		}
		if calls == 1 && answered {
			return rsp, calls, nil
		}
		asked = rsp.GetRequirements()
		req = &fnv1.RunFunctionRequest{Meta: req.GetMeta(), Observed: req.GetObserved(), Desired: req.GetDesired(),
			Input: req.GetInput(), Context: req.GetContext(), Credentials: req.GetCredentials(), RequiredResources: next}
	}
	return nil, 6, fmt.Errorf("requirements did not stabilise")
}

// crossplaneTag is the meta.tag Crossplane v2.4 gives a request
// (composition_functions.go, Tag): SHA-256 of its deterministic encoding,
// computed before meta is set.
func crossplaneTag(t testing.TB, req *fnv1.RunFunctionRequest) string {
	t.Helper()
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}
