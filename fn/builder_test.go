package main

import (
	"fmt"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
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
	// clusterVersion is the Kubernetes version AWS reports for the
	// claimed cluster.
	clusterVersion = "1.34"
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
				map[string]any{"name": clusterName, "account": account, "namespaces": []any{"team-a"}, "region": region,
					"nodeIdentity": map[string]any{"roleArn": nodeRoleARN, "instanceProfile": "prod-eu-bootstrap-nodes"}},
			}},
		},
		observed: map[string]map[string]any{},
	}
}

// aNamespacedRequest is aRequest's story told through the namespaced API:
// team-a creates the XR itself, in its namespace, with the same spec.
func aNamespacedRequest(t testing.TB) *requestBuilder {
	b := aRequest(t)
	b.xr["apiVersion"] = "platform.m.socle.do-now.io/v1alpha1"
	b.xr["kind"] = "Karpenter"
	b.xr["metadata"] = map[string]any{"name": "karpenter", "namespace": "team-a"}
	delete(b.xr["spec"].(map[string]any), "claimRef")
	return b
}

// An api is one of the platform's APIs as the tests see it, written out
// here rather than read from internal/scope, so a wrong table fails them.
type api struct {
	name    string
	request func(testing.TB) *requestBuilder
	// namespace is where everything is composed: empty for cluster scope.
	namespace string
	// kinds maps each kind composed to the apiVersion it must have.
	kinds map[string]string
	// providerConfigKind is what every providerConfigRef names besides
	// its name; empty when it names only a name.
	providerConfigKind string
}

var (
	claimAPI = api{
		name: "claim", request: aRequest,
		kinds: map[string]string{
			"Role": "iam.aws.upbound.io/v1beta1", "RolePolicy": "iam.aws.upbound.io/v1beta1",
			"Queue": "sqs.aws.upbound.io/v1beta1", "QueuePolicy": "sqs.aws.upbound.io/v1beta1",
			"Rule": "cloudwatchevents.aws.upbound.io/v1beta1", "Target": "cloudwatchevents.aws.upbound.io/v1beta1",
			"PodIdentityAssociation": "eks.aws.upbound.io/v1beta1", "Cluster": "eks.aws.upbound.io/v1beta1",
			"Object":       "kubernetes.crossplane.io/v1alpha2",
			"ClusterUsage": "protection.crossplane.io/v1beta1",
		},
	}
	namespacedAPI = api{
		name: "namespaced", request: aNamespacedRequest, namespace: "team-a",
		kinds: map[string]string{
			"Role": "iam.aws.m.upbound.io/v1beta1", "RolePolicy": "iam.aws.m.upbound.io/v1beta1",
			"Queue": "sqs.aws.m.upbound.io/v1beta1", "QueuePolicy": "sqs.aws.m.upbound.io/v1beta1",
			"Rule": "cloudwatchevents.aws.m.upbound.io/v1beta1", "Target": "cloudwatchevents.aws.m.upbound.io/v1beta1",
			"PodIdentityAssociation": "eks.aws.m.upbound.io/v1beta1", "Cluster": "eks.aws.m.upbound.io/v1beta1",
			"Object": "kubernetes.m.crossplane.io/v1alpha1",
			"Usage":  "protection.crossplane.io/v1beta1",
		},
		providerConfigKind: "ClusterProviderConfig",
	}
	apis = []api{claimAPI, namespacedAPI}
)

// checkScope checks that every resource rsp composes is of the API's kinds,
// in its namespace, bound to its kind of provider config, and that a Usage
// selects its ends in that namespace.
func (a api) checkScope(t *testing.T, where string, rsp *fnv1.RunFunctionResponse) {
	t.Helper()
	for name, r := range rsp.GetDesired().GetResources() {
		o := r.GetResource().AsMap()
		kind, _ := o["kind"].(string)
		want, ok := a.kinds[kind]
		if !ok || o["apiVersion"] != want {
			t.Errorf("%s: %s is %v %s; the %s API composes %v", where, name, o["apiVersion"], kind, a.name, a.kinds)
		}
		md, _ := o["metadata"].(map[string]any)
		if ns, _ := md["namespace"].(string); ns != a.namespace {
			t.Errorf("%s: %s is in namespace %q, want %q", where, name, ns, a.namespace)
		}
		spec, _ := o["spec"].(map[string]any)
		if ref, ok := spec["providerConfigRef"].(map[string]any); ok {
			if k, _ := ref["kind"].(string); k != a.providerConfigKind {
				t.Errorf("%s: %s's providerConfigRef %v, want kind %q", where, name, ref, a.providerConfigKind)
			}
		} else if kind != "ClusterUsage" && kind != "Usage" {
			t.Errorf("%s: %s has no providerConfigRef", where, name)
		}
		for _, end := range []string{"of", "by"} {
			ref, ok := spec[end].(map[string]any)
			if !ok {
				continue
			}
			sel, _ := ref["resourceSelector"].(map[string]any)
			if ns, _ := sel["namespace"].(string); end == "of" && ns != a.namespace {
				t.Errorf("%s: %s selects its %s in namespace %q, want %q", where, name, end, ns, a.namespace)
			}
			k, _ := ref["kind"].(string)
			if want := a.kinds[k]; ref["apiVersion"] != want {
				t.Errorf("%s: %s's %s is %v %v, want apiVersion %s", where, name, end, ref["apiVersion"], ref["kind"], want)
			}
		}
	}
}

// withXRNamespace moves a namespaced XR to another namespace.
func (b *requestBuilder) withXRNamespace(ns string) *requestBuilder {
	b.xr["metadata"].(map[string]any)["namespace"] = ns
	return b
}

// withXRAnnotation sets an annotation on the XR, as a claim's reach its XR.
func (b *requestBuilder) withXRAnnotation(k, v string) *requestBuilder {
	md := b.xr["metadata"].(map[string]any)
	a, _ := md["annotations"].(map[string]any)
	if a == nil {
		a = map[string]any{}
	}
	a[k] = v
	md["annotations"] = a
	return b
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
// Crossplane answers every requirement of a response at once: the
// function's others then resolve to nothing found.
func (b *requestBuilder) requiring(name string, objs ...map[string]any) *requestBuilder {
	if b.required == nil {
		b.required = map[string][]map[string]any{claimRoles: nil, namespacedRoles: nil, claimLeases: nil, namespacedLeases: nil}
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
	req.Meta = &fnv1.RequestMeta{Tag: crossplaneTag(b.t, req)}
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

// setPath sets the dotted path in m to v, or deletes it when v is nil
// (crossplane-runtime's fieldpath, as JSON would decode v).
func setPath(m map[string]any, path string, v any) {
	p := fieldpath.Pave(m)
	err := p.DeleteField(path)
	if v != nil {
		err = p.SetValue(path, v)
	}
	if err != nil {
		panic(fmt.Sprintf("cannot set %s: %v", path, err))
	}
}

func deepCopy(m map[string]any) map[string]any {
	s, err := structpb.NewStruct(m)
	if err != nil {
		panic(fmt.Sprintf("cannot copy %v: %v", m, err))
	}
	return s.AsMap()
}
