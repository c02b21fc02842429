package main

import (
	"bytes"
	"context"
	"math"
	"net"
	"testing"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/do-now/function-karpenter/internal/cache"
)

// TestWireServesWhatTheFunctionAnswers serves the function on loopback
// with its codec, and calls it as Crossplane does for each state of the
// example claim, twice, tagged and untagged: every answer must be the
// uncached function's, and a settled claim's second reconcile must be
// answered without decoding its observed state.
func TestWireServesWhatTheFunctionAnswers(t *testing.T) {
	f := &Function{log: logging.NewNopLogger(), cache: cache.New(10)}
	w := wire{f: f, proto: encoding.GetCodecV2("proto")}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ForceServerCodecV2(w))
	fnv1.RegisterFunctionRunnerServiceServer(srv, f)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := fnv1.NewFunctionRunnerServiceClient(conn)
	call := func(ctx context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
		return client.RunFunction(ctx, req)
	}

	for _, s := range benchStates(t) {
		for _, tagged := range []bool{true, false} {
			req := aRequest(t).observing(s.observed).build()
			if !tagged {
				req.Meta = nil
			}
			want := run(t, req)
			for i := range 2 {
				got, _, err := fetching(context.Background(), call, req)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
					t.Errorf("%s (tagged %v), reconcile %d: served over gRPC otherwise than the function answers (-function +served):\n%s", s.name, tagged, i+1, diff)
				}
			}
		}
	}

	// The shortcut itself: the settled claim's request decoded only as far
	// as its key, and its answer put aside for RunFunction — which must
	// serve it even when another XR's answer evicted it from the cache in
	// between.
	f = &Function{log: logging.NewNopLogger(), cache: cache.New(1), answers: answersMetric()}
	w = wire{f: f, proto: encoding.GetCodecV2("proto")}
	req := settled(aRequest(t)).observing(benchStates(t)[2].observed).build()
	raw, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	decode := func() *fnv1.RunFunctionRequest {
		var got fnv1.RunFunctionRequest
		if err := w.Unmarshal(mustBuffer(raw), &got); err != nil {
			t.Fatal(err)
		}
		return &got
	}
	first := decode()
	if _, apart := f.decoded.Load(first); !apart || !proto.Equal(first, withoutObservedResources(req)) {
		t.Fatalf("a request not answered yet was not decoded, its observed resources apart (apart: %v)", apart)
	}
	rsp, _ := f.RunFunction(context.Background(), first)
	if _, left := f.decoded.Load(first); left {
		t.Error("the observed resources decoded apart stay after the request was answered")
	}
	again := decode()
	if again.GetObserved() != nil || again.GetMeta().GetTag() != req.GetMeta().GetTag() {
		t.Errorf("a request answered before was decoded beyond its key: observed %v", again.GetObserved() != nil)
	}
	other := settled(aRequest(t)).observing(benchStates(t)[2].observed)
	other.xr["metadata"] = map[string]any{"name": "team-b-karpenter-a1b2c"}
	if _, err := f.RunFunction(context.Background(), other.build()); err != nil || f.cache.Len() != 1 {
		t.Fatalf("another XR's answer did not evict: %v", err)
	}
	if got, _ := f.RunFunction(context.Background(), again); got != rsp {
		t.Error("RunFunction did not answer with the response put aside for the request")
	}
	if _, left := f.pending.Load(again); left {
		t.Error("the response put aside stays after it was served")
	}
	// Two composed (the first request, the other XR's), one from the cache.
	for from, want := range map[string]float64{"composed": 2, "cache": 1} {
		if got := testutil.ToFloat64(f.answers.WithLabelValues(from)); got != want {
			t.Errorf("function_karpenter_answers_total{from=%q} = %v, want %v", from, got, want)
		}
	}
	encoded, err := w.Marshal(rsp)
	if err != nil {
		t.Fatal(err)
	}
	// The response holds its desired resources encoded (setDesiredEncoded):
	// decoded, it is what the function answers in process.
	var decoded fnv1.RunFunctionResponse
	if err := proto.Unmarshal(encoded.Materialize(), &decoded); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(run(t, req), &decoded, protocmp.Transform()); diff != "" {
		t.Errorf("the kept encoding does not decode to the function's answer (-function +kept):\n%s", diff)
	}
}

// throughCodec calls f as gRPC does with the function's codec, without the
// network: the request encoded and decoded by wire (decoded apart when it
// carries Crossplane's tag), the answer encoded by wire and decoded as
// Crossplane decodes it.
func throughCodec(f *Function) caller {
	w := wire{f: f, proto: encoding.GetCodecV2("proto")}
	return func(ctx context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
		raw, err := proto.Marshal(req)
		if err != nil {
			return nil, err
		}
		decoded := &fnv1.RunFunctionRequest{}
		if err := w.Unmarshal(mustBuffer(raw), decoded); err != nil {
			return nil, err
		}
		rsp, err := f.RunFunction(ctx, decoded)
		if err != nil {
			return nil, err
		}
		encoded, err := w.Marshal(rsp)
		if err != nil {
			return nil, err
		}
		answer := &fnv1.RunFunctionResponse{}
		return answer, proto.Unmarshal(encoded.Materialize(), answer)
	}
}

// withoutObservedResources is req as observedApart leaves it for proto:
// without its observed composed resources' resource fields.
func withoutObservedResources(req *fnv1.RunFunctionRequest) *fnv1.RunFunctionRequest {
	out := proto.CloneOf(req)
	for _, r := range out.GetObserved().GetResources() {
		r.Resource = nil
	}
	return out
}

// TestObservedApartReadsWhatTheSDKReads holds the codec's own decoding of
// the observed composed resources to what it replaces: proto's decoding
// of the request, read by the SDK (request.GetObservedComposedResources).
// Over every state of the example claim and a resource of every kind of
// JSON value, the rest of the request must decode to the request without
// those resources, and the resources to what the SDK reads; over what
// proto would merge, the codec must decline, and proto decodes it whole.
func TestObservedApartReadsWhatTheSDKReads(t *testing.T) {
	odd := map[string]any{
		"apiVersion": "example.org/v1", "kind": "Odd",
		"numbers": []any{0, -1.5, 1e300, 3, math.NaN(), math.Inf(1), math.Inf(-1)},
		"nulls":   map[string]any{"a": nil}, "bools": []any{true, false},
		"empty": map[string]any{"map": map[string]any{}, "list": []any{}, "string": ""},
		"deep":  []any{[]any{map[string]any{"é ✓": "line\nbreak"}}},
	}
	var reqs []*fnv1.RunFunctionRequest
	for _, s := range benchStates(t) {
		reqs = append(reqs, s.onto(settled(aRequest(t))).build())
	}
	withOdd := aRequest(t).observing(map[resource.Name]map[string]any{"odd": odd}).build()
	withOdd.Observed.Resources["odd"].ConnectionDetails = map[string][]byte{"password": []byte("s3cr3t")}
	withOdd.Observed.Resources["bare"] = &fnv1.Resource{} // no resource field at all
	reqs = append(reqs, withOdd)
	for i, req := range reqs {
		raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		rest, objects, err := observedApart(raw)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		got := &fnv1.RunFunctionRequest{}
		if err := proto.Unmarshal(rest, got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(withoutObservedResources(req), got, protocmp.Transform()); diff != "" {
			t.Errorf("request %d: the rest is not the request without its observed resources (-want +got):\n%s", i, diff)
		}
		want, err := request.GetObservedComposedResources(req)
		if err != nil {
			t.Fatal(err)
		}
		read, err := observedOf(got, objects)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, read, cmpopts.EquateNaNs()); diff != "" {
			t.Errorf("request %d: -SDK +observedApart:\n%s", i, diff)
		}
	}

	// What proto merges: the observed state twice, a Resource's resource
	// twice, a Value's kind twice. And what it does not: a Struct's key
	// twice, the last of which wins.
	field := func(b []byte, num protowire.Number, contents []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), contents)
	}
	raw, _ := proto.Marshal(withOdd)
	observed, _ := proto.Marshal(withOdd.GetObserved())
	obj, _ := proto.Marshal(&structpb.Struct{Fields: map[string]*structpb.Value{"a": structpb.NewBoolValue(true)}})
	resourceTwice := field(field(nil, 1, obj), 1, obj)
	entry := field(field(nil, 1, []byte("r")), 2, resourceTwice)
	for name, b := range map[string][]byte{
		"observed twice": field(raw, 2, observed),
		"resource twice": field(nil, 2, field(nil, 2, entry)),
	} {
		if _, _, err := observedApart(b); err == nil {
			t.Errorf("%s: decoded apart; proto merges it", name)
		}
	}
	kindTwice := protowire.AppendVarint(protowire.AppendTag(field(nil, 3, []byte("s")), 4, protowire.VarintType), 1)
	if _, err := valueOf(kindTwice); err == nil {
		t.Error("a Value of two kinds decoded apart; proto keeps the last, and merges messages")
	}
	keyTwice := append(obj[:len(obj):len(obj)], obj...)
	if m, err := structMap(keyTwice); err != nil || len(m) != 1 || m["a"] != true {
		t.Errorf("a Struct's key twice: %v, %v; proto keeps the last", m, err)
	}
}

// TestKeyFields: the fields the tag stands for are exactly those
// Crossplane never changes between the calls of one tag, by name; the key
// of a tagged request is the key of wire's key fields alone; and every
// other field, unknown ones included, is in the key.
func TestKeyFields(t *testing.T) {
	fields := (&fnv1.RunFunctionRequest{}).ProtoReflect().Descriptor().Fields()
	covered := map[protoreflect.Name]bool{"observed": true, "desired": true, "input": true, "credentials": true}
	for i := range fields.Len() {
		fd := fields.Get(i)
		if cache.TagCovers[fd.Number()] != covered[fd.Name()] {
			t.Errorf("field %d %s: covered by the tag %v, want %v", fd.Number(), fd.Name(), cache.TagCovers[fd.Number()], covered[fd.Name()])
		}
	}
	req := settled(aRequest(t)).observing(benchStates(t)[2].observed).build()
	req.Context, _ = structOf(map[string]any{"k": "v"})
	raw, _ := proto.Marshal(req)
	keyed, err := keyFields(raw)
	if err != nil {
		t.Fatal(err)
	}
	var only fnv1.RunFunctionRequest
	if err := proto.Unmarshal(keyed, &only); err != nil {
		t.Fatal(err)
	}
	if only.GetObserved() != nil || only.GetDesired() != nil || only.GetInput() != nil {
		t.Error("the key fields hold the observed, desired or input state")
	}
	full, _ := cache.Key(req)
	if partial, _ := cache.Key(&only); full != partial {
		t.Error("the key of a tagged request is not the key of its key fields")
	}
	// A field this SDK does not know (number 99), as a later Crossplane
	// might send it, changes the key both ways.
	unknown := protowire.AppendString(protowire.AppendTag(nil, 99, protowire.BytesType), "new")
	var more fnv1.RunFunctionRequest
	if err := proto.Unmarshal(append(append([]byte{}, raw...), unknown...), &more); err != nil {
		t.Fatal(err)
	}
	if k, _ := cache.Key(&more); k == full {
		t.Error("an unknown field is not in the key")
	}
	keyedMore, _ := keyFields(append(append([]byte{}, raw...), unknown...))
	if !bytes.HasSuffix(keyedMore, unknown) {
		t.Error("wire drops an unknown field from the key fields")
	}
}

func structOf(m map[string]any) (*structpb.Struct, error) { return structpb.NewStruct(m) }

// mustBuffer is raw as gRPC hands it to a codec: in more than one buffer.
func mustBuffer(raw []byte) mem.BufferSlice {
	half := len(raw) / 2
	return mem.BufferSlice{mem.SliceBuffer(raw[:half]), mem.SliceBuffer(raw[half:])}
}
