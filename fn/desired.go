package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"unicode/utf8"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"google.golang.org/protobuf/encoding/protowire"
)

// Encoding the desired composed resources for the wire. The SDK's
// response.SetDesiredComposedResources turns each resource's map into
// protobuf's Struct (structpb.NewStruct: a message allocated for every
// value of the object), which proto.Marshal then encodes and nothing else
// reads. On the wire's path (a request the codec decoded apart, whose answer
// only gRPC and the cache read, both through proto.Marshal) the function
// writes each resource's Struct straight in its encoding instead, kept as
// the Resource's unknown field 1 (Resource.resource), which proto.Marshal
// writes as it is: the same bytes on the wire, decoded by Crossplane as
// the Struct they encode. TestSetDesiredEncoded holds the encoding to the
// SDK's Structs; TestWireServesWhatTheFunctionAnswers and FuzzRunFunction hold
// the answers served this way equal to the function's in-process answers.

// setDesiredEncoded is response.SetDesiredComposedResources (function-sdk-go
// v0.6.1 response/response.go) with each resource's Struct kept encoded.
func setDesiredEncoded(rsp *fnv1.RunFunctionResponse, dcds map[resource.Name]*resource.DesiredComposed) error {
	if rsp.GetDesired() == nil {
		rsp.Desired = &fnv1.State{}
	}
	if rsp.GetDesired().GetResources() == nil {
		rsp.Desired.Resources = make(map[string]*fnv1.Resource, len(dcds))
	}
	for name, dcd := range dcds {
		r := &fnv1.Resource{}
		switch dcd.Ready {
		case resource.ReadyFalse:
			r.Ready = fnv1.Ready_READY_FALSE
		case resource.ReadyTrue:
			r.Ready = fnv1.Ready_READY_TRUE
		}
		b := protowire.AppendTag(nil, 1, protowire.BytesType) // Resource.resource
		b, err := appendMessage(b, func(b []byte) ([]byte, error) { return appendStruct(b, dcd.Resource.UnstructuredContent()) })
		if err != nil {
			return fmt.Errorf("cannot encode %q: %w", name, err)
		}
		r.ProtoReflect().SetUnknown(b)
		rsp.Desired.Resources[string(name)] = r
	}
	return nil
}

// appendMessage appends a length-delimited message that body appends: one
// byte is reserved for its length, and the body moved on where the length
// takes more.
func appendMessage(b []byte, body func([]byte) ([]byte, error)) ([]byte, error) {
	at := len(b)
	b = append(b, 0)
	b, err := body(b)
	if err != nil {
		return nil, err
	}
	n := len(b) - at - 1
	size := protowire.SizeVarint(uint64(n))
	if size > 1 {
		for range size - 1 {
			b = append(b, 0)
		}
		copy(b[at+size:], b[at+1:at+1+n])
	}
	protowire.AppendVarint(b[at:at], uint64(n))
	return b, nil
}

// appendStruct appends the fields of google.protobuf.Struct holding m, as
// structpb.NewStruct makes it (protobuf v1.36 types/known/structpb): each
// entry of its map field 1, the key (1) and the Value (2).
func appendStruct(b []byte, m map[string]any) ([]byte, error) {
	for k, v := range m {
		if !utf8.ValidString(k) {
			return nil, fmt.Errorf("invalid UTF-8 in string: %q", k)
		}
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		var err error
		b, err = appendMessage(b, func(b []byte) ([]byte, error) {
			b = protowire.AppendTag(b, 1, protowire.BytesType)
			b = protowire.AppendString(b, k)
			b = protowire.AppendTag(b, 2, protowire.BytesType)
			return appendMessage(b, func(b []byte) ([]byte, error) { return appendValue(b, v) })
		})
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

// appendValue appends the fields of google.protobuf.Value holding v, as
// structpb.NewValue converts it: null (1), every number as a double (2),
// strings (3, []byte as base64), bool (4), maps as a Struct (5), slices as
// a ListValue (6) of Values (its field 1).
func appendValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return protowire.AppendVarint(protowire.AppendTag(b, 1, protowire.VarintType), 0), nil
	case bool:
		return protowire.AppendVarint(protowire.AppendTag(b, 4, protowire.VarintType), protowire.EncodeBool(v)), nil
	case string:
		if !utf8.ValidString(v) {
			return nil, fmt.Errorf("invalid UTF-8 in string: %q", v)
		}
		return protowire.AppendString(protowire.AppendTag(b, 3, protowire.BytesType), v), nil
	case []byte:
		return protowire.AppendString(protowire.AppendTag(b, 3, protowire.BytesType), base64.StdEncoding.EncodeToString(v)), nil
	case map[string]any:
		return appendMessage(protowire.AppendTag(b, 5, protowire.BytesType), func(b []byte) ([]byte, error) { return appendStruct(b, v) })
	case []any:
		return appendMessage(protowire.AppendTag(b, 6, protowire.BytesType), func(b []byte) ([]byte, error) {
			for _, e := range v {
				b = protowire.AppendTag(b, 1, protowire.BytesType)
				var err error
				if b, err = appendMessage(b, func(b []byte) ([]byte, error) { return appendValue(b, e) }); err != nil {
					return nil, err
				}
			}
			return b, nil
		})
	case json.Number:
		n, err := v.Float64()
		if err != nil {
			return nil, fmt.Errorf("invalid number format %q, expected a float64: %w", v, err)
		}
		return appendNumber(b, n), nil
	}
	n, ok := number(v)
	if !ok {
		return nil, fmt.Errorf("invalid type: %T", v)
	}
	return appendNumber(b, n), nil
}

// appendNumber appends a Value's number_value (2), a double.
func appendNumber(b []byte, n float64) []byte {
	return protowire.AppendFixed64(protowire.AppendTag(b, 2, protowire.Fixed64Type), math.Float64bits(n))
}

// number is v as the double structpb.NewValue makes of a number.
func number(v any) (float64, bool) {
	switch v := v.(type) {
	case int:
		return float64(v), true
	case int8:
		return float64(v), true
	case int16:
		return float64(v), true
	case int32:
		return float64(v), true
	case int64:
		return float64(v), true
	case uint:
		return float64(v), true
	case uint8:
		return float64(v), true
	case uint16:
		return float64(v), true
	case uint32:
		return float64(v), true
	case uint64:
		return float64(v), true
	case float32:
		return float64(v), true
	case float64:
		return v, true
	}
	return 0, false
}
