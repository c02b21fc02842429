//go:build render

// Package render proves the examples with the real Crossplane CLI: it starts
// the function, runs crossplane render for every step of the example claim,
// compares the output with the golden files in examples/render/, and checks
// every rendered object with crossplane beta validate against the real
// provider-aws and Flux CRDs, Kubernetes' own schemas of the built-in kinds
// and the generated XRD. Run through make test, which builds the CLI, gets the
// schemas and sets CROSSPLANE, VALIDATE_FLAGS, PROVIDER_AWS_CRDS,
// FLUX_KUSTOMIZE_CRDS and K8S_SCHEMAS.
package render

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/do-now/function-karpenter/internal/scope"
)

var update = flag.Bool("update", false, "rewrite the golden files in examples/render/")

// nothing is the first step of the example claim: nothing observed yet.
const nothing = "1-nothing"

// An example is one API's example XR, the Composition it is rendered
// through, and the directories of its observed fixtures and goldens, under
// examples/.
type example struct {
	name, xr, composition, dir string
}

// examples are the claim API's (the XR Crossplane creates for
// examples/claim.yaml) and the namespaced XR's.
var examples = []example{
	{"claim", "examples/xr.yaml", "apis/composition.yaml", "examples"},
	{"namespaced", "examples/namespaced/xr.yaml", "apis/composition-namespaced.yaml", "examples/namespaced"},
}

// renderSteps are the steps of e, as make render walks them: nothing, then
// one per observed fixture in <dir>/observed/. Each has a golden file in
// <dir>/render/, and no golden is left without its step.
func renderSteps(t *testing.T, root string, e example) []string {
	t.Helper()
	fixtures, err := filepath.Glob(filepath.Join(root, e.dir, "observed", "*.yaml"))
	if err != nil || len(fixtures) == 0 {
		t.Fatalf("no observed fixtures in %s/observed/ (%v)", e.dir, err)
	}
	steps := []string{nothing}
	for _, f := range fixtures {
		steps = append(steps, strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	goldens, err := filepath.Glob(filepath.Join(root, e.dir, "render", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var have []string
	for _, g := range goldens {
		have = append(have, strings.TrimSuffix(filepath.Base(g), ".yaml"))
	}
	if !*update && !slices.Equal(steps, have) {
		t.Errorf("%s/render/ holds goldens %v, the steps are %v (make update-golden)", e.dir, have, steps)
	}
	return steps
}

// composedCRDs are the CRD files of every kind the function composes in
// both APIs (internal/scope): provider-aws' (PROVIDER_AWS_CRDS) and
// provider-kubernetes' Object (PROVIDER_KUBERNETES_CRDS), whose manifests
// are validated against k8sSchemas.
func composedCRDs() (aws, kubernetes []string) {
	for _, a := range scope.APIs {
		for _, k := range a.Kinds() {
			if k.Kind == scope.ObjectKind {
				kubernetes = append(kubernetes, k.CRDFile())
			} else {
				aws = append(aws, k.CRDFile())
			}
		}
	}
	return aws, kubernetes
}

// The Flux CRDs (FLUX_KUSTOMIZE_CRDS) of every Flux kind the function composes.
var fluxCRDs = []string{
	"kustomize.toolkit.fluxcd.io_kustomizations.yaml",
}

// k8sSchemas are the files of the built-in kinds the function composes, as
// CRDs tools/k8sschemas generated into K8S_SCHEMAS: one for each of
// K8S_SCHEMA_KINDS (hack/tools.mk, the one list of them), its APIVERSION/KIND
// with / as _.
func k8sSchemas(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, k := range strings.Fields(env(t, "K8S_SCHEMA_KINDS")) {
		out = append(out, strings.ReplaceAll(k, "/", "_")+".yaml")
	}
	return out
}

// repoRoot is the checkout this package lives in, two levels up, as an absolute path.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func env(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: run these tests through make test", name)
	}
	return v
}

// extensionsDir gathers in one directory the schemas of every kind the
// function composes, and of the XR: only those, so that a newly composed kind
// without a schema shows up as a missing schema.
func extensionsDir(t *testing.T, root, tmp string) string {
	t.Helper()
	extensions := filepath.Join(tmp, "extensions")
	if err := os.MkdirAll(extensions, 0o755); err != nil {
		t.Fatal(err)
	}
	awsCRDs, kubernetesCRDs := composedCRDs()
	for dir, files := range map[string][]string{
		env(t, "PROVIDER_AWS_CRDS"):        awsCRDs,
		env(t, "PROVIDER_KUBERNETES_CRDS"): kubernetesCRDs,
		env(t, "FLUX_KUSTOMIZE_CRDS"):      fluxCRDs,
		env(t, "K8S_SCHEMAS"):              k8sSchemas(t),
	} {
		for _, f := range files {
			copyFile(t, filepath.Join(dir, f), filepath.Join(extensions, f))
		}
	}
	for _, xrd := range []string{"definition.yaml", "definition-namespaced.yaml"} {
		copyFile(t, filepath.Join(root, "apis", xrd), filepath.Join(extensions, xrd))
	}
	return extensions
}

// validate runs crossplane beta validate, failing on missing schemas too, and
// returns its report and whether it found every object valid.
func validate(t *testing.T, extensions, objects string) (string, bool) {
	t.Helper()
	args := append([]string{"beta", "validate", "--error-on-missing-schemas"}, strings.Fields(env(t, "VALIDATE_FLAGS"))...)
	var out bytes.Buffer
	cmd := exec.Command(env(t, "CROSSPLANE"), append(args, extensions, objects)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("crossplane beta validate: %v", err)
	}
	return out.String(), err == nil
}

func TestRenderEveryStep(t *testing.T) {
	crossplane := env(t, "CROSSPLANE")
	root, tmp := repoRoot(t), t.TempDir()

	functions := functionsFile(t, root, tmp, startFunction(t, root, tmp))

	extensions := extensionsDir(t, root, tmp)

	for _, e := range examples {
		for _, s := range renderSteps(t, root, e) {
			t.Run(e.name+"/"+s, func(t *testing.T) { renderStep(t, crossplane, root, tmp, functions, extensions, e, s) })
		}
	}
}

// renderStep renders step s of e, compares it with its golden and validates
// every object rendered.
func renderStep(t *testing.T, crossplane, root, tmp, functions, extensions string, e example, s string) {
	t.Helper()
	args := []string{"render", "--include-function-results", "--include-full-xr",
		filepath.Join(root, e.xr), filepath.Join(root, e.composition), functions}
	if s != nothing {
		args = append(args, "--observed-resources", filepath.Join(root, e.dir, "observed", s+".yaml"))
	}
	got := runCmd(t, crossplane, args...)
	golden := filepath.Join(root, e.dir, "render", s+".yaml")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (rewrite goldens with make update-golden)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("crossplane render differs from %s (-golden +rendered):\n%s", golden, diff)
	}

	// Results are render's own kind, not cluster objects: validate the
	// rest, and what each provider-kubernetes Object carries, which
	// its own schema leaves open.
	objects := filepath.Join(tmp, e.name+"-"+s+".yaml")
	if err := os.WriteFile(objects, validatable(t, got), 0o644); err != nil {
		t.Fatal(err)
	}
	out, ok := validate(t, extensions, objects)
	if !ok || !strings.Contains(out, " 0 missing schemas,") || !strings.Contains(out, " 0 failure cases") {
		t.Errorf("crossplane beta validate:\n%s", out)
	}
}

// functionsFile writes examples/functions.yaml pointing at the function
// listening on addr.
func functionsFile(t *testing.T, root, tmp, addr string) string {
	t.Helper()
	functions := filepath.Join(tmp, "functions.yaml")
	fb, err := os.ReadFile(filepath.Join(root, "examples", "functions.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	fb = bytes.Replace(fb, []byte("runtime-development-target: 127.0.0.1:9443"), []byte("runtime-development-target: "+addr), 1)
	if err := os.WriteFile(functions, fb, 0o644); err != nil {
		t.Fatal(err)
	}
	return functions
}

// startFunction builds and starts the function on a free loopback port, and
// stops it when the test ends.
func startFunction(t *testing.T, root, tmp string) string {
	t.Helper()
	bin := filepath.Join(tmp, "function")
	build := exec.Command("go", "build", "-o", bin, "./fn")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("cannot build the function: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()

	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--insecure", "--address", addr)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("function logs:\n%s", logs.String())
		}
	})
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			return addr
		}
	}
	t.Fatalf("the function did not listen on %s within 30s:\n%s", addr, logs.String())
	return ""
}

func runCmd(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(name), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// validatable is render's output without its Results, plus the manifest of
// every provider-kubernetes Object as a document of its own.
func validatable(t *testing.T, rendered []byte) []byte {
	t.Helper()
	var keep [][]byte
	for _, doc := range bytes.Split(rendered, []byte("\n---\n")) {
		var o struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Spec       struct {
				ForProvider struct {
					Manifest map[string]any `json:"manifest"`
				} `json:"forProvider"`
				ManagementPolicies []string `json:"managementPolicies"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("cannot parse a rendered document: %v\n%s", err, doc)
		}
		if o.Kind == "Result" {
			continue
		}
		keep = append(keep, doc)
		// The manifest of an Object that neither creates nor updates (an
		// observer, which may delete) only names what it observes: nothing
		// of it is applied, so there is nothing to validate.
		if o.Kind == "Object" && scope.AppliesManifest(o.Spec.ManagementPolicies) && (strings.HasPrefix(o.APIVersion, "kubernetes.crossplane.io/") || strings.HasPrefix(o.APIVersion, "kubernetes.m.crossplane.io/")) {
			m, err := yaml.Marshal(o.Spec.ForProvider.Manifest)
			if err != nil {
				t.Fatal(err)
			}
			keep = append(keep, m)
		}
	}
	return []byte(fmt.Sprintf("%s\n", bytes.Join(keep, []byte("\n---\n"))))
}

// TestRenderRefusesAClaimedCluster renders each example XR while another
// claim's controller Role for prod-eu exists, as Crossplane would find it
// for the function's requirements, with the XR that controls it: the real
// CLI relays them, and the function refuses with the field, whichever API
// asks, naming no holder.
func TestRenderRefusesAClaimedCluster(t *testing.T) {
	root, tmp := repoRoot(t), t.TempDir()
	functions := functionsFile(t, root, tmp, startFunction(t, root, tmp))
	for _, e := range examples {
		t.Run(e.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(env(t, "CROSSPLANE"), "render", filepath.Join(root, e.xr),
				filepath.Join(root, e.composition), functions,
				"--required-resources", filepath.Join(root, "examples", "required", "prod-eu-held-by-team-c.yaml"))
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err == nil {
				t.Fatalf("crossplane render composed for a cluster another claim holds:\n%s", stdout.String())
			}
			want := `spec.cluster.name: Forbidden: cluster "prod-eu" is already claimed: one Karpenter per cluster`
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("crossplane render failed without saying %q:\n%s", want, stderr.String())
			}
			if strings.Contains(stderr.String(), "team-c") {
				t.Errorf("the refusal names the holder:\n%s", stderr.String())
			}
		})
	}
}
