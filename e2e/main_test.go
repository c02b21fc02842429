//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cp is the control plane every test of this process shares. Tests run one after the other: a
// cluster may be held by one Karpenter (claim or namespaced XR) at a time, so each test deletes
// what it created and waits for everything composed to be gone before it ends. `make e2e-test`
// runs the suite as several processes at once (hack/e2e-shards.sh), each with a control plane
// of its own.
var cp *controlPlane

// fake plays provider-aws, provider-kubernetes and the claimed clusters (their Kubernetes and
// their Flux) for the whole run (finalizers on creation, releases on deletion), but for
// provider-kubernetes while a test runs the real one (realClaimedClusters); tests drive readiness
// through it.
var fake *fakeProvider

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	dir, err := os.MkdirTemp("", "function-karpenter-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// E2E_KCM_FLAGS (make's KCM_FLAGS): more flags for the hub's kube-controller-manager, e.g. its
	// client's rate (docs/platform.md#many-claims-on-one-control-plane).
	cp = &controlPlane{dir: dir, logDir: filepath.Join(dir, "logs"), kcmFlags: strings.Fields(os.Getenv("E2E_KCM_FLAGS"))}
	if err := os.MkdirAll(cp.logDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		cp.stop()
		failed := code != 0
		cp.report(failed)
		// E2E_KEEP=1 keeps the logs and data of a run that passed, too.
		if !failed && os.Getenv("E2E_KEEP") == "" {
			_ = os.RemoveAll(dir)
			fmt.Println("e2e: removed", dir)
		}
	}()

	start := time.Now()
	if err := setUp(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: cannot set up the control plane:", err)
		return 1
	}
	cp.timed("control plane up, API installed", start)
	fmt.Println("e2e: set-up timings\n  " + strings.Join(cp.timings, "\n  "))

	if fake, err = newFakeProvider(cp); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	go fake.run(ctx)
	if code = m.Run(); code != 0 {
		return code
	}
	return usagesNeverPanicked(filepath.Join(cp.logDir, "crossplane.log"))
}

// usagesNeverPanicked fails the run (1) if Crossplane's Usage controllers recovered from a panic
// at any time in it. Crossplane v2.4.2 panics on the first reconcile of a Usage whose spec.of is
// a selector (internal/controller/protection/usage/reconciler.go reads spec.of before it
// resolves the selector, then dereferences its nil resourceRef: 310 times in one shard of a CI
// run), which is why the function names both ends by resourceRef (internal/usage). Crossplane
// logs each as "Observed a panic" with its controller ("usage/clusterusage…", "usage/usage…").
func usagesNeverPanicked(log string) int {
	b, err := os.ReadFile(log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	n := 0
	for line := range strings.Lines(string(b)) {
		if strings.Contains(line, "Observed a panic") && strings.Contains(line, `"controller": "usage/`) {
			n++
		}
	}
	if n > 0 {
		fmt.Fprintf(os.Stderr, "e2e: Crossplane's Usage controllers recovered from %d panics (%s)\n", n, log)
		return 1
	}
	return 0
}

func setUp(ctx context.Context) error {
	var err error
	if cp.bins, err = binariesFromEnv(); err != nil {
		return err
	}
	files, err := crdFiles()
	if err != nil {
		return err
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		return err
	}
	// The AWS emulator starts beside Kubernetes: each takes seconds.
	type emulator struct {
		p   *proc
		aws *emulatedAWS
		err error
	}
	awsUp := make(chan emulator, 1)
	go func() {
		p, aws, err := startMoto(ctx, cp.logDir, testAccount)
		awsUp <- emulator{p, aws, err}
	}()
	start := time.Now()
	if err := cp.startKubernetes(ctx); err != nil {
		return err
	}
	up := <-awsUp
	if up.err != nil {
		return up.err
	}
	cp.procs, cp.aws = append(cp.procs, up.p), up.aws
	cp.timed("kube-apiserver and the AWS emulator up", start)
	start = time.Now()
	if err := cp.installCRDs(ctx, files...); err != nil {
		return err
	}
	cp.timed("provider-aws and provider-kubernetes CRDs established", start)
	delivery, err := cp.installDelivery(ctx, repo)
	if err != nil {
		return err
	}
	fmt.Println("e2e: each declared cluster reachable through\n  " + strings.Join(delivery, "\n  "))
	// The function must be up before Crossplane first dials it: a refused first dial costs
	// gRPC's reconnect backoff.
	if err := cp.startFunction(ctx); err != nil {
		return err
	}
	if err := cp.startCrossplane(ctx); err != nil {
		return err
	}
	start = time.Now()
	name, err := cp.installAPI(ctx, repo)
	if err != nil {
		return err
	}
	if err := cp.registerFunction(ctx, name); err != nil {
		return err
	}
	cp.timed("XRDs served, Compositions and function registered", start)
	return nil
}
