package main

import (
	"flag"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/do-now/function-karpenter/internal/cluster"
)

var update = flag.Bool("update", false, "rewrite examples/observed/ from the fake providers")

// An example is one API's example XR, rendered through its Composition, and
// where what the fake providers report at each step goes.
type example struct {
	xr, composition, observed string
	// upgrade adds the fixtures of an upgrade from 1.14.1.
	upgrade bool
}

// examples are the claim's (the XR Crossplane creates for
// examples/claim.yaml) and the namespaced XR's.
var examples = map[string]example{
	"claim":      {"../examples/xr.yaml", "../apis/composition.yaml", "../examples/observed", true},
	"namespaced": {"../examples/namespaced/xr.yaml", "../apis/composition-namespaced.yaml", "../examples/namespaced/observed", false},
}

// exampleRequest is the request crossplane render sends for e's XR through
// its Composition: the same XR, the Composition's own input.
func exampleRequest(t *testing.T, e example, observed map[resource.Name]map[string]any) *fnv1.RunFunctionRequest {
	t.Helper()
	return exampleRequestAt(t, e, "", observed)
}

// exampleRequestAt is exampleRequest with the XR at Karpenter version v
// (the example's own when empty).
func exampleRequestAt(t *testing.T, e example, v string, observed map[resource.Name]map[string]any) *fnv1.RunFunctionRequest {
	t.Helper()
	var xr map[string]any
	readYAML(t, e.xr, &xr)
	if v != "" {
		xr["spec"].(map[string]any)["version"] = v
	}
	var comp struct {
		Spec struct {
			Pipeline []struct {
				Input map[string]any `json:"input"`
			} `json:"pipeline"`
		} `json:"spec"`
	}
	readYAML(t, e.composition, &comp)
	b := aRequest(t).observing(observed)
	b.xr = xr
	b.input = comp.Spec.Pipeline[0].Input
	return b.build()
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("cannot parse %s: %v", path, err)
	}
}

// TestExampleFixtures keeps examples/observed/ and
// examples/namespaced/observed/ — what providers report at each step of the
// example claim and namespaced XR — in step with the function. Run with
// -update to rewrite them; crossplane render reads them in make render and in
// the golden render tests.
func TestExampleFixtures(t *testing.T) {
	for name, e := range examples {
		t.Run(name, func(t *testing.T) { exampleFixtures(t, e) })
	}
}

func exampleFixtures(t *testing.T, e example) {
	aws := fakeProviders{t: t, account: account}
	next := func(observed map[resource.Name]map[string]any) map[resource.Name]map[string]any {
		return aws.observe(run(t, exampleRequest(t, e, observed)), true)
	}
	// The lease first: nothing in AWS before the XR holds its cluster.
	// Then step one, and its controller policy once the observed cluster
	// reports the VPC the policy names.
	identity := next(next(next(nil)))
	wiring := next(identity)
	namespace := next(wiring)
	accessCheck := next(namespace)
	controller := next(accessCheck)
	all := next(controller)

	checkFailed := copyObserved(accessCheck)
	checkFailed["access-check"] = failedCheck(accessCheck["access-check"], cluster.CheckProfile,
		"An error occurred (AccessDenied) when calling the GetInstanceProfile operation: User: arn:aws:sts::111122223333:assumed-role/prod-eu-karpenter/eks-prod-eu-karpe-0123 is not authorized to perform: iam:GetInstanceProfile on resource: instance profile prod-eu-bootstrap-nodes with an explicit deny in a permissions boundary")
	controllerFailing := copyObserved(all)
	controllerFailing["controller-kustomization"] = kustomizationFailing(all["controller-kustomization"],
		"HelmRelease/karpenter/karpenter status: 'Failed'")

	// The upgrade, for the claim: everything Ready at 1.14.1 while the XR
	// asks for the example's 1.15.0; then the controller Ready at 1.15.0
	// with the node pools still at 1.14.1.
	var upgrades map[string]map[resource.Name]map[string]any
	if e.upgrade {
		at := func(observed map[resource.Name]map[string]any) map[resource.Name]map[string]any {
			return aws.observe(run(t, exampleRequestAt(t, e, "1.14.1", observed)), true)
		}
		old := at(at(at(at(at(at(at(at(nil))))))))
		controllerMoved := next(old)
		upgrades = map[string]map[resource.Name]map[string]any{
			"upgrade-1-ready-at-1.14.1.yaml":      old,
			"upgrade-2-controller-at-1.15.0.yaml": controllerMoved,
		}
	}

	fixtures := map[string]map[resource.Name]map[string]any{
		"2-identity-ready.yaml":           identity,
		"3-wiring-ready.yaml":             wiring,
		"4-namespace-ready.yaml":          namespace,
		"5-access-check-failed.yaml":      checkFailed,
		"6-access-check-passed.yaml":      accessCheck,
		"7-controller-ready.yaml":         controller,
		"8-all-ready.yaml":                all,
		"9-controller-failing-later.yaml": controllerFailing,
	}
	maps.Copy(fixtures, upgrades)
	for file, observed := range fixtures {
		path := filepath.Join(e.observed, file)
		got := renderFixture(t, e, observed)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./fn -run TestExampleFixtures -update)", err)
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("%s is stale; run go test ./fn -run TestExampleFixtures -update (-committed +now):\n%s", path, diff)
		}
	}
}

func copyObserved(in map[resource.Name]map[string]any) map[resource.Name]map[string]any {
	out := make(map[resource.Name]map[string]any, len(in))
	for n, o := range in {
		out[n] = o
	}
	return out
}

// renderFixture writes observed resources as crossplane render reads them:
// named objects carrying their composition resource name.
func renderFixture(t *testing.T, e example, observed map[resource.Name]map[string]any) []byte {
	t.Helper()
	var xr map[string]any
	readYAML(t, e.xr, &xr)
	xrName := xr["metadata"].(map[string]any)["name"].(string)
	names := make([]string, 0, len(observed))
	for n := range observed {
		names = append(names, string(n))
	}
	sort.Strings(names)
	out := []byte("# Generated by go test ./fn -run TestExampleFixtures -update: what the fake\n# providers report for " + strings.TrimPrefix(e.xr, "../") + ". DO NOT EDIT.\n")
	for _, n := range names {
		o := composedBy(xr, n, observed[resource.Name(n)])
		md := o["metadata"].(map[string]any)
		// Objects the function names keep their name; the others get one
		// the way Crossplane names composed resources.
		if _, named := md["name"]; !named {
			md["name"] = xrName + "-" + n
		}
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, "---\n"...)
		out = append(out, b...)
	}
	return out
}
