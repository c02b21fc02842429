package main

import (
	"fmt"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/do-now/function-karpenter/internal/cache"
)

// wire is the gRPC codec the function serves with: gRPC's protobuf codec,
// with two shortcuts for a settled claim, whose request the cache has
// answered before.
//
//   - Decoding a request: when the request carries Crossplane's meta.tag,
//     only the fields its cache key is made of are decoded (every field but
//     those the tag stands for: see cache.Key), not the observed and
//     desired state, most of its bytes. If the cache holds the answer to
//     that key, the request is left at those fields and its answer is put
//     aside for RunFunction; otherwise the request is decoded whole.
//   - Encoding a response the cache holds: its encoding, kept with it.
//
// A request left partly decoded never reaches compose: RunFunction answers
// it with the response put aside for it, or, should that be gone, with an
// error Crossplane retries.
type wire struct {
	f     *Function
	proto encoding.CodecV2
}

// serveWire makes wire the codec of every gRPC call of this process. Like
// encoding.RegisterCodecV2, it must be called before serving.
func serveWire(f *Function) {
	encoding.RegisterCodecV2(wire{f: f, proto: encoding.GetCodecV2("proto")})
}

func (wire) Name() string { return "proto" }

func (w wire) Marshal(v any) (mem.BufferSlice, error) {
	if rsp, ok := v.(*fnv1.RunFunctionResponse); ok && w.f.cache != nil {
		if raw, ok := w.f.cache.Encoded(rsp); ok {
			return mem.BufferSlice{mem.SliceBuffer(raw)}, nil
		}
	}
	return w.proto.Marshal(v)
}

func (w wire) Unmarshal(data mem.BufferSlice, v any) error {
	req, ok := v.(*fnv1.RunFunctionRequest)
	if !ok || w.f.cache == nil {
		return w.proto.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	raw := buf.ReadOnlyData()
	keyed, err := keyFields(raw)
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(keyed, req); err != nil {
		return err
	}
	if cache.IsDigest(req.GetMeta().GetTag()) {
		if key, err := cache.Key(req); err == nil {
			if rsp, ok := w.f.cache.Get(key); ok {
				w.f.pending.Store(req, rsp)
				return nil
			}
		}
	}
	proto.Reset(req)
	return proto.Unmarshal(raw, req)
}

// keyFields are the encoded request's fields its cache key is made of, as
// they were encoded: all but those the tag stands for (cache.TagCovers),
// unknown ones included.
func keyFields(raw []byte) ([]byte, error) {
	var keyed []byte
	for b := raw; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, fmt.Errorf("cannot decode the request: %w", protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil, fmt.Errorf("cannot decode the request: %w", protowire.ParseError(m))
		}
		if !cache.TagCovers[num] {
			keyed = append(keyed, b[:n+m]...)
		}
		b = b[n+m:]
	}
	return keyed, nil
}
