package main

import (
	"strings"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
)

// atKubernetes is observed with the existing cluster reported by AWS at
// Kubernetes version v.
func atKubernetes(observed map[resource.Name]map[string]any, v string) map[resource.Name]map[string]any {
	out := copyObserved(observed)
	cluster := deepCopy(out["eks-cluster"])
	cluster["status"].(map[string]any)["atProvider"].(map[string]any)["version"] = v
	out["eks-cluster"] = cluster
	return out
}

// TestNextMinorReady: the claim says, from the cluster's version as AWS
// reports it, whether its Karpenter version (internal/versions, from each
// release's version.go) and every pool's AMI pin (internal/ami) serve the
// next Kubernetes minor, naming each that does not.
func TestNextMinorReady(t *testing.T) {
	pinned := func(b *requestBuilder) *requestBuilder { return b }
	for name, tc := range map[string]struct {
		version, cluster string
		status           fnv1.Status
		says, saysNot    []string
	}{
		"ServedBoth": {version: "1.14.3", cluster: "1.35", status: fnv1.Status_STATUS_CONDITION_TRUE,
			says: []string{"serve Kubernetes 1.36"}},
		"KarpenterStopsAt136": {version: "1.14.3", cluster: "1.36", status: fnv1.Status_STATUS_CONDITION_FALSE,
			says: []string{"not ready for Kubernetes 1.37", "Karpenter 1.14.3 runs on Kubernetes up to 1.36",
				"the private pool's AMI al2023@v20260714 serves no Kubernetes 1.37 AMI", "the public pool's AMI al2023@v20260714"}},
		"OnlyTheAMI": {version: "1.15.2", cluster: "1.36", status: fnv1.Status_STATUS_CONDITION_FALSE,
			says:    []string{"not ready for Kubernetes 1.37", "the private pool's AMI al2023@v20260714 serves no Kubernetes 1.37 AMI"},
			saysNot: []string{"Karpenter 1.15.2"}},
	} {
		t.Run(name, func(t *testing.T) {
			observed := atKubernetes(readyAt(t, tc.version, pinned), tc.cluster)
			rsp := run(t, aRequest(t).withSpec("version", tc.version).observing(observed).build())
			if msg := fatal(rsp); msg != "" {
				t.Fatalf("fatal: %s", msg)
			}
			got, msg := conditionsOf(rsp)["NextMinorReady"], conditionMessage(rsp, "NextMinorReady")
			if got.Status != tc.status {
				t.Errorf("NextMinorReady %v (%s), want %v", got, msg, tc.status)
			}
			for _, s := range tc.says {
				if !strings.Contains(msg, s) {
					t.Errorf("NextMinorReady says %q, want it to say %q", msg, s)
				}
			}
			for _, s := range tc.saysNot {
				if strings.Contains(msg, s) {
					t.Errorf("NextMinorReady says %q, want it not to name %q", msg, s)
				}
			}
		})
	}
}

// TestVersionThatCannotServeTheCluster: Karpenter 1.14.x on a cluster AWS
// reports at 1.37 is refused with both facts, and nothing is dropped; the
// tenant's move to 1.15.2 is not refused for it.
func TestVersionThatCannotServeTheCluster(t *testing.T) {
	pinned := func(b *requestBuilder) *requestBuilder { return b }
	observed := atKubernetes(readyAt(t, "1.14.3", pinned), "1.37")
	rsp := run(t, aRequest(t).withSpec("version", "1.14.3").observing(observed).build())
	want := `spec.version: Invalid value: "1.14.3": Karpenter 1.14.3 runs on Kubernetes 1.26 to 1.36, and cluster "prod-eu" runs 1.37`
	if msg := fatal(rsp); !strings.Contains(msg, want) {
		t.Errorf("fatal %q, want it to say %q", msg, want)
	}
	checkRefusalShown(t, rsp, "Refused", fatal(rsp))

	moved := run(t, aRequest(t).withSpec("version", "1.15.2").observing(observed).build())
	if msg := fatal(moved); strings.Contains(msg, "spec.version") {
		t.Errorf("the move to 1.15.2 is refused at spec.version: %s", msg)
	}
}
