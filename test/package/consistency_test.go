package pkgtest

import (
	"os"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The function package's name, the last element of its repository wherever it is pushed.
const functionPackage = "function-karpenter"

var semver = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)

// version is the release version, from the VERSION file make tags releases with.
func version(t *testing.T) string {
	t.Helper()
	v := strings.TrimSpace(string(readRepoFile(t, "VERSION")))
	if !semver.MatchString(v) {
		t.Fatalf("VERSION: %q is not a semantic version vX.Y.Z", v)
	}
	return v
}

// functionDependency is the one Function the Configuration depends on.
func functionDependency(t *testing.T, meta obj) obj {
	t.Helper()
	var fns []obj
	for _, d := range list(meta, "spec.dependsOn") {
		if d["kind"] == "Function" {
			fns = append(fns, d)
		}
	}
	if len(fns) != 1 {
		t.Fatalf("want one Function in spec.dependsOn, got %d", len(fns))
	}
	return fns[0]
}

// The names Crossplane v2.2.1 gives the Function it installs for a dependency on the function
// package (internal/controller/pkg/resolver.NewPackage: xpkg.ToDNSLabel of the reference's
// repository path), written out for the package references the tests use.
const (
	canonicalFunction = "do-now-function-karpenter" // xpkg.crossplane.io/do-now/function-karpenter
	acmeFunction      = "acme-function-karpenter"   // <loopback registry>/acme/function-karpenter
)

// functionRefs lists the functionRef names of every pipeline step of every Composition.
func functionRefs(docs []obj) []string {
	var refs []string
	for _, d := range docs {
		if d["kind"] != "Composition" {
			continue
		}
		for _, s := range list(d, "spec.pipeline") {
			refs = append(refs, str(s, "functionRef.name"))
		}
	}
	return refs
}

// compositionDocs are the documents of the API files the Configuration packages.
func compositionDocs(t *testing.T) []obj {
	t.Helper()
	var docs []obj
	for _, f := range apiFiles(t) {
		docs = append(docs, repoDocs(t, f)...)
	}
	return docs
}

// apiFiles are the apis/*.yaml files the Configuration packages, relative to the root.
func apiFiles(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(repoRoot(t) + "/apis")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() && path.Ext(e.Name()) == ".yaml" {
			files = append(files, "apis/"+e.Name())
		}
	}
	return files
}

// TestVersionsAgree: the release tag (VERSION), the version the Configuration depends on and the
// package examples/functions.yaml names are one version; a release of a Configuration that pulls
// another function version than the one pushed with it would install something untested.
func TestVersionsAgree(t *testing.T) {
	v := version(t)
	dep := functionDependency(t, repoDoc(t, "crossplane.yaml"))
	fns := repoDoc(t, "examples/functions.yaml")

	if diff := cmp.Diff(v, str(dep, "version")); diff != "" {
		t.Errorf("crossplane.yaml: the function dependency's version differs from VERSION: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(str(dep, "package")+":"+v, str(fns, "spec.package")); diff != "" {
		t.Errorf("examples/functions.yaml: spec.package differs from crossplane.yaml's dependency at VERSION: -want, +got:\n%s", diff)
	}
	if path.Base(str(dep, "package")) != functionPackage {
		t.Errorf("crossplane.yaml: the function dependency %q is not named %s, the name make release pushes", str(dep, "package"), functionPackage)
	}
	if reg := os.Getenv("PACKAGE_REGISTRY"); reg != "" {
		if diff := cmp.Diff(reg+"/"+functionPackage, str(dep, "package")); diff != "" {
			t.Errorf("crossplane.yaml: the function dependency is not where hack/package.mk's PACKAGE_REGISTRY publishes it: -want, +got:\n%s", diff)
		}
	}
}

// TestFunctionNamesAgree: Crossplane installs the dependency as a Function named after the
// package's repository path; every Composition step and examples/functions.yaml (which
// crossplane render matches by name) must call it by that name, or the Composition never finds
// its function in a cluster.
func TestFunctionNamesAgree(t *testing.T) {
	dep := functionDependency(t, repoDoc(t, "crossplane.yaml"))
	want := canonicalFunction

	refs := functionRefs(compositionDocs(t))
	if len(refs) == 0 {
		t.Fatal("apis/: no Composition pipeline step calls a function")
	}
	for _, r := range refs {
		if r != want {
			t.Errorf("apis/: a Composition step calls %q, but Crossplane installs %s as %q", r, str(dep, "package"), want)
		}
	}
	if got := str(repoDoc(t, "examples/functions.yaml"), "metadata.name"); got != want {
		t.Errorf("examples/functions.yaml: metadata.name is %q, want %q (the Compositions' functionRef)", got, want)
	}
}
