// Command admission writes the tenant admission policy the platform applies
// on its control plane (admission/tenant-requests.yaml) for the namespace
// Crossplane runs in: the policy exempts Crossplane's own service accounts,
// which write the fields it refuses to tenants, by that namespace.
//
//	go run ./hack/admission -namespace crossplane-system -version v0.1.0 -o _output/admission/karpenter-tenant-requests.yaml
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// defaultNamespace is the namespace the committed policy exempts: Crossplane's
// Helm chart's default, which Render replaces.
const defaultNamespace = "crossplane-system"

// versionLabel carries the release the policy belongs to.
const versionLabel = "app.kubernetes.io/version"

func main() {
	in := flag.String("in", "admission/tenant-requests.yaml", "the policy as committed")
	ns := flag.String("namespace", defaultNamespace, "the namespace Crossplane runs in")
	version := flag.String("version", "", "the release (./VERSION)")
	out := flag.String("o", "", "where to write it")
	flag.Parse()
	src, err := os.ReadFile(*in)
	if err == nil {
		var b []byte
		if b, err = Render(src, *ns, *version); err == nil {
			err = os.MkdirAll(filepath.Dir(*out), 0o755)
			if err == nil {
				err = os.WriteFile(*out, b, 0o644)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "admission:", err)
		os.Exit(1)
	}
}

// Render is the committed policy src for Crossplane's namespace ns,
// checked to be labelled with release version.
func Render(src []byte, ns, version string) ([]byte, error) {
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return nil, fmt.Errorf("namespace %q: %s", ns, strings.Join(errs, "; "))
	}
	docs := bytes.Split(src, []byte("\n---\n"))
	exempt := "'system:serviceaccount:" + defaultNamespace + ":'"
	replaced := 0
	for _, d := range docs {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal(d, &u.Object); err != nil {
			return nil, err
		}
		if got := u.GetLabels()[versionLabel]; got != version {
			return nil, fmt.Errorf("%s %s is labelled %s=%q, not the release %q: label it with ./VERSION", u.GetKind(), u.GetName(), versionLabel, got, version)
		}
		conditions, _, _ := unstructured.NestedSlice(u.Object, "spec", "matchConditions")
		for _, c := range conditions {
			if e, _ := c.(map[string]any)["expression"].(string); strings.Contains(e, exempt) {
				replaced++
			}
		}
	}
	if replaced != 1 {
		return nil, fmt.Errorf("want one match condition exempting %s, found %d", exempt, replaced)
	}
	return bytes.ReplaceAll(src, []byte(exempt), []byte("'system:serviceaccount:"+ns+":'")), nil
}
