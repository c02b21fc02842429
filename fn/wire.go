package main

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

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
//     aside for RunFunction; otherwise the request is decoded whole, its
//     observed resources straight into the maps the function reads
//     (observedApart).
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
		proto.Reset(req)
		if rest, objects, err := observedApart(raw); err == nil {
			if err := proto.Unmarshal(rest, req); err == nil {
				w.f.decoded.Store(req, objects)
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
	err := eachField(raw, func(num protowire.Number, _ protowire.Type, field, _ []byte) error {
		if !cache.TagCovers[num] {
			keyed = append(keyed, field...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot decode the request: %w", err)
	}
	return keyed, nil
}

// Decoding a request to compose: each observed composed resource (most of
// a request's bytes) is decoded from its encoding straight into the map the
// function reads it as, not into protobuf's Struct and then, by the SDK,
// into that map (structpb AsMap): the request is decoded by proto without
// those resources' resource fields, and their maps are put aside for
// RunFunction (Function.decoded). Only a request with Crossplane's tag
// takes this path: its cache key never reads the observed state (cache.Key),
// which such a request no longer carries whole. Anything this decoder does
// not take exactly as proto would (a field repeated that proto would merge)
// is decoded by proto, whole.

// errNotApart says a request is to be decoded whole.
var errNotApart = errors.New("not decoded apart")

// observedApart is the request's encoding without its observed composed
// resources' resource fields, and those resources as maps, by name.
func observedApart(raw []byte) ([]byte, map[string]map[string]any, error) {
	var rest []byte
	var objects map[string]map[string]any
	err := eachField(raw, func(num protowire.Number, typ protowire.Type, field, value []byte) error {
		if num != 2 || typ != protowire.BytesType { // RunFunctionRequest.observed
			rest = append(rest, field...)
			return nil
		}
		if objects != nil {
			return errNotApart // proto merges a repeated message field
		}
		objects = map[string]map[string]any{}
		state, err := stateApart(value, objects)
		if err != nil {
			return err
		}
		rest = protowire.AppendTag(rest, num, typ)
		rest = protowire.AppendBytes(rest, state)
		return nil
	})
	if objects == nil {
		err = errNotApart
	}
	return rest, objects, err
}

// stateApart is a State's encoding without its resources' resource fields,
// which it decodes into objects.
func stateApart(b []byte, objects map[string]map[string]any) ([]byte, error) {
	var state []byte
	err := eachField(b, func(num protowire.Number, typ protowire.Type, field, value []byte) error {
		if num != 2 || typ != protowire.BytesType { // State.resources, a map entry
			state = append(state, field...)
			return nil
		}
		var name string
		var entry []byte
		var obj map[string]any
		err := eachField(value, func(num protowire.Number, typ protowire.Type, field, value []byte) error {
			switch {
			case num == 1 && typ == protowire.BytesType: // the entry's key
				if !utf8.Valid(value) {
					return errNotApart
				}
				name = string(value)
				entry = append(entry, field...)
			case num == 2 && typ == protowire.BytesType: // the entry's Resource
				if obj != nil {
					return errNotApart
				}
				var resource []byte
				err := eachField(value, func(num protowire.Number, typ protowire.Type, field, value []byte) error {
					if num != 1 || typ != protowire.BytesType { // Resource.resource
						resource = append(resource, field...)
						return nil
					}
					if obj != nil {
						return errNotApart
					}
					var err error
					obj, err = structMap(value)
					return err
				})
				if err != nil {
					return err
				}
				if obj == nil {
					obj = map[string]any{} // as AsMap answers for no Struct
				}
				entry = protowire.AppendTag(entry, num, typ)
				entry = protowire.AppendBytes(entry, resource)
			default:
				entry = append(entry, field...)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if obj == nil {
			obj = map[string]any{}
		}
		objects[name] = obj // a map's last entry of a key wins, as in proto
		state = protowire.AppendTag(state, num, typ)
		state = protowire.AppendBytes(state, entry)
		return nil
	})
	return state, err
}

// structMap decodes a google.protobuf.Struct as structpb's AsMap returns it.
// It and valueOf walk the encoding in loops, not through eachField's
// callbacks, whose captured variables would each be allocated: they decode
// most of a request's bytes.
func structMap(b []byte) (map[string]any, error) {
	m := make(map[string]any, countField(b, 1))
	for len(b) > 0 {
		num, typ, _, value, rest, err := nextField(b)
		if err != nil {
			return nil, err
		}
		b = rest
		if num != 1 || typ != protowire.BytesType { // Struct.fields, a map entry
			continue // unknown to proto, and so to AsMap
		}
		var key string
		var v any
		seen := false
		for len(value) > 0 {
			num, typ, _, field, rest, err := nextField(value)
			if err != nil {
				return nil, err
			}
			value = rest
			switch {
			case num == 1 && typ == protowire.BytesType:
				if !utf8.Valid(field) {
					return nil, errNotApart
				}
				key = internKey(field)
			case num == 2 && typ == protowire.BytesType:
				if seen {
					return nil, errNotApart
				}
				seen = true
				if v, err = valueOf(field); err != nil {
					return nil, err
				}
			}
		}
		m[key] = v
	}
	return m, nil
}

// valueOf decodes a google.protobuf.Value as structpb's AsInterface returns
// it (protobuf v1.36 types/known/structpb): null as nil, NaN and the
// infinities as their names.
func valueOf(b []byte) (any, error) {
	var v any
	kinds := 0
	for len(b) > 0 {
		num, typ, _, value, rest, err := nextField(b)
		if err != nil {
			return nil, err
		}
		b = rest
		switch {
		case num == 1 && typ == protowire.VarintType: // null_value
			v = nil
		case num == 2 && typ == protowire.Fixed64Type: // number_value
			f, _ := protowire.ConsumeFixed64(value)
			n := math.Float64frombits(f)
			switch {
			case math.IsNaN(n):
				v = "NaN"
			case math.IsInf(n, 1):
				v = "Infinity"
			case math.IsInf(n, -1):
				v = "-Infinity"
			default:
				v = n
			}
		case num == 3 && typ == protowire.BytesType: // string_value
			if !utf8.Valid(value) {
				return nil, errNotApart
			}
			v = string(value)
		case num == 4 && typ == protowire.VarintType: // bool_value
			u, _ := protowire.ConsumeVarint(value)
			v = u != 0
		case num == 5 && typ == protowire.BytesType: // struct_value
			if v, err = structMap(value); err != nil {
				return nil, err
			}
		case num == 6 && typ == protowire.BytesType: // list_value
			list := make([]any, 0, countField(value, 1))
			for len(value) > 0 {
				num, typ, _, e, rest, err := nextField(value)
				if err != nil {
					return nil, err
				}
				value = rest
				if num != 1 || typ != protowire.BytesType { // ListValue.values
					continue
				}
				ev, err := valueOf(e)
				if err != nil {
					return nil, err
				}
				list = append(list, ev)
			}
			v = list
		default:
			continue // unknown to proto
		}
		// A oneof set twice: proto keeps the last, but merges a message
		// set twice in a row.
		kinds++
		if kinds > 1 {
			return nil, errNotApart
		}
	}
	return v, nil
}

// countField is how many length-delimited fields of this number an encoding
// holds, to size what they are decoded into; 0 if the encoding is bad (the
// decoding then says so).
func countField(b []byte, want protowire.Number) int {
	n := 0
	for len(b) > 0 {
		num, typ, _, _, rest, err := nextField(b)
		if err != nil {
			return 0
		}
		if num == want && typ == protowire.BytesType {
			n++
		}
		b = rest
	}
	return n
}

// keys are the names most often found in a Kubernetes object, each decoded
// to one string shared by every map that holds it instead of a new one.
var keys = func() map[string]string {
	m := map[string]string{}
	for _, k := range strings.Fields(`apiVersion kind metadata name namespace labels annotations uid
		resourceVersion generation creationTimestamp managedFields ownerReferences finalizers
		spec status conditions type reason message lastTransitionTime observedGeneration
		forProvider initProvider atProvider providerConfigRef managementPolicies deletionPolicy
		writeConnectionSecretToRef manifest readiness policy celQuery arn id tags region
		crossplane.io/composite crossplane.io/claim-name crossplane.io/claim-namespace
		crossplane.io/external-name crossplane.io/external-create-pending
		crossplane.io/external-create-succeeded crossplane.io/composition-resource-name
		socle.do-now.io/cluster controller blockOwnerDeletion value key operator values effect`) {
		m[k] = k
	}
	return m
}()

// internKey is the map key field decodes to: the shared string of keys, or
// a new one.
func internKey(field []byte) string {
	if k, ok := keys[string(field)]; ok { // no allocation: Go looks up string(bytes) in place
		return k
	}
	return string(field)
}

// eachField calls f with each field of a message's encoding: its number,
// its type, the whole field as encoded, and its value (a length-delimited
// field's contents; any other field's encoded value).
func eachField(b []byte, f func(num protowire.Number, typ protowire.Type, field, value []byte) error) error {
	for len(b) > 0 {
		num, typ, field, value, rest, err := nextField(b)
		if err != nil {
			return err
		}
		if err := f(num, typ, field, value); err != nil {
			return err
		}
		b = rest
	}
	return nil
}

// nextField is the first field of a message's encoding: its number, its
// type, the whole field as encoded, its value (a length-delimited field's
// contents; any other field's encoded value), and the fields after it.
func nextField(b []byte) (num protowire.Number, typ protowire.Type, field, value, rest []byte, err error) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return 0, 0, nil, nil, nil, protowire.ParseError(n)
	}
	m := protowire.ConsumeFieldValue(num, typ, b[n:])
	if m < 0 {
		return 0, 0, nil, nil, nil, protowire.ParseError(m)
	}
	value = b[n : n+m]
	if typ == protowire.BytesType {
		value, _ = protowire.ConsumeBytes(value)
	}
	return num, typ, b[:n+m], value, b[n+m:], nil
}
