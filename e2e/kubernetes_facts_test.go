//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kubernetesFacts are what this project says the Kubernetes v1.35.4 the suite runs does, in its
// tests and docs, each with the module and file that says it (whitespace aside) and where the
// project relies on it.
var kubernetesFacts = []struct{ module, file, says, reliedOn string }{
	// kube-controller-manager's client rate, which paces the garbage collector's deletions.
	{"k8s.io/kubernetes", "pkg/controller/apis/config/v1alpha1/defaults.go", "obj.Generic.ClientConnection.QPS = 20.0",
		"docs/platform.md, Many claims on one control plane (mass deletion); make load's KCM_FLAGS"},
	{"k8s.io/kubernetes", "pkg/controller/apis/config/v1alpha1/defaults.go", "obj.Generic.ClientConnection.Burst = 30", "docs/platform.md"},
	// The collector retries a refused deletion under client-go's default controller limiter.
	{"k8s.io/kubernetes", "pkg/controller/garbagecollector/graph_builder.go",
		"attemptToDelete := workqueue.NewTypedRateLimitingQueueWithConfig( workqueue.DefaultTypedControllerRateLimiter[*node](),", "docs/platform.md"},
	{"k8s.io/client-go", "util/workqueue/default_rate_limiters.go",
		"NewTypedItemExponentialFailureRateLimiter[T](5*time.Millisecond, 1000*time.Second),", "docs/platform.md"},
	{"k8s.io/client-go", "util/workqueue/default_rate_limiters.go", "rate.NewLimiter(rate.Limit(10), 100)", "docs/platform.md"},
	// An object with an owner that still exists is not deleted: the collector takes the owner
	// references being deleted off it, a strategic merge patch first, a JSON merge patch when
	// that is unsupported (custom resources): a Usage outlives its XR until its using resource goes.
	{"k8s.io/kubernetes", "pkg/controller/garbagecollector/garbagecollector.go",
		"case len(solid) != 0:", "docs/platform.md"},
	{"k8s.io/kubernetes", "pkg/controller/garbagecollector/garbagecollector.go",
		"p, err := c.GenerateDeleteOwnerRefStrategicMergeBytes(item.identity.UID, ownerUIDs)", "docs/platform.md"},
	{"k8s.io/kubernetes", "pkg/controller/garbagecollector/patch.go",
		"if !errors.IsUnsupportedMediaType(err) {", "docs/platform.md"},
	// The audit log is rotated at 100 MB when --audit-log-maxsize is not set: the log options'
	// defaults (the whole literal, so no MaxSize among them) leave it 0, which lumberjack reads
	// as 100 MB.
	{"k8s.io/apiserver", "pkg/server/options/audit.go", `LogOptions: AuditLogOptions{
			Format: pluginlog.FormatJson,
			BatchOptions: AuditBatchOptions{
				Mode:        ModeBlocking,
				BatchConfig: defaultLogBatchConfig(),
			},
			TruncateOptions:    NewAuditTruncateOptions(),
			GroupVersionString: "audit.k8s.io/v1",
		},`, "TestLoad's writes (auditLog)"},
	{"k8s.io/apiserver", "pkg/server/options/audit.go", "MaxSize: o.MaxSize,", "TestLoad's writes (auditLog)"},
	{"gopkg.in/natefinch/lumberjack.v2", "lumberjack.go", "defaultMaxSize = 100", "TestLoad's writes (auditLog)"},
	{"gopkg.in/natefinch/lumberjack.v2", "lumberjack.go", "if l.MaxSize == 0 { return int64(defaultMaxSize * megabyte)", "TestLoad's writes (auditLog)"},
	// A Probe's defaults, which the final check's readiness probe writes out so that the
	// Deployment the claimed cluster returns holds its manifest.
	{"k8s.io/kubernetes", "pkg/apis/core/v1/defaults.go", `func SetDefaults_Probe(obj *v1.Probe) {
	if obj.TimeoutSeconds == 0 {
		obj.TimeoutSeconds = 1
	}
	if obj.PeriodSeconds == 0 {
		obj.PeriodSeconds = 10
	}
	if obj.SuccessThreshold == 0 {
		obj.SuccessThreshold = 1
	}
	if obj.FailureThreshold == 0 {
		obj.FailureThreshold = 3
	}`, "internal/cluster/finalcheck.go (the final check's readiness probe)"},
}

// TestKubernetesFacts holds kubernetesFacts to the source of the modules the suite's Kubernetes
// is built from (E2E_KUBERNETES_SOURCES: module=folder, from e2e/tools/kubernetes), so that a new
// version that changes one fails here rather than leaving a figure or a doc quietly wrong.
func TestKubernetesFacts(t *testing.T) {
	roots := map[string]string{}
	for _, kv := range strings.Fields(os.Getenv("E2E_KUBERNETES_SOURCES")) {
		module, dir, _ := strings.Cut(kv, "=")
		roots[module] = dir
	}
	for _, f := range kubernetesFacts {
		root, ok := roots[f.module]
		if !ok {
			t.Fatalf("E2E_KUBERNETES_SOURCES has no folder for %s: run the suite with `make e2e-test`", f.module)
		}
		holdFact(t, filepath.Join(root, f.file), f.says, f.reliedOn)
	}
}
