//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// crossplaneFacts are what this project says Crossplane v2.4.2 does, in its tests and docs, each
// with the source line that says it (whitespace aside) and where the project relies on it.
var crossplaneFacts = []struct{ file, says, reliedOn string }{
	{"internal/xfn/function_runner.go", `"waitForReady": true`,
		"a call waits for a function that is down (TestFaults; docs/operating.md, When the function itself is down)"},
	{"internal/controller/apiextensions/composite/reconciler.go", `timeout = 2 * time.Minute`,
		"the two minutes a call waits before the XR says Synced=False (TestFaults)"},
	{"internal/controller/apiextensions/claim/reconciler.go", `for _, cType := range xr.GetClaimConditionTypes() {`,
		"a claim carries only the XR's custom conditions, not its Synced (TestFaults; docs/operating.md)"},
	{"internal/controller/apiextensions/composite/reconciler.go", `result = reconcile.Result{RequeueAfter: jitter(res.TTL)}`,
		"with realtime compositions an XR is requeued after its functions' TTL (TestLoad's settling; docs/platform.md)"},
	{"internal/controller/apiextensions/composite/composition_functions.go", `fnreq.Meta = &fnv1.RequestMeta{Tag: Tag(fnreq)`,
		"a request's tag is the hash of the whole request, so it changes when any observed resource does (TestLoad's untilQuiet)"},
	{"internal/controller/apiextensions/composite/reconciler.go", `uses the interval jittered +/- 10%`,
		"requeues are jittered by 10% (TestLoad's settling)"},
	{"cmd/crossplane/core/core.go", "EnableRealtimeCompositions bool `default:\"true\"",
		"realtime compositions are on by default (docs/platform.md)"},
	{"cmd/crossplane/core/core.go", "MaxConcurrentReconciles int `aliases:\"max-reconcile-rate\" default:\"100\"",
		"100 reconcile workers by default (docs/platform.md)"},
	{"cmd/crossplane/core/core.go", "PollInterval time.Duration `default:\"1m\"", "docs/platform.md"},
	{"internal/controller/apiextensions/definition/reconciler.go", "composite.WithPollInterval(0), // Disable polling.",
		"with realtime compositions --poll-interval does not pace XRs (docs/platform.md)"},
	{"internal/controller/protection/usage/reconciler.go", "WithPollInterval(o.PollInterval))",
		"--poll-interval paces the Usage controllers (docs/platform.md)"},
	// Nothing in the Usage controller makes the used resource owned by the Usage, so the
	// condition holds at every reconcile and each one updates the used resource: a write that
	// changes nothing, each --poll-interval, for every Usage (docs/platform.md).
	{"internal/controller/protection/usage/reconciler.go", `if used.GetLabels()[inUseLabelKey] != "true" || !used.OwnedBy(uu.GetUID()) {`,
		"docs/platform.md"},
	{"internal/controller/protection/usage/reconciler.go", "return reconcile.Result{RequeueAfter: r.pollInterval}, nil", "docs/platform.md"},
	// A composed Usage is owned by its XR and, once reconciled, by its using resource too; when
	// it goes, it replays the refused deletion of what it protected 2 s later (docs/platform.md,
	// mass deletion).
	{"internal/controller/protection/usage/reconciler.go", "meta.AddOwnerReference(uu, meta.AsOwner(", "docs/platform.md"},
	{"internal/controller/protection/usage/reconciler.go", "time.Sleep(2 * time.Second)", "docs/platform.md"},
	// Each XR reconcile server-side applies the XR's resource references (docs/performance.md,
	// the XRs' writes).
	{"internal/controller/apiextensions/composite/composition_functions.go",
		"c.client.Patch(ctx, refs, client.Apply, client.ForceOwnership, client.FieldOwner(FieldOwnerXR))", "docs/performance.md"},
	// One compose pass applies the XR's references, then each desired composed resource in turn,
	// then the XR's status, each under a field manager of its own (TestLoad's passes, e2e/passes_test.go;
	// docs/performance.md).
	{"internal/controller/apiextensions/composite/composition_functions.go", `FieldOwnerXR = "apiextensions.crossplane.io/composite"`,
		"TestLoad's passes"},
	{"internal/controller/apiextensions/composite/composition_functions.go", `FieldOwnerComposedPrefix = "apiextensions.crossplane.io/composed"`,
		"TestLoad's passes"},
	{"internal/controller/apiextensions/composite/composition_functions.go",
		"for name, cd := range desired { // We don't need any crossplane-runtime resource.Applicator style apply",
		"a pass applies the composed resources one after the other (docs/performance.md)"},
	{"internal/controller/apiextensions/composite/composition_functions.go",
		"if err := c.client.Status().Patch(ctx, xr, client.Apply, client.ForceOwnership, client.FieldOwner(FieldOwnerXR)); err != nil {",
		"TestLoad's passes end with the XR's status applied"},
	// A composed resource's name is generated from its XR's crossplane.io/composite label (its value
	// the XR's name; the key is crossplane-runtime's, v2.4.2 for this Crossplane, not read here)
	// and "-": TestLoad's passes tell whose it is by its name.
	{"internal/controller/apiextensions/composite/composition_render.go",
		`cd.SetGenerateName(xr.GetLabels()[xcrd.LabelKeyNamePrefixForComposed] + "-")`, "TestLoad's passes"},
	// What tenancy's ownership and binding rules rely on (internal/tenancy, internal/scope;
	// docs/platform.md, Who is trusted with what): Crossplane passes as observed what an XR's
	// resource references name unless another XR controls it, never deletes an observed object
	// without a controller, binds a claim to an XR with no claimRef, and names a claim's XR after
	// the claim (generateName, which its next apply by name drops: TestOneKarpenterPerCluster saw
	// it gone); a function's requirements are answered until two calls ask the same, in at most
	// five more calls; a selector with no namespace lists across every namespace.
	{"internal/controller/apiextensions/composite/composition_functions.go",
		"if c := metav1.GetControllerOf(r); c != nil && c.UID != xr.GetUID() {", "internal/tenancy (Own)"},
	{"internal/controller/apiextensions/composite/composition_functions.go",
		"// No controller reference: we can't prove we composed this resource,", "internal/tenancy (Own)"},
	{"internal/controller/apiextensions/claim/reconciler.go",
		"if ref := xr.GetClaimReference(); meta.WasCreated(xr) && ref != nil && !cmp.Equal(cm.GetReference(), ref) {", "internal/tenancy (Bound)"},
	{"internal/controller/apiextensions/claim/syncer_ssa.go", `xrPatch.SetGenerateName(fmt.Sprintf("%s-", cm.GetName()))`, "internal/tenancy (Bound)"},
	{"internal/controller/apiextensions/composite/composition_render.go",
		"if xr.GetLabels()[xcrd.LabelKeyClaimName] != \"\" && xr.GetLabels()[xcrd.LabelKeyClaimNamespace] != \"\" {", "internal/tenancy (Bound)"},
	{"internal/xfn/required_resources.go", "const MaxRequirementsIterations = 5", "internal/tenancy (Ask: two rounds of requirements)"},
	{"internal/xfn/required_resources.go", "opts := []client.ListOption{client.InNamespace(rs.GetNamespace())}", "internal/tenancy (Ask: one selector per namespace)"},
	{"internal/controller/protection/usage/reconciler.go", "waitPollInterval = 30 * time.Second",
		"a Usage being deleted is checked every 30 s (docs/platform.md)"},
	{"cmd/crossplane/core/core.go", "CircuitBreakerBurst float64 `default:\"100.0\"", "docs/platform.md"},
	{"cmd/crossplane/core/core.go", "CircuitBreakerRefillRate float64 `default:\"1.0\"", "docs/platform.md"},
	{"cmd/crossplane/core/core.go", "CircuitBreakerCooldown time.Duration `default:\"5m\"", "docs/platform.md"},
	{"internal/circuit/token_bucket.go", `halfOpenInterval: 30 * time.Second`, "an open breaker lets an event through every 30 s (docs/platform.md)"},
	{"internal/circuit/token_bucket.go", "This means Update events consume 2 tokens.", "docs/platform.md"},
	{"internal/controller/apiextensions/definition/reconciler.go",
		"h := handler.EnqueueRequestsFromMapFunc(circuit.NewMapFunc(circuit.NewSelfDeleteResetMapFunc(SelfMapFunc(), cb), cb))",
		"an XR's own watch events count against its breaker (docs/performance.md)"},
	{"internal/controller/apiextensions/composite/reconciler.go", `return "composite/" + name`,
		"an XR controller is named after its XRD (TestLoad's reconciles)"},
	{"internal/xfn/function_runner_metrics.go", `Subsystem: "function", Name: "run_function_request_total"`, "TestLoad's function calls"},
	{"internal/xfn/function_runner_metrics.go", `Subsystem: "function", Name: "run_function_response_total"`, "TestLoad's errors"},
	{"internal/circuit/circuit_metrics.go", `Subsystem: "circuit_breaker", Name: "opens_total"`, "TestLoad's circuit breaker openings"},
	// A Usage's first reconcile reads spec.of, resolves a selector into a copy the reconciler
	// never reads again, and dereferences spec.of.resourceRef: a selector-only "of" panics.
	{"internal/controller/protection/usage/reconciler.go", `of := u.GetUserOf() by := u.GetUsedBy()`,
		"the function names a Usage's ends by resourceRef (internal/usage; the suite's usagesNeverPanicked)"},
	{"internal/controller/protection/usage/selector.go", `u.SetUserOf(of)`, "internal/usage"},
	{"internal/controller/protection/usage/reconciler.go", `Namespace: ptr.Deref(of.ResourceRef.Namespace, uu.GetNamespace()), Name: of.ResourceRef.Name,`,
		"internal/usage"},
}

// TestCrossplaneFacts holds crossplaneFacts to the source of the Crossplane the suite runs (the
// module E2E_CROSSPLANE_CRDS lies in), so that a new version that changes one fails here rather
// than leaving a test, a figure or a doc quietly wrong.
func TestCrossplaneFacts(t *testing.T) {
	root := filepath.Join(os.Getenv("E2E_CROSSPLANE_CRDS"), "..", "..")
	for _, f := range crossplaneFacts {
		holdFact(t, filepath.Join(root, f.file), f.says, f.reliedOn)
	}
}

var space = regexp.MustCompile(`\s+`)

// sources are the files holdFact has read, their white space folded (the facts tests do not run
// in parallel).
var sources = map[string]string{}

// holdFact fails t unless the source file says says, white space aside.
func holdFact(t *testing.T, file, says, reliedOn string) {
	t.Helper()
	src, ok := sources[file]
	if !ok {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		src = space.ReplaceAllString(string(b), " ")
		sources[file] = src
	}
	if !strings.Contains(src, space.ReplaceAllString(says, " ")) {
		t.Errorf("%s no longer says %s, which %s relies on", file, says, reliedOn)
	}
}
