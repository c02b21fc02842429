package main

import (
	"encoding/json"
	"strings"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
)

// TestControllerPolicyFollowsTheObservedVPC: the controller policy names the
// VPC the observed EKS cluster reports. While the cluster reports none, an
// existing policy keeps the document it has and the controller its
// manifest, and nothing is dropped; a cluster recreated in another VPC moves
// the policy with it; a value that is no VPC ID is refused.
func TestControllerPolicyFollowsTheObservedVPC(t *testing.T) {
	aws := fakeProviders{t: t, account: account}
	var ready map[resource.Name]map[string]any
	for range 16 {
		ready = aws.observe(run(t, aRequest(t).observing(ready).build()), true)
	}
	if _, ok := ready["nodes-kustomization"]; !ok {
		t.Fatalf("test setup: the walk did not reach the node pools: %v", ready)
	}
	vpcConfig := func(vpc any) func(map[resource.Name]map[string]any) {
		return func(o map[resource.Name]map[string]any) {
			at := o["eks-cluster"]["status"].(map[string]any)["atProvider"].(map[string]any)
			if vpc == nil {
				delete(at, "vpcConfig")
				return
			}
			at["vpcConfig"] = []any{map[string]any{"vpcId": vpc}}
		}
	}
	cases := map[string]struct {
		reason string
		change func(map[resource.Name]map[string]any)
		// vpcs: the VPCs the new policy grants; nil: the policy and the
		// controller stay as observed.
		vpcs  []string
		fatal string
	}{
		"StatusWiped": {
			reason: "A cluster observed without its VPC keeps the policy and the controller as they are, and drops nothing.",
			change: vpcConfig(nil),
		},
		"ClusterUnobserved": {
			reason: "So does a cluster Crossplane does not observe at the moment.",
			change: func(o map[resource.Name]map[string]any) { delete(o, "eks-cluster") },
		},
		"Recreated": {
			reason: "An EKS cluster cannot change its VPC: another VPC is a cluster of that name created anew, and the policy follows it.",
			change: vpcConfig("vpc-0c4a7"),
			vpcs:   []string{"arn:aws:ec2:eu-west-3:*:vpc/vpc-0c4a7"},
		},
		"NotAVPCID": {
			reason: "A VPC that is no VPC ID, a wildcard say, is refused: it would grant every VPC.",
			change: vpcConfig("*"),
			fatal:  `reports VPC "*", which is not a VPC ID`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			observed := copyObserved(ready)
			tc.change(observed)
			rsp := run(t, aRequest(t).observing(observed).build())
			if tc.fatal != "" {
				if msg := fatal(rsp); !strings.Contains(msg, tc.fatal) {
					t.Errorf("\n%s\nfatal message %q does not say %q", tc.reason, msg, tc.fatal)
				}
				return
			}
			if msg := fatal(rsp); msg != "" {
				t.Fatalf("\n%s\nunexpected refusal: %s", tc.reason, msg)
			}
			desired := map[string]bool{}
			for _, n := range desiredNames(rsp) {
				desired[n] = true
			}
			for n := range observed {
				if !strings.HasPrefix(string(n), "usage-") && !desired[string(n)] {
					t.Errorf("\n%s\n%s exists and is no longer desired", tc.reason, n)
				}
			}
			policy := forProvider(rsp, "controller-role-policy", "policy")
			if tc.vpcs == nil {
				want := observed["controller-role-policy"]["spec"].(map[string]any)["forProvider"].(map[string]any)["policy"]
				if policy != want {
					t.Errorf("\n%s\ncontroller policy %v, want the observed %v", tc.reason, policy, want)
				}
				wantManifest := observed["controller-kustomization"]["spec"].(map[string]any)["forProvider"].(map[string]any)["manifest"]
				if diff := cmp.Diff(wantManifest, forProvider(rsp, "controller-kustomization", "manifest")); diff != "" {
					t.Errorf("\n%s\ncontroller manifest (-observed +desired):\n%s", tc.reason, diff)
				}
				if got := conditionsOf(rsp)["IdentityAndQueueReady"].Status; got != fnv1.Status_STATUS_CONDITION_FALSE {
					t.Errorf("\n%s\nIdentityAndQueueReady %v, want False while the VPC is not observed", tc.reason, got)
				}
				return
			}
			var doc struct {
				Statement []struct {
					Sid       string
					Condition map[string]map[string][]string
				}
			}
			if err := json.Unmarshal([]byte(policy.(string)), &doc); err != nil {
				t.Fatalf("controller policy is not JSON: %v", err)
			}
			var vpcs []string
			for _, s := range doc.Statement {
				if s.Sid == "AllowScopedEC2InstanceAccessActionsInClusterVPC" {
					vpcs = s.Condition["ArnLike"]["ec2:Vpc"]
				}
			}
			if diff := cmp.Diff(tc.vpcs, vpcs); diff != "" {
				t.Errorf("\n%s\nthe controller may launch in (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
