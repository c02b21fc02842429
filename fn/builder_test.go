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
	// foreign are observed resources as given: not the XR's, Crossplane
	// passes them because the XR's resource references name them.
	foreign map[string]map[string]any
	// existing are the objects of the control plane the function's
	// requirements select from, once resolved is set: the request is then
	// the last call of a reconcile, every requirement answered.
	existing []map[string]any
	resolved bool
}

// The UIDs of the stories' XRs.
const (
	xrUID           = "5f1a7c2e-3b4d-4e6f-8a9b-0c1d2e3f4a5b"
	namespacedXRUID = "a7e2c9d1-6b3f-4a58-9c0e-1d2f3a4b5c6d"
)

func aRequest(t testing.TB) *requestBuilder {
	return &requestBuilder{
		t: t,
		xr: map[string]any{
			"apiVersion": "platform.socle.do-now.io/v1alpha1",
			"kind":       "XKarpenter",
			"metadata":   map[string]any{"name": "karpenter-x7k2p", "uid": xrUID},
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
			"nodes": map[string]any{"publicSecurityGroupSuffix": "-public-nodes", "defaultAmiAlias": "al2023@v20260714",
				"startupTaints": []any{map[string]any{"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoExecute"}}},
			"versions": map[string]any{"allowed": []any{"1.14.1", "1.14.3", "1.15.0", "1.15.2"}, "default": "1.15.2"},
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
	b.xr["metadata"] = map[string]any{"name": "karpenter", "namespace": "team-a", "uid": namespacedXRUID}
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
	xr := a.request(t).xr
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
			if ref["kind"] == xr["kind"] && ref["apiVersion"] == xr["apiVersion"] {
				continue // the deletion guard's Usage of the XR itself
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

// observingForeign adds an observed resource exactly as given: one the
// XR's resource references name, which Crossplane passes whoever controls
// it (or nobody).
func (b *requestBuilder) observingForeign(name string, o map[string]any) *requestBuilder {
	if b.foreign == nil {
		b.foreign = map[string]map[string]any{}
	}
	b.foreign[name] = o
	return b
}

// requiring makes the request the last call of a reconcile, where Crossplane
// answered every requirement from what exists: objs, and nothing else.
func (b *requestBuilder) requiring(objs ...map[string]any) *requestBuilder {
	b.resolved = true
	b.existing = append(b.existing, objs...)
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
		req.Observed.Resources[n] = &fnv1.Resource{Resource: mustStruct(b.t, composedBy(xr, n, o))}
	}
	for n, o := range b.foreign {
		req.Observed.Resources[n] = &fnv1.Resource{Resource: mustStruct(b.t, o)}
	}
	if b.resolved {
		req.RequiredResources = resolve(b.t, req, b.existing)
	}
	req.Meta = &fnv1.RequestMeta{Tag: crossplaneTag(b.t, req)}
	return req
}

// composedBy is o as Crossplane observes what xr composed as name: with the
// metadata it renders on every composed resource (v2.4.2
// composition_render.go, RenderComposedResourceMetadata): xr as its
// controller, xr's namespace, the composite and claim labels, the
// composition resource name. What o already says of these stays.
func composedBy(xr map[string]any, name string, o map[string]any) map[string]any {
	o = deepCopy(o)
	xmd := xr["metadata"].(map[string]any)
	md, _ := o["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		o["metadata"] = md
	}
	if _, ok := md["ownerReferences"]; !ok {
		md["ownerReferences"] = []any{map[string]any{
			"apiVersion": xr["apiVersion"], "kind": xr["kind"], "name": xmd["name"], "uid": xmd["uid"],
			"controller": true, "blockOwnerDeletion": true,
		}}
	}
	if ns, ok := xmd["namespace"]; ok {
		md["namespace"] = ns
	}
	labels, _ := md["labels"].(map[string]any)
	if labels == nil {
		labels = map[string]any{}
		md["labels"] = labels
	}
	set := func(k string, v any) {
		if _, ok := labels[k]; !ok && v != nil && v != "" {
			labels[k] = v
		}
	}
	set("crossplane.io/composite", xmd["name"])
	if ref, ok := xr["spec"].(map[string]any)["claimRef"].(map[string]any); ok {
		set("crossplane.io/claim-name", ref["name"])
		set("crossplane.io/claim-namespace", ref["namespace"])
	}
	annotations, _ := md["annotations"].(map[string]any)
	if annotations == nil {
		annotations = map[string]any{}
		md["annotations"] = annotations
	}
	if _, ok := annotations["crossplane.io/composition-resource-name"]; !ok {
		annotations["crossplane.io/composition-resource-name"] = name
	}
	return o
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
