package main

import (
	"encoding/json"
	"strings"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	cd "github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/crossplane/function-sdk-go/response"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

// TestSetDesiredEncoded holds the desired resources kept encoded to what
// the SDK sets, once on the wire: every kind of value structpb.NewValue
// takes, lengths that take more than one byte, and its refusals.
func TestSetDesiredEncoded(t *testing.T) {
	long := strings.Repeat("x", 300) // a length of two bytes; its Value, Struct entry and Struct too
	cases := map[string]struct {
		reason  string
		objects map[string]map[string]any
		wantErr bool
	}{
		"Values": {
			reason: "Every value NewValue converts decodes as the SDK's Struct: numbers of every Go type as doubles, []byte as base64, json.Number, null, bools, nested maps and lists.",
			objects: map[string]map[string]any{
				"a": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a", "labels": map[string]any{}},
					"data": map[string]any{"int": 1, "int8": int8(-2), "int16": int16(3), "int32": int32(4), "int64": int64(1 << 40),
						"uint": uint(5), "uint8": uint8(6), "uint16": uint16(7), "uint32": uint32(8), "uint64": uint64(9),
						"float32": float32(1.5), "float64": -2.25, "number": json.Number("12.5"), "bytes": []byte("hi"),
						"null": nil, "true": true, "false": false, "empty": "", "": "an empty key",
						"list": []any{"a", 1.0, nil, []any{}, map[string]any{"k": long}}}},
				"b": {"long": long, "nested": map[string]any{"long": map[string]any{long: []any{long, long}}}},
				"c": {},
			},
		},
		"InvalidType": {
			reason:  "A value NewValue refuses is refused.",
			objects: map[string]map[string]any{"a": {"spec": map[string]any{"x": []string{"a"}}}},
			wantErr: true,
		},
		"InvalidUTF8": {
			reason:  "A string that is not UTF-8 is refused, as NewValue refuses it.",
			objects: map[string]map[string]any{"a": {"spec": "\xff"}},
			wantErr: true,
		},
		"InvalidUTF8Key": {
			reason:  "A key that is not UTF-8 is refused, as NewStruct refuses it.",
			objects: map[string]map[string]any{"a": {"\xff": "x"}},
			wantErr: true,
		},
		"InvalidNumber": {
			reason:  "A json.Number that is no double is refused, as NewValue refuses it.",
			objects: map[string]map[string]any{"a": {"n": json.Number("x")}},
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dcds := map[resource.Name]*resource.DesiredComposed{}
			i := 0
			for n, o := range tc.objects {
				dcds[resource.Name(n)] = &resource.DesiredComposed{Resource: cd.New(), Ready: []resource.Ready{resource.ReadyUnspecified, resource.ReadyTrue, resource.ReadyFalse}[i%3]}
				dcds[resource.Name(n)].Resource.Object = o
				i++
			}
			want, got := &fnv1.RunFunctionResponse{}, &fnv1.RunFunctionResponse{}
			wantErr := response.SetDesiredComposedResources(want, dcds)
			err := setDesiredEncoded(got, dcds)
			if (err != nil) != tc.wantErr || (wantErr != nil) != tc.wantErr {
				t.Fatalf("%s\nerror %v, the SDK's %v; want an error: %v", tc.reason, err, wantErr, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			raw, err := proto.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			decoded := &fnv1.RunFunctionResponse{}
			if err := proto.Unmarshal(raw, decoded); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, decoded, protocmp.Transform()); diff != "" {
				t.Errorf("%s\n-SDK +encoded:\n%s", tc.reason, diff)
			}
		})
	}
}
