package flux

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/kustomize"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/do-now/function-karpenter/internal/cluster"
	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/scope"
	"github.com/do-now/function-karpenter/internal/versions"
)

// repoRoot is the checkout this module lives in, two levels up.
const repoRoot = "../.."

// gitopsBase is the GitOps base the Kustomizations build, relative to the
// root of the Flux source (this repository).
const gitopsBase = "examples/gitops"

// edits are changes to a YAML document by dotted path; a nil value deletes.
type edits map[string]any

// with is a copy of e that also sets path.
func (e edits) with(path string, v any) edits {
	out := maps.Clone(e)
	if out == nil {
		out = edits{}
	}
	out[path] = v
	return out
}

func (e edits) apply(t *testing.T, m map[string]any) {
	t.Helper()
	for path, v := range e {
		keys := strings.Split(path, ".")
		cur := m
		for _, k := range keys[:len(keys)-1] {
			next, ok := cur[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				cur[k] = next
			}
			cur = next
		}
		if v == nil {
			delete(cur, keys[len(keys)-1])
			continue
		}
		// Round-trip through JSON so the document holds only JSON types.
		b, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var j any
		if err := yaml.Unmarshal(b, &j); err != nil {
			t.Fatal(err)
		}
		cur[keys[len(keys)-1]] = j
	}
}

// load runs config.Load on the example XR's spec and the example
// Composition's function input, each with its edits applied.
func load(t *testing.T, specEdits, inputEdits edits) *config.Config {
	t.Helper()
	var xr map[string]any
	readYAML(t, filepath.Join(repoRoot, "examples", "xr.yaml"), &xr)
	xrSpec, _ := xr["spec"].(map[string]any)
	var comp struct {
		Spec struct {
			Pipeline []struct {
				Input map[string]any `json:"input"`
			} `json:"pipeline"`
		} `json:"spec"`
	}
	readYAML(t, filepath.Join(repoRoot, "apis", "composition.yaml"), &comp)
	if len(comp.Spec.Pipeline) != 1 {
		t.Fatalf("apis/composition.yaml: want one pipeline step, got %d", len(comp.Spec.Pipeline))
	}
	input := comp.Spec.Pipeline[0].Input
	specEdits.apply(t, xrSpec)
	inputEdits.apply(t, input)
	in, err := structpb.NewStruct(input)
	if err != nil {
		t.Fatal(err)
	}
	c, errs := config.Load(config.OwnerOf(xr, scope.Claim), xrSpec, in)
	if len(errs) > 0 {
		t.Fatalf("config.Load refused the claim: %v", errs.ToAggregate())
	}
	// What the observed EKS cluster reports: the controller policy names it.
	c.ClusterVPC = "vpc-0fa4e"
	return c
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("cannot decode %s: %v", path, err)
	}
}

// kustomization is the Kustomization named name among the objects build (one
// of internal/flux's steps) makes of claim c at Karpenter version v, as its
// Object delivers it to the claimed cluster.
func kustomization[N comparable](t *testing.T, build func(*config.Config, versions.Version) (map[N]runtime.Object, error), c *config.Config, v versions.Version, name N) *kustomizev1.Kustomization {
	t.Helper()
	objs, err := build(c, v)
	if err != nil {
		t.Fatalf("building %v: %v", name, err)
	}
	return delivered(t, objs[name])
}

// delivered is the Kustomization a provider-kubernetes Object applies to the
// claimed cluster: its manifest, decoded strictly, with the Object Ready
// once Flux has acted on the Kustomization (cluster.Reconciled).
func delivered(t *testing.T, o runtime.Object) *kustomizev1.Kustomization {
	t.Helper()
	u, ok := o.(*unstructured.Unstructured)
	if !ok || u.GetKind() != "Object" || u.GetAPIVersion() != "kubernetes.crossplane.io/v1alpha2" {
		t.Fatalf("want a provider-kubernetes Object, got %T %v", o, o.GetObjectKind().GroupVersionKind())
	}
	// TestKustomizationReadiness holds the query against what kustomize-controller writes.
	if readiness, _, _ := unstructured.NestedMap(u.Object, "spec", "readiness"); !reflect.DeepEqual(readiness, map[string]any(cluster.Reconciled)) {
		t.Errorf("the Object's readiness is %v, want %v: Ready only once Flux has acted on the Kustomization", readiness, cluster.Reconciled)
	}
	manifest, ok, _ := unstructured.NestedMap(u.Object, "spec", "forProvider", "manifest")
	if !ok {
		t.Fatal("the Object carries no manifest")
	}
	var k kustomizev1.Kustomization
	decodeStrict(t, &unstructured.Unstructured{Object: manifest}, &k)
	if k.Spec.KubeConfig != nil {
		t.Errorf("Kustomization %s names a kubeconfig %v: the claimed cluster's own Flux applies it", k.Name, k.Spec.KubeConfig)
	}
	return &k
}

// fluxBuild builds a Kustomization as kustomize-controller v1.7 does
// (internal/controller/kustomization_controller.go, generate and build): the
// source is copied to a work directory, the generator writes the
// Kustomization's patches and targetNamespace into the base's
// kustomization.yaml, kustomize builds it on a secure file system, and every
// resource goes through postBuild substitution. Substitution is strict, so a
// variable the Kustomization does not set fails the build instead of
// silently becoming empty.
func fluxBuild(t *testing.T, k *kustomizev1.Kustomization) []*unstructured.Unstructured {
	t.Helper()
	objs, err := fluxBuildOf(t, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// fluxBuildOf is fluxBuild over a copy of the shipped base that edit (if not nil) changes first,
// given the copy's root; it returns the error kustomize's build or the substitution fails with.
func fluxBuildOf(t *testing.T, k *kustomizev1.Kustomization, edit func(base string)) ([]*unstructured.Unstructured, error) {
	t.Helper()
	work := t.TempDir()
	copyTree(t, filepath.Join(repoRoot, filepath.FromSlash(gitopsBase)), filepath.Join(work, filepath.FromSlash(gitopsBase)))
	if edit != nil {
		edit(filepath.Join(work, filepath.FromSlash(gitopsBase)))
	}

	path := filepath.Clean(filepath.FromSlash(k.Spec.Path))
	if !strings.HasPrefix(path, filepath.FromSlash(gitopsBase)+string(filepath.Separator)) {
		t.Fatalf("Kustomization %s points at %q, outside the shipped base %s", k.Name, k.Spec.Path, gitopsBase)
	}
	dir := filepath.Join(work, path)

	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(k)
	if err != nil {
		t.Fatal(err)
	}
	obj := unstructured.Unstructured{Object: raw}
	if _, err := kustomize.NewGenerator(work, obj).WriteFile(dir); err != nil {
		t.Fatalf("cannot generate the kustomization of %s: %v", k.Name, err)
	}
	m, err := kustomize.SecureBuild(work, dir, false)
	if err != nil {
		return nil, fmt.Errorf("kustomize build of %s failed: %w", k.Name, err)
	}
	for _, res := range m.Resources() {
		if res.GetName() == "" || res.GetKind() == "" || res.GetApiVersion() == "" {
			t.Fatalf("%s: a built resource lacks apiVersion, kind or name: %s", k.Name, res.MustYaml())
		}
		if k.Spec.PostBuild == nil {
			continue
		}
		out, err := kustomize.SubstituteVariables(context.Background(), nil, obj, res,
			kustomize.SubstituteWithDryRun(true), kustomize.SubstituteWithStrict(true))
		if err != nil {
			return nil, fmt.Errorf("%s: post build of %s failed: %w", k.Name, res.GetName(), err)
		}
		if out != nil {
			if _, err := m.Replace(res); err != nil {
				t.Fatal(err)
			}
		}
	}
	b, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeObjects(t, b)
	// kustomize-controller sets spec.commonMetadata on every object it
	// applies, over what the base sets.
	if cm := k.Spec.CommonMetadata; cm != nil {
		for _, o := range objs {
			labels, annotations := o.GetLabels(), o.GetAnnotations()
			if labels == nil {
				labels = map[string]string{}
			}
			if annotations == nil {
				annotations = map[string]string{}
			}
			maps.Copy(labels, cm.Labels)
			maps.Copy(annotations, cm.Annotations)
			o.SetLabels(labels)
			if len(annotations) > 0 {
				o.SetAnnotations(annotations)
			}
		}
	}
	return objs, nil
}

// decodeObjects splits a multi-document YAML stream into objects.
func decodeObjects(t *testing.T, b []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := d.Decode(&u.Object); err != nil {
			if err == io.EOF {
				return objs
			}
			t.Fatalf("cannot decode built objects: %v\n%s", err, b)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		target := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// byKindName indexes objects by "Kind/name".
func byKindName(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	out := make(map[string]*unstructured.Unstructured, len(objs))
	for _, o := range objs {
		out[o.GetKind()+"/"+o.GetName()] = o
	}
	return out
}
