package main

import (
	"strings"
	"testing"
)

// TestTenancy checks who may claim which cluster.
func TestTenancy(t *testing.T) {
	cases := map[string]struct {
		reason string
		req    *requestBuilder
		// want is the field path the Fatal result names; empty when allowed.
		want string
	}{
		"Allowed": {
			reason: "team-a is declared for prod-eu.",
			req:    aRequest(t),
		},
		"PlatformXRWithoutClaim": {
			reason: "An XR created without a claim is the platform's own: the cluster must be declared, no namespace applies.",
			req:    aRequest(t).withSpec("claimRef", nil),
		},
		"OtherTenantsCluster": {
			reason: "team-b may not install Karpenter on team-a's cluster, nor take over its AWS names.",
			req:    aRequest(t).withSpec("claimRef.namespace", "team-b"),
			want:   "spec.cluster.name: Forbidden: claims from namespace \"team-b\" may not target cluster \"prod-eu\"",
		},
		"UndeclaredCluster": {
			reason: "A cluster the platform has not declared cannot be claimed.",
			req:    aRequest(t).withSpec("cluster.name", "staging"),
			want:   "spec.cluster.name: Forbidden: cluster \"staging\" is not declared",
		},
		"NoTenancy": {
			reason: "Without a tenancy declaration every claim is refused: deny by default.",
			req:    aRequest(t).withInput("tenancy", nil),
			want:   "input.tenancy: Forbidden",
		},
		"NodeRoleOfAnotherAccount": {
			reason: "A node role from another account would let the controller pass a foreign role to EC2.",
			req:    aRequest(t).withSpec("nodeIdentity.roleArn", "arn:aws:iam::999988887777:role/prod-eu-bootstrap-nodes"),
			want:   "spec.nodeIdentity.roleArn: Forbidden: the node role is in account 999988887777",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, tc.req.build())
			got := fatal(rsp)
			switch {
			case tc.want == "" && got != "":
				t.Errorf("%s\nrefused: %s", tc.reason, got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("%s\nfatal message %q does not say %q", tc.reason, got, tc.want)
			case tc.want != "" && len(rsp.GetDesired().GetResources()) != 0:
				t.Errorf("%s\na refused claim must compose nothing, got %v", tc.reason, desiredNames(rsp))
			}
		})
	}
}

// TestIdentityIsImmutable changes the cluster name or region of a claim
// whose AWS resources exist: refused, and nothing is dropped.
func TestIdentityIsImmutable(t *testing.T) {
	aws := fakeProviders{t: t, account: account}
	observed := aws.observe(run(t, aRequest(t).build()), true)
	tenancy := []any{
		map[string]any{"name": "prod-eu", "account": account, "namespaces": []any{"team-a"}},
		map[string]any{"name": "prod-eu2", "account": account, "namespaces": []any{"team-a"}},
	}
	cases := map[string]struct {
		reason string
		req    *requestBuilder
		want   string
	}{
		"ClusterRenamed": {
			reason: "Renaming the cluster would orphan the role and the queue.",
			req:    aRequest(t).withSpec("cluster.name", "prod-eu2"),
			want:   "spec.cluster.name: Forbidden: is immutable: the controller role \"prod-eu-karpenter\" exists",
		},
		"RegionChanged": {
			reason: "Moving region would recreate the queue and rules elsewhere.",
			req:    aRequest(t).withSpec("cluster.region", "eu-west-1"),
			want:   "spec.cluster.region: Forbidden: is immutable: the interruption queue exists in eu-west-3",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := tc.req.withInput("tenancy.clusters", tenancy).observing(observed).build()
			rsp := run(t, req)
			if got := fatal(rsp); !strings.Contains(got, tc.want) {
				t.Errorf("%s\nfatal message %q does not say %q", tc.reason, got, tc.want)
			}
			// Crossplane applies nothing from a Fatal response: what exists stays.
			for n := range observed {
				if _, ok := rsp.GetDesired().GetResources()[string(n)]; ok {
					t.Errorf("%s\na refused change must not re-emit %s with the new identity", tc.reason, n)
				}
			}
		})
	}
}
