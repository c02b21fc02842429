//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// poolsCondition says whether every pool is below the platform's near-limits ratio (the
// Composition's input.monitoring.nearLimitsRatio, 0.9).
const poolsCondition = "PoolsWithinLimits"

// poolsWithin is what the claimed cluster's Karpenter (its stand-in) reports of each pool in
// TestWalkToReady, well within the limits the nodes Kustomization sets for prod-eu's pools
// (private: cpu 100, memory 400Gi; public: cpu 32, memory 128Gi), as Flux applies them.
var poolsWithin = map[string]poolReport{
	"private": {nodes: 2, cpu: "8", memory: "32Gi"},
	"public":  {nodes: 1, cpu: "4", memory: "16Gi"},
}

// wantPoolsWithin is the request's status.pools for poolsWithin.
var wantPoolsWithin = map[string]any{
	"private": map[string]any{
		"nodes":  int64(2),
		"cpu":    map[string]any{"used": "8", "limit": "100", "percent": int64(8)},
		"memory": map[string]any{"used": "32Gi", "limit": "400Gi", "percent": int64(8)},
	},
	"public": map[string]any{
		"nodes":  int64(1),
		"cpu":    map[string]any{"used": "4", "limit": "32", "percent": int64(12)},
		"memory": map[string]any{"used": "16Gi", "limit": "128Gi", "percent": int64(12)},
	},
}

// clonePools deep-copies a status.pools.
func clonePools(p map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: p}).DeepCopy().Object
}

// assertPools waits until the request's PoolsWithinLimits has status, reason and message, and
// its status.pools is want.
func assertPools(t *testing.T, c *karpenter, status, reason, message string, want map[string]any) {
	t.Helper()
	wantJSON, _ := json.Marshal(want)
	var got []byte
	var cond map[string]any
	what := fmt.Sprintf("%s %s=%s/%s %q and status.pools %s", c.api.kind, poolsCondition, status, reason, message, wantJSON)
	err := waitFor(c.ctx, react, what, func() (bool, error) {
		u := c.get()
		cond = condition(u, poolsCondition)
		pools, _, _ := unstructured.NestedMap(u.Object, "status", "pools")
		got, _ = json.Marshal(pools)
		return cond != nil && cond["status"] == status && cond["reason"] == reason && cond["message"] == message && string(got) == string(wantJSON), nil
	})
	if err != nil {
		t.Fatalf("%v\nlast seen: %s %v, status.pools %s\n%s", err, poolsCondition, cond, got, c.describe())
	}
	t.Logf("%s %s=%s/%s: %s; status.pools %s", c.api.kind, poolsCondition, status, reason, message, got)
}
