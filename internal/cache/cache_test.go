package cache

import (
	"strings"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

func request(t *testing.T, tag, name string, required map[string]*fnv1.Resources) *fnv1.RunFunctionRequest {
	t.Helper()
	xr, err := structpb.NewStruct(map[string]any{"apiVersion": "v1", "kind": "X", "metadata": map[string]any{"name": name}})
	if err != nil {
		t.Fatal(err)
	}
	req := &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: xr}}, RequiredResources: required}
	if tag != "" {
		req.Meta = &fnv1.RequestMeta{Tag: tag}
	}
	return req
}

func key(t *testing.T, req *fnv1.RunFunctionRequest) string {
	t.Helper()
	k, err := Key(req)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestKey: Crossplane calls again with the first call's tag and the
// required resources it found; the key must tell the two calls apart. A tag
// that is not a digest is not trusted.
func TestKey(t *testing.T) {
	t1, t2 := strings.Repeat("a1", 32), strings.Repeat("b2", 32)
	none := map[string]*fnv1.Resources{"roles": {}}
	role, _ := structpb.NewStruct(map[string]any{"kind": "Role"})
	one := map[string]*fnv1.Resources{"roles": {Items: []*fnv1.Resource{{Resource: role}}}}

	if key(t, request(t, t1, "a", nil)) == key(t, request(t, t1, "a", none)) {
		t.Error("one tag, unanswered and answered requirements: same key")
	}
	if key(t, request(t, t1, "a", none)) == key(t, request(t, t1, "a", one)) {
		t.Error("one tag, two answers: same key")
	}
	if key(t, request(t, t1, "a", one)) != key(t, request(t, t1, "a", one)) {
		t.Error("identical requests: different keys")
	}
	if key(t, request(t, t1, "a", nil)) == key(t, request(t, t2, "a", nil)) {
		t.Error("two tags: same key")
	}
	// The tag stands for the observed state: two XRs under one digest tag
	// share a key (Crossplane never sends that), under any other tag not.
	if key(t, request(t, t1, "a", nil)) != key(t, request(t, t1, "b", nil)) {
		t.Error("one digest tag, two observed states: the tag is not trusted")
	}
	if key(t, request(t, "test", "a", nil)) == key(t, request(t, "test", "b", nil)) {
		t.Error(`one tag "test", two observed states: same key`)
	}
	// Without a tag, the whole request is the key.
	if key(t, request(t, "", "a", nil)) == key(t, request(t, "", "b", nil)) {
		t.Error("untagged requests of two XRs: same key")
	}
	if key(t, request(t, "", "a", none)) != key(t, request(t, "", "a", none)) {
		t.Error("identical untagged requests: different keys")
	}
}

func TestResponses(t *testing.T) {
	c := New(2)
	put := func(xr, key string, rsp *fnv1.RunFunctionResponse) {
		if err := c.Put(xr, key, rsp); err != nil {
			t.Fatal(err)
		}
	}
	r1, r2, r3 := &fnv1.RunFunctionResponse{}, &fnv1.RunFunctionResponse{}, &fnv1.RunFunctionResponse{Meta: &fnv1.ResponseMeta{Tag: "r3"}}
	put("a", "a1", r1)
	if got, ok := c.Get("a1"); !ok || got != r1 {
		t.Error("a's answer to a1 is not served")
	}
	if _, ok := c.Get("a2"); ok {
		t.Error("an answer served for a key never put")
	}
	put("a", "a2", r2)
	if _, ok := c.Get("a1"); ok {
		t.Error("a's older answer still served: one answer per XR")
	}
	if _, ok := c.Encoded(r1); ok {
		t.Error("the encoding of a's older answer is still kept")
	}
	put("b", "b1", r1)
	if _, ok := c.Get("a2"); !ok { // a is now the most recently served
		t.Error("a's answer to a2 is not served")
	}
	put("c", "c1", r3)
	if c.Len() != 2 {
		t.Errorf("%d XRs kept, want at most 2", c.Len())
	}
	if _, ok := c.Get("b1"); ok {
		t.Error("b, the least recently served, was not the one evicted")
	}
	if got, ok := c.Get("c1"); !ok || got != r3 {
		t.Error("c's answer is not served")
	}
	wire, ok := c.Encoded(r3)
	var decoded fnv1.RunFunctionResponse
	if !ok || proto.Unmarshal(wire, &decoded) != nil || !proto.Equal(&decoded, r3) {
		t.Errorf("c's answer's encoding %q does not decode to it", wire)
	}
	off := New(0)
	if err := off.Put("a", "a1", r1); err != nil {
		t.Fatal(err)
	}
	if _, ok := off.Get("a1"); ok {
		t.Error("a cache of size 0 kept an answer")
	}
}
