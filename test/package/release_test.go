package pkgtest

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// How Crossplane finds a package's layers: the annotation io.crossplane.xpkg on the layer
// descriptor, "base" for package.yaml and "upbound" for the examples.
const (
	xpkgAnnotation     = "io.crossplane.xpkg"
	packageLayer       = "base"
	examplesLayer      = "upbound"
	packageStreamFile  = "package.yaml"
	examplesStreamFile = ".up/examples.yaml"
)

// The providers whose managed resources the function composes.
var wantProviders = []string{
	"xpkg.crossplane.io/crossplane-contrib/provider-kubernetes",
	"xpkg.upbound.io/upbound/provider-aws-cloudwatchevents",
	"xpkg.upbound.io/upbound/provider-aws-eks",
	"xpkg.upbound.io/upbound/provider-aws-iam",
	"xpkg.upbound.io/upbound/provider-aws-sqs",
}

// TestRelease runs the README's release command against a registry on 127.0.0.1 and reads
// back what Crossplane would: the Function's multi-platform index and runtime image, the
// Configuration's meta, APIs and examples, and that the dependency and the Composition's
// functionRef meet.
func TestRelease(t *testing.T) {
	for _, env := range []string{"CROSSPLANE", "MAKE_BIN", "VALIDATE_FLAGS"} {
		if os.Getenv(env) == "" {
			t.Fatalf("%s is not set: run make package-test", env)
		}
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	// Another organisation than the canonical do-now, so the renaming of the dependency and
	// of the functionRef is exercised.
	reg := host + "/acme"
	v := version(t)

	t.Run("RefusesAnotherVersion", func(t *testing.T) {
		out, err := makeRelease(t, reg, "v99.0.0")
		if err == nil {
			t.Fatalf("make release VERSION=v99.0.0 succeeded though VERSION says %s:\n%s", v, out)
		}
		if !strings.Contains(out, "./VERSION says "+v) {
			t.Errorf("make release VERSION=v99.0.0: want an error naming the VERSION file, got:\n%s", out)
		}
		repos, err := remote.Catalog(t.Context(), strict(t, name.NewRegistry, host))
		if err != nil {
			t.Fatal(err)
		}
		if len(repos) != 0 {
			t.Errorf("a refused release pushed %v", repos)
		}
	})

	if out, err := makeRelease(t, reg, v); err != nil {
		t.Fatalf("make release REGISTRY=%s VERSION=%s: %v\n%s", reg, v, err, out)
	}

	fnRef := reg + "/" + functionPackage + ":" + v
	t.Run("Function", func(t *testing.T) { checkFunction(t, fnRef, reg) })
	t.Run("Configuration", func(t *testing.T) {
		checkConfiguration(t, reg+"/configuration-karpenter:"+v, reg, v)
	})
}

// makeRelease runs `make release` in the repository root.
func makeRelease(t *testing.T, reg, v string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Getenv("MAKE_BIN"), "--no-print-directory", "-C", repoRoot(t),
		"release", "REGISTRY="+reg, "VERSION="+v, "CROSSPLANE="+os.Getenv("CROSSPLANE"))
	// A fresh make, not a sub-make of the one running this test; the CLI make package-test
	// was given is passed on, so a CACHE= of the outer make is not rebuilt into .cache/.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(e string) bool {
		return strings.HasPrefix(e, "MAKEFLAGS=") || strings.HasPrefix(e, "MFLAGS=") || strings.HasPrefix(e, "MAKELEVEL=")
	})
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func checkFunction(t *testing.T, ref, reg string) {
	idx, err := remote.Index(strict(t, name.ParseReference, ref), remote.WithContext(t.Context()))
	if err != nil {
		t.Fatalf("cannot pull %s as an index: %v", ref, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, m := range im.Manifests {
		platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
	}
	slices.Sort(platforms)
	if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, platforms); diff != "" {
		t.Errorf("%s: index platforms: -want, +got:\n%s", ref, diff)
	}

	docker := dockerfile(t)
	for _, m := range im.Manifests {
		platform := m.Platform.OS + "/" + m.Platform.Architecture
		t.Run(platform, func(t *testing.T) {
			img, err := idx.Image(m.Digest)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			got := runtimeConfig{OS: cf.OS, Architecture: cf.Architecture, Entrypoint: cf.Config.Entrypoint,
				User: cf.Config.User, ExposedPorts: slices.Sorted(maps.Keys(cf.Config.ExposedPorts))}
			want := runtimeConfig{OS: m.Platform.OS, Architecture: m.Platform.Architecture,
				Entrypoint: []string{"/function"}, User: "65532:65532", ExposedPorts: []string{"9443/tcp"}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("runtime image config: -want, +got:\n%s", diff)
			}
			want.Entrypoint, want.User, want.ExposedPorts = docker.Entrypoint, docker.User, docker.ExposedPorts
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("runtime image config differs from the Dockerfile's: -Dockerfile, +image:\n%s", diff)
			}

			layers := xpkgLayers(t, img)
			pkg := layers[packageLayer]
			if len(pkg) == 0 {
				t.Fatal("no package.yaml layer")
			}
			if diff := cmp.Diff(repoDoc(t, "package/crossplane.yaml"), pkg[0]); diff != "" {
				t.Errorf("package meta differs from package/crossplane.yaml: -repo, +package:\n%s", diff)
			}
			var crds []obj
			matches, _ := filepath.Glob(filepath.Join(repoRoot(t), "package", "input", "*.yaml"))
			for _, f := range matches {
				rel, _ := filepath.Rel(repoRoot(t), f)
				crds = append(crds, repoDocs(t, rel)...)
			}
			if diff := cmp.Diff(crds, pkg[1:]); diff != "" {
				t.Errorf("package CRDs differ from package/input/: -repo, +package:\n%s", diff)
			}
			// The example is the Composition calling the function by the name its
			// dependency gets in this registry.
			var comps []obj
			for _, d := range compositionDocs(t) {
				if d["kind"] == "Composition" {
					comps = append(comps, renamed(t, d, acmeFunction))
				}
			}
			if diff := cmp.Diff(comps, layers[examplesLayer]); diff != "" {
				t.Errorf("package examples: -want, +got:\n%s", diff)
			}

			checkBinary(t, img, m.Platform.Architecture)
		})
	}
}

func checkConfiguration(t *testing.T, ref, reg, v string) {
	desc, err := remote.Get(strict(t, name.ParseReference, ref), remote.WithContext(t.Context()))
	if err != nil {
		t.Fatalf("cannot pull %s: %v", ref, err)
	}
	if desc.MediaType.IsIndex() {
		t.Fatalf("%s is an index; a Configuration has no runtime, it is one image", ref)
	}
	img, err := desc.Image()
	if err != nil {
		t.Fatal(err)
	}
	layers := xpkgLayers(t, img)
	pkg := layers[packageLayer]
	if len(pkg) == 0 {
		t.Fatal("no package.yaml layer")
	}
	meta := pkg[0]

	// The meta is the repository's, with the function dependency pointing at this registry.
	fnPkg := reg + "/" + functionPackage
	want := repoDoc(t, "crossplane.yaml")
	functionDependency(t, want)["package"] = fnPkg
	if diff := cmp.Diff(want, meta); diff != "" {
		t.Errorf("package meta: -want, +got:\n%s", diff)
	}
	if str(meta, "spec.crossplane.version") == "" {
		t.Error("package meta: no Crossplane version constraint (spec.crossplane.version)")
	}
	var providers []string
	for _, d := range list(meta, "spec.dependsOn") {
		if d["kind"] == "Provider" {
			providers = append(providers, str(d, "package"))
		}
	}
	slices.Sort(providers)
	if diff := cmp.Diff(wantProviders, providers); diff != "" {
		t.Errorf("provider dependencies: -want, +got:\n%s", diff)
	}

	// The APIs are the repository's, every Composition step calling the function by the
	// name Crossplane gives the dependency.
	dep := functionDependency(t, meta)
	var wantObjs []obj
	for _, d := range compositionDocs(t) {
		wantObjs = append(wantObjs, renamed(t, d, acmeFunction))
	}
	if diff := cmp.Diff(byKindName(wantObjs), byKindName(pkg[1:])); diff != "" {
		t.Errorf("package objects differ from apis/*.yaml: -want, +got:\n%s", diff)
	}
	checkBothAPIs(t, pkg[1:])
	// The dependency resolves in this registry, at the version pushed with the Configuration.
	if _, err := remote.Index(strict(t, name.ParseReference, str(dep, "package")+":"+str(dep, "version")), remote.WithContext(t.Context())); err != nil {
		t.Errorf("the function dependency does not resolve: %v", err)
	}
	if str(dep, "version") != v {
		t.Errorf("the function dependency's version is %q, the release %q", str(dep, "version"), v)
	}

	// The examples are the claim and the namespaced XR, valid against the packaged XRDs.
	wantExamples := []obj{repoDoc(t, "examples/claim.yaml"), repoDoc(t, "examples/namespaced/xr.yaml")}
	if diff := cmp.Diff(byAPIKindName(wantExamples), byAPIKindName(layers[examplesLayer])); diff != "" {
		t.Errorf("package examples: -want, +got:\n%s", diff)
	}
	validate(t, pkg[1:], layers[examplesLayer])
}

// checkBothAPIs: the Configuration serves both APIs side by side, each XRD
// with the Composition of its composite type as its default, written out
// here so a file dropped from apis/ fails the test.
func checkBothAPIs(t *testing.T, objects []obj) {
	t.Helper()
	want := map[string]struct{ xrdAPIVersion, group, kind, scope, composition string }{
		"xkarpenters.platform.socle.do-now.io":  {"apiextensions.crossplane.io/v1", "platform.socle.do-now.io", "XKarpenter", "", "karpenter.platform.socle.do-now.io"},
		"karpenters.platform.m.socle.do-now.io": {"apiextensions.crossplane.io/v2", "platform.m.socle.do-now.io", "Karpenter", "Namespaced", "karpenter.platform.m.socle.do-now.io"},
	}
	xrds, comps := map[string]obj{}, map[string]obj{}
	for _, o := range objects {
		switch o["kind"] {
		case "CompositeResourceDefinition":
			xrds[str(o, "metadata.name")] = o
		case "Composition":
			comps[str(o, "metadata.name")] = o
		}
	}
	if len(xrds) != len(want) || len(comps) != len(want) {
		t.Errorf("the Configuration carries XRDs %v and Compositions %v, want one of each per API", keys(xrds), keys(comps))
	}
	for name, w := range want {
		xrd, ok := xrds[name]
		if !ok {
			t.Errorf("the Configuration carries no XRD %s", name)
			continue
		}
		if xrd["apiVersion"] != w.xrdAPIVersion || str(xrd, "spec.group") != w.group || str(xrd, "spec.names.kind") != w.kind ||
			str(xrd, "spec.scope") != w.scope || str(xrd, "spec.defaultCompositionRef.name") != w.composition {
			t.Errorf("XRD %s: %s group %s kind %s scope %q default Composition %s; want %+v", name, xrd["apiVersion"],
				str(xrd, "spec.group"), str(xrd, "spec.names.kind"), str(xrd, "spec.scope"), str(xrd, "spec.defaultCompositionRef.name"), w)
		}
		comp, ok := comps[w.composition]
		if !ok {
			t.Errorf("the Configuration carries no Composition %s for %s", w.composition, name)
			continue
		}
		if str(comp, "spec.compositeTypeRef.apiVersion") != w.group+"/v1alpha1" || str(comp, "spec.compositeTypeRef.kind") != w.kind {
			t.Errorf("Composition %s composes %s %s, want %s/v1alpha1 %s", w.composition,
				str(comp, "spec.compositeTypeRef.apiVersion"), str(comp, "spec.compositeTypeRef.kind"), w.group, w.kind)
		}
	}
}

func keys(m map[string]obj) []string { return slices.Sorted(maps.Keys(m)) }

// byAPIKindName keys objects by apiVersion too: the claim and the namespaced
// XR share kind and name.
func byAPIKindName(objs []obj) map[string]obj {
	m := map[string]obj{}
	for _, o := range objs {
		m[fmt.Sprintf("%s/%s/%s", o["apiVersion"], o["kind"], str(o, "metadata.name"))] = o
	}
	return m
}

// validate runs `crossplane beta validate` on the examples against the package's XRDs, as a
// tenant's apply would be checked by the API server.
func validate(t *testing.T, objects, examples []obj) {
	dir := t.TempDir()
	var xrds []obj
	for _, o := range objects {
		if o["kind"] == "CompositeResourceDefinition" {
			xrds = append(xrds, o)
		}
	}
	ext, res := filepath.Join(dir, "extensions.yaml"), filepath.Join(dir, "examples.yaml")
	writeDocs(t, ext, xrds)
	writeDocs(t, res, examples)
	args := append([]string{"beta", "validate"}, strings.Fields(os.Getenv("VALIDATE_FLAGS"))...)
	cmd := exec.CommandContext(t.Context(), os.Getenv("CROSSPLANE"), append(args, ext, res)...)
	out, err := cmd.CombinedOutput()
	if err != nil || !regexp.MustCompile(`Total \d+ resources: 0 missing schemas, \d+ success cases, 0 failure cases`).Match(out) {
		t.Errorf("crossplane beta validate of the package examples: %v\n%s", err, out)
	}
}

// checkBinary reads the runtime layer: one root-owned executable /function, statically linked
// for the platform's architecture (the base is empty: no loader, no libc).
func checkBinary(t *testing.T, img v1.Image, arch string) {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	var runtime []v1.Descriptor
	for _, l := range m.Layers {
		if _, ok := l.Annotations[xpkgAnnotation]; !ok {
			runtime = append(runtime, l)
		}
	}
	if len(runtime) != 1 {
		t.Fatalf("want one runtime layer besides the package layers, got %d", len(runtime))
	}
	files := untar(t, img, runtime[0].Digest)
	var names []string
	for n := range files {
		names = append(names, n)
	}
	if diff := cmp.Diff([]string{"function"}, names); diff != "" {
		t.Fatalf("runtime layer files: -want, +got:\n%s", diff)
	}
	f := files["function"]
	if f.hdr.Mode != 0o755 || f.hdr.Uid != 0 || f.hdr.Gid != 0 {
		t.Errorf("/function: mode %o owner %d:%d, want 755 root:root (as Docker's COPY leaves it)", f.hdr.Mode, f.hdr.Uid, f.hdr.Gid)
	}
	e, err := elf.NewFile(bytes.NewReader(f.data))
	if err != nil {
		t.Fatalf("/function is not an ELF binary: %v", err)
	}
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	if e.Machine != want {
		t.Errorf("/function is built for %s, want %s", e.Machine, want)
	}
	for _, p := range e.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("/function is dynamically linked; the empty base has no loader")
		}
	}
}

type runtimeConfig struct {
	OS, Architecture string
	Entrypoint       []string
	User             string
	ExposedPorts     []string
}

// dockerfile reads the final stage's ENTRYPOINT, USER and EXPOSE of the Dockerfile, which must
// build the same runtime image for those who use Docker.
func dockerfile(t *testing.T) runtimeConfig {
	t.Helper()
	var c runtimeConfig
	lines := strings.Split(string(readRepoFile(t, "Dockerfile")), "\n")
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		arg := strings.TrimSpace(strings.TrimPrefix(l, f[0]))
		switch f[0] {
		case "FROM": // a new stage: only the last one counts
			c = runtimeConfig{}
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(arg), &c.Entrypoint); err != nil {
				t.Fatalf("Dockerfile: ENTRYPOINT %s is not in exec form: %v", arg, err)
			}
		case "USER":
			c.User = arg
		case "EXPOSE":
			for _, p := range f[1:] {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				c.ExposedPorts = append(c.ExposedPorts, p)
			}
		}
	}
	slices.Sort(c.ExposedPorts)
	return c
}

// xpkgLayers parses the package's annotated layers: "base" (package.yaml) and "upbound"
// (the examples), by annotation as Crossplane finds them.
func xpkgLayers(t *testing.T, img v1.Image) map[string][]obj {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{packageLayer: packageStreamFile, examplesLayer: examplesStreamFile}
	out := map[string][]obj{}
	for _, l := range m.Layers {
		a, ok := l.Annotations[xpkgAnnotation]
		if !ok {
			continue
		}
		file, known := files[a]
		if !known {
			t.Errorf("layer %s has an unknown %s annotation %q", l.Digest, xpkgAnnotation, a)
			continue
		}
		if _, dup := out[a]; dup {
			t.Fatalf("two %q layers", a)
		}
		f, ok := untar(t, img, l.Digest)[file]
		if !ok {
			t.Fatalf("the %q layer has no %s", a, file)
		}
		docs, err := parseDocs(f.data)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		// crossplane xpkg build re-encodes CRDs and XRDs from their Go types, which adds
		// their zero status; the API server ignores a status on create.
		for _, d := range docs {
			delete(d, "status")
		}
		out[a] = docs
	}
	return out
}

type tarFile struct {
	hdr  *tar.Header
	data []byte
}

// untar reads the regular files of one layer.
func untar(t *testing.T, img v1.Image, digest v1.Hash) map[string]tarFile {
	t.Helper()
	l, err := img.LayerByDigest(digest)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]tarFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimPrefix(h.Name, "/")] = tarFile{hdr: h, data: data}
	}
}

// renamed returns a copy of a Composition whose steps call the function fn.
func renamed(t *testing.T, o obj, fn string) obj {
	t.Helper()
	var c obj
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	for _, s := range list(c, "spec.pipeline") {
		if ref, ok := s["functionRef"].(map[string]any); ok {
			ref["name"] = fn
		}
	}
	// Through the same parser as the package side, so numbers compare alike.
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := parseDocs(out)
	if err != nil {
		t.Fatal(err)
	}
	return docs[0]
}

// byKindName indexes objects by kind and name, for an order-free comparison.
func byKindName(objs []obj) map[string]obj {
	m := map[string]obj{}
	for _, o := range objs {
		m[fmt.Sprintf("%s/%s", o["kind"], str(o, "metadata.name"))] = o
	}
	return m
}

func writeDocs(t *testing.T, file string, docs []obj) {
	t.Helper()
	var b bytes.Buffer
	for _, d := range docs {
		j, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(j)
		b.WriteString("\n")
	}
	if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// strict is s parsed by parse (name.ParseReference, name.NewRegistry) with
// name.StrictValidation: a name that leaves out its registry or tag fails the
// test instead of being defaulted.
func strict[T any](t *testing.T, parse func(string, ...name.Option) (T, error), s string) T {
	t.Helper()
	v, err := parse(s, name.StrictValidation)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
