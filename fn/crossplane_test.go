package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"testing"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// resolve answers, as Crossplane's FetchingFunctionRunner does within one
// reconcile, every requirement the function asks for req, from the objects
// that exist: it calls the function until two calls in a row ask the same,
// and returns the answers the last call had.
func resolve(t testing.TB, req *fnv1.RunFunctionRequest, existing []map[string]any) map[string]*fnv1.Resources {
	t.Helper()
	f := &Function{log: logging.NewNopLogger()}
	req = proto.CloneOf(req)
	req.RequiredResources = map[string]*fnv1.Resources{}
	var asked *fnv1.Requirements
	for range 6 {
		rsp, err := f.RunFunction(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if fatal(rsp) != "" || proto.Equal(rsp.GetRequirements(), asked) {
			return req.GetRequiredResources()
		}
		asked = rsp.GetRequirements()
		next := map[string]*fnv1.Resources{}
		for name, sel := range asked.GetResources() {
			next[name] = fetch(t, sel, existing)
		}
		req.RequiredResources = next
	}
	t.Fatal("the function's requirements did not stabilise")
	return nil
}

// fetch is what Crossplane v2.4.2's ExistingRequiredResourcesFetcher answers
// a selector with (internal/xfn/required_resources.go, Fetch): the object of
// that name (in that namespace), or the objects with those labels in that
// namespace, or in every namespace when none is given, sorted by namespace
// and name; nothing found by name answers nil.
func fetch(t testing.TB, sel *fnv1.ResourceSelector, existing []map[string]any) *fnv1.Resources {
	t.Helper()
	var found []map[string]any
	for _, o := range existing {
		u := &unstructured.Unstructured{Object: o}
		if u.GetAPIVersion() != sel.GetApiVersion() || u.GetKind() != sel.GetKind() {
			continue
		}
		if name := sel.GetMatchName(); name != "" {
			if u.GetName() == name && u.GetNamespace() == sel.GetNamespace() {
				found = append(found, o)
			}
			continue
		}
		if sel.Namespace != nil && u.GetNamespace() != sel.GetNamespace() {
			continue
		}
		match := true
		for k, v := range sel.GetMatchLabels().GetLabels() {
			match = match && u.GetLabels()[k] == v
		}
		if match {
			found = append(found, o)
		}
	}
	if len(found) == 0 && sel.GetMatchName() != "" {
		return nil
	}
	sort.Slice(found, func(i, j int) bool {
		a, b := &unstructured.Unstructured{Object: found[i]}, &unstructured.Unstructured{Object: found[j]}
		return a.GetNamespace()+"/"+a.GetName() < b.GetNamespace()+"/"+b.GetName()
	})
	out := &fnv1.Resources{}
	for _, o := range found {
		out.Items = append(out.Items, &fnv1.Resource{Resource: mustStruct(t, o)})
	}
	return out
}
