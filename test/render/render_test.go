//go:build render

// Package render proves the examples with the real Crossplane CLI: it starts
// the function, runs crossplane render for every step of the example claim,
// compares the output with the golden files in examples/render/, and checks
// every rendered object with crossplane beta validate against the real
// provider-aws CRDs and the generated XRD. Run through make test, which
// builds the CLI and sets CROSSPLANE, VALIDATE_FLAGS and PROVIDER_AWS_CRDS.
package render

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in examples/render/")

// Steps of the example claim: the observed fixture each render starts from.
var steps = []struct {
	name     string
	observed string
}{
	{name: "1-nothing"},
	{name: "2-identity-ready", observed: "2-identity-ready.yaml"},
	{name: "3-wiring-ready", observed: "3-wiring-ready.yaml"},
	{name: "4-access-check-failed", observed: "4-access-check-failed.yaml"},
	{name: "5-access-check-passed", observed: "5-access-check-passed.yaml"},
	{name: "6-controller-ready", observed: "6-controller-ready.yaml"},
	{name: "7-all-ready", observed: "7-all-ready.yaml"},
	{name: "8-controller-failing-later", observed: "8-controller-failing-later.yaml"},
}

// The provider-aws CRDs of every kind the function composes.
var providerCRDs = []string{
	"iam.aws.upbound.io_roles.yaml",
	"iam.aws.upbound.io_rolepolicies.yaml",
	"sqs.aws.upbound.io_queues.yaml",
	"sqs.aws.upbound.io_queuepolicies.yaml",
	"cloudwatchevents.aws.upbound.io_rules.yaml",
	"cloudwatchevents.aws.upbound.io_targets.yaml",
	"eks.aws.upbound.io_podidentityassociations.yaml",
}

func env(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: run these tests through make test", name)
	}
	return v
}

func TestRenderEveryStep(t *testing.T) {
	crossplane := env(t, "CROSSPLANE")
	validateFlags := strings.Fields(env(t, "VALIDATE_FLAGS"))
	crds := env(t, "PROVIDER_AWS_CRDS")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()

	addr := startFunction(t, root, tmp)
	functions := filepath.Join(tmp, "functions.yaml")
	fb, err := os.ReadFile(filepath.Join(root, "examples", "functions.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	fb = bytes.Replace(fb, []byte("runtime-development-target: 127.0.0.1:9443"), []byte("runtime-development-target: "+addr), 1)
	if err := os.WriteFile(functions, fb, 0o644); err != nil {
		t.Fatal(err)
	}

	extensions := filepath.Join(tmp, "extensions")
	if err := os.MkdirAll(extensions, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range providerCRDs {
		copyFile(t, filepath.Join(crds, f), filepath.Join(extensions, f))
	}
	copyFile(t, filepath.Join(root, "apis", "definition.yaml"), filepath.Join(extensions, "definition.yaml"))

	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			args := []string{"render", "--include-function-results", "--include-full-xr",
				filepath.Join(root, "examples", "xr.yaml"), filepath.Join(root, "apis", "composition.yaml"), functions}
			if s.observed != "" {
				args = append(args, "--observed-resources", filepath.Join(root, "examples", "observed", s.observed))
			}
			got := runCmd(t, crossplane, args...)

			golden := filepath.Join(root, "examples", "render", s.name+".yaml")
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

			// Results are render's own kind, not cluster objects: validate the rest.
			objects := filepath.Join(tmp, s.name+".yaml")
			if err := os.WriteFile(objects, withoutResults(got), 0o644); err != nil {
				t.Fatal(err)
			}
			out := runCmd(t, crossplane, append(append([]string{"beta", "validate"}, validateFlags...), extensions, objects)...)
			if !strings.Contains(string(out), " 0 missing schemas,") || !strings.Contains(string(out), " 0 failure cases") {
				t.Errorf("crossplane beta validate:\n%s", out)
			}
		})
	}
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

func withoutResults(rendered []byte) []byte {
	var keep [][]byte
	for _, doc := range bytes.Split(rendered, []byte("\n---\n")) {
		if bytes.Contains(doc, []byte("\nkind: Result\n")) {
			continue
		}
		keep = append(keep, doc)
	}
	return []byte(fmt.Sprintf("%s\n", bytes.Join(keep, []byte("\n---\n"))))
}
