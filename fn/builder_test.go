package main

import (
	"fmt"
	"strings"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"google.golang.org/protobuf/types/known/structpb"
)

// Defaults of the story most tests tell: team-a's claim for cluster "prod-eu"
// in eu-west-3, account 111122223333.
const (
	account     = "111122223333"
	clusterName = "prod-eu"
	region      = "eu-west-3"
	nodeRoleARN = "arn:aws:iam::111122223333:role/prod-eu-bootstrap-nodes"
)

// requestBuilder assembles a RunFunctionRequest so cases read like the story
// they test: an XR, the platform's input, what already exists.
type requestBuilder struct {
	t        testing.TB
	xr       map[string]any
	input    map[string]any
	observed map[string]map[string]any
	xrConds  []any
	// required are the resources Crossplane resolved for each requirement;
	// nil until it has.
	required map[string][]map[string]any
}

func aRequest(t testing.TB) *requestBuilder {
	return &requestBuilder{
		t: t,
		xr: map[string]any{
			"apiVersion": "platform.socle.do-now.io/v1alpha1",
			"kind":       "XKarpenter",
			"metadata":   map[string]any{"name": "team-a-karpenter-x7k2p"},
			"spec": map[string]any{
				"claimRef":     map[string]any{"apiVersion": "platform.socle.do-now.io/v1alpha1", "kind": "Karpenter", "name": "karpenter", "namespace": "team-a"},
				"cluster":      map[string]any{"name": clusterName, "region": region},
				"nodeIdentity": map[string]any{"roleArn": nodeRoleARN, "instanceProfile": "prod-eu-bootstrap-nodes"},
				"version":      "1.15.0",
			},
		},
		input: map[string]any{
			"apiVersion": "karpenter.fn.socle.do-now.io/v1beta1",
			"kind":       "Input",
			"tags":       map[string]any{"cost-center": "platform"},
			"nodes":      map[string]any{"publicSecurityGroupSuffix": "-public-nodes"},
			"tenancy": map[string]any{"clusters": []any{
				map[string]any{"name": clusterName, "account": account, "namespaces": []any{"team-a"}},
			}},
		},
		observed: map[string]map[string]any{},
	}
}

// withSpec sets a dotted path under the XR's spec.
func (b *requestBuilder) withSpec(path string, v any) *requestBuilder {
	setPath(b.xr["spec"].(map[string]any), path, v)
	return b
}

// withInput sets a dotted path of the function input.
func (b *requestBuilder) withInput(path string, v any) *requestBuilder {
	setPath(b.input, path, v)
	return b
}

// withXRCondition records a condition the XR already shows.
func (b *requestBuilder) withXRCondition(typ, status, reason string) *requestBuilder {
	b.xrConds = append(b.xrConds, map[string]any{"type": typ, "status": status, "reason": reason})
	return b
}

// observing adds composed resources as Crossplane observed them.
func (b *requestBuilder) observing(objs map[resource.Name]map[string]any) *requestBuilder {
	for n, o := range objs {
		b.observed[string(n)] = o
	}
	return b
}

// requiring answers a requirement with what Crossplane found for it.
func (b *requestBuilder) requiring(name string, objs ...map[string]any) *requestBuilder {
	if b.required == nil {
		b.required = map[string][]map[string]any{}
	}
	b.required[name] = objs
	return b
}

func (b *requestBuilder) build() *fnv1.RunFunctionRequest {
	b.t.Helper()
	xr := deepCopy(b.xr)
	if len(b.xrConds) > 0 {
		xr["status"] = map[string]any{"conditions": b.xrConds}
	}
	req := &fnv1.RunFunctionRequest{
		Meta:     &fnv1.RequestMeta{Tag: "test"},
		Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: mustStruct(b.t, xr)}, Resources: map[string]*fnv1.Resource{}},
		Desired:  &fnv1.State{Composite: &fnv1.Resource{Resource: mustStruct(b.t, map[string]any{"apiVersion": xr["apiVersion"], "kind": xr["kind"]})}},
	}
	if b.input != nil {
		req.Input = mustStruct(b.t, b.input)
	}
	for n, o := range b.observed {
		req.Observed.Resources[n] = &fnv1.Resource{Resource: mustStruct(b.t, o)}
	}
	if b.required != nil {
		req.RequiredResources = map[string]*fnv1.Resources{}
		for n, objs := range b.required {
			rs := &fnv1.Resources{}
			for _, o := range objs {
				rs.Items = append(rs.Items, &fnv1.Resource{Resource: mustStruct(b.t, o)})
			}
			req.RequiredResources[n] = rs
		}
	}
	return req
}

func mustStruct(t testing.TB, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatalf("cannot build struct: %v", err)
	}
	return s
}

func setPath(m map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	if v == nil {
		delete(m, parts[len(parts)-1])
		return
	}
	m[parts[len(parts)-1]] = v
}

func deepCopy(m map[string]any) map[string]any {
	s, err := structpb.NewStruct(m)
	if err != nil {
		panic(fmt.Sprintf("cannot copy %v: %v", m, err))
	}
	return s.AsMap()
}
