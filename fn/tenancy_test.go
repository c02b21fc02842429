package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
)

// TestTenancy checks who may claim which cluster.
func TestTenancy(t *testing.T) {
	cases := map[string]struct {
		reason string
		req    *requestBuilder
		// want is the field path the Fatal result names; empty when allowed.
		want string
		// hidden are what the refusal must not tell.
		hidden []string
	}{
		"Allowed": {
			reason: "team-a is declared for prod-eu, and the claim repeats the region and node identity the platform declares for it.",
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
		"NamespacedXR": {
			reason: "A namespaced XR's own namespace is the tenant: team-a's XR may claim prod-eu.",
			req:    aNamespacedRequest(t),
		},
		"NamespacedXROfAnotherTenant": {
			reason: "team-b's namespaced XR may not take team-a's cluster: no claimRef to forge, the XR's namespace decides.",
			req:    aNamespacedRequest(t).withXRNamespace("team-b"),
			want:   "spec.cluster.name: Forbidden: claims from namespace \"team-b\" may not target cluster \"prod-eu\"",
		},
		"NamespacedXRNamingAClaim": {
			reason: "A claimRef written into a namespaced XR's spec is no claim: the spec has no such field, and the XR's namespace decides.",
			req:    aNamespacedRequest(t).withXRNamespace("team-b").withSpec("claimRef", map[string]any{"name": "karpenter", "namespace": "team-a"}),
			want:   "spec.cluster.name: Forbidden: claims from namespace \"team-b\" may not target cluster \"prod-eu\"",
		},
		"PlatformFactsLeftUnset": {
			reason: "A claim that leaves them unset gets the platform's.",
			req:    aRequest(t).withSpec("cluster.region", nil).withSpec("nodeIdentity", nil),
		},
		"ForeignNodeRole": {
			reason: "A tenant choosing the role Karpenter passes to EC2 would run every node it launches as that role.",
			req:    aRequest(t).withSpec("nodeIdentity.roleArn", "arn:aws:iam::111122223333:role/OrganizationAccountAccessRole"),
			want:   `spec.nodeIdentity.roleArn: Forbidden: the platform decides it for cluster "prod-eu" (` + nodeRoleARN + `): leave it unset or repeat it`,
		},
		"NodeRoleOfAnotherAccount": {
			reason: "A node role of another account is just as foreign.",
			req:    aRequest(t).withSpec("nodeIdentity.roleArn", "arn:aws:iam::999988887777:role/prod-eu-bootstrap-nodes"),
			want:   `spec.nodeIdentity.roleArn: Forbidden: the platform decides it for cluster "prod-eu"`,
		},
		"ForeignInstanceProfile": {
			reason: "The instance profile carries a role too: the nodes would run as whatever it holds.",
			req:    aRequest(t).withSpec("nodeIdentity.instanceProfile", "admin"),
			want:   `spec.nodeIdentity.instanceProfile: Forbidden: the platform decides it for cluster "prod-eu" (prod-eu-bootstrap-nodes)`,
		},
		"ForeignRegion": {
			reason: "A region of the tenant's choosing would put the queue, rules and association where another cluster of that name may live.",
			req:    aRequest(t).withSpec("cluster.region", "us-east-1"),
			want:   `spec.cluster.region: Forbidden: the platform decides it for cluster "prod-eu" (eu-west-3): leave it unset or repeat it`,
		},
		"PinnedToARevision": {
			reason: "A claim on Manual updates keeps an older revision's input, and with it a policy the platform has since tightened.",
			req:    aRequest(t).withSpec("compositionUpdatePolicy", "Manual").withSpec("compositionRevisionRef", map[string]any{"name": "karpenter.platform.socle.do-now.io-0a1b2c3"}),
			want:   "spec.compositionUpdatePolicy: Forbidden: must be Automatic",
		},
		"AutomaticUpdates": {
			reason: "Automatic is what the XRD defaults, and the revision Crossplane writes then is the latest.",
			req:    aRequest(t).withSpec("compositionUpdatePolicy", "Automatic").withSpec("compositionRevisionRef", map[string]any{"name": "karpenter.platform.socle.do-now.io-0a1b2c3"}),
		},
		"SelectsARevision": {
			reason: "A revision selector picks the newest revision carrying labels of the tenant's choosing: an old one.",
			req:    aRequest(t).withSpec("compositionRevisionSelector", map[string]any{"matchLabels": map[string]any{"release": "2025"}}),
			want:   "spec.compositionRevisionSelector: Forbidden: must not be set",
		},
		"SelectsAComposition": {
			reason: "A Composition selector is the tenant choosing the function input.",
			req:    aRequest(t).withSpec("compositionSelector", map[string]any{"matchLabels": map[string]any{"tier": "lax"}}),
			want:   "spec.compositionSelector: Forbidden: must not be set",
		},
		"NamespacedXRPinned": {
			reason: "A namespaced XR holds the same choice under spec.crossplane.",
			req:    aNamespacedRequest(t).withSpec("crossplane", map[string]any{"compositionUpdatePolicy": "Manual"}),
			want:   "spec.crossplane.compositionUpdatePolicy: Forbidden: must be Automatic",
		},
		"NonMemberLearnsNothing": {
			reason: "A namespace the cluster is not given to is refused without learning the platform's facts about it.",
			req:    aRequest(t).withSpec("claimRef.namespace", "team-b").withSpec("cluster.region", "us-east-1"),
			want:   `spec.cluster.region: Forbidden: the platform decides it for cluster "prod-eu": leave it unset`,
			hidden: []string{"eu-west-3", nodeRoleARN},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, tc.req.build())
			checkDecision(t, tc.reason, tc.want, rsp)
			for _, h := range tc.hidden {
				if msg := fatal(rsp); strings.Contains(msg, h) {
					t.Errorf("%s\nthe refusal %q tells a non-member %q", tc.reason, msg, h)
				}
			}
		})
	}
}

// TestPlatformDecidesTheIdentity walks a claim that names only its cluster
// to Ready: every regional resource is in the region, and the controller
// may pass only the node role, the platform declares for the cluster.
func TestPlatformDecidesTheIdentity(t *testing.T) {
	objs := readyDesired(t, fakeProviders{t: t, account: account}, aRequest(t).withSpec("cluster.region", nil).withSpec("nodeIdentity", nil))
	regional := 0
	for n, o := range objs {
		fp, _ := o["spec"].(map[string]any)["forProvider"].(map[string]any)
		if r, ok := fp["region"]; ok {
			regional++
			if r != region {
				t.Errorf("%s is in %v, want the platform's %s", n, r, region)
			}
		}
	}
	if regional < 12 {
		t.Errorf("only %d regional resources composed; the walk did not reach Ready", regional)
	}
	var policy struct {
		Statement []struct {
			Action    any
			Resource  any
			Condition map[string]map[string]any
		}
	}
	doc := objs["controller-role-policy"]["spec"].(map[string]any)["forProvider"].(map[string]any)["policy"].(string)
	if err := json.Unmarshal([]byte(doc), &policy); err != nil {
		t.Fatal(err)
	}
	// IAM takes a string or a list of strings for both.
	strs := func(v any) []string {
		if s, ok := v.(string); ok {
			return []string{s}
		}
		var out []string
		for _, e := range v.([]any) {
			out = append(out, e.(string))
		}
		return out
	}
	passes := 0
	for _, st := range policy.Statement {
		if slices.Contains(strs(st.Action), "iam:PassRole") {
			passes++
			if r := strs(st.Resource); !slices.Equal(r, []string{nodeRoleARN}) {
				t.Errorf("the controller may pass %v, want only the platform's node role %s", st.Resource, nodeRoleARN)
			}
		}
	}
	if passes != 1 {
		t.Errorf("want one iam:PassRole statement, got %d", passes)
	}
}

// checkDecision checks the answer to a claim: its first step composed when
// want is empty; else refused with a message saying want, nothing composed,
// and the refusal shown on the claim.
func checkDecision(t *testing.T, reason, want string, rsp *fnv1.RunFunctionResponse) {
	t.Helper()
	got := fatal(rsp)
	switch {
	case want == "" && got != "":
		t.Errorf("%s\nrefused: %s", reason, got)
	case want == "" && len(desiredNames(rsp)) == 0:
		t.Errorf("%s\nan allowed claim must compose its first step", reason)
	case want != "" && !strings.Contains(got, want):
		t.Errorf("%s\nfatal message %q does not say %q", reason, got, want)
	case want != "" && len(rsp.GetDesired().GetResources()) != 0:
		t.Errorf("%s\na refused claim must compose nothing, got %v", reason, desiredNames(rsp))
	}
	if want != "" {
		checkRefusalShown(t, rsp, "Refused", got)
	}
}

// TestIdentityIsImmutable changes the cluster name or region of a claim
// whose AWS resources exist: refused, and nothing is dropped.
func TestIdentityIsImmutable(t *testing.T) {
	aws := fakeProviders{t: t, account: account}
	observed := aws.firstStep(aRequest(t), true)
	eu2 := declared("prod-eu2", account, region, "team-a")
	tenancy := []any{declared(clusterName, account, region, "team-a"), eu2}
	cases := map[string]struct {
		reason string
		req    *requestBuilder
		want   string
	}{
		"ClusterRenamed": {
			reason: "Renaming the cluster would orphan the role and the queue.",
			req: aRequest(t).withSpec("cluster.name", "prod-eu2").withInput("tenancy.clusters", tenancy).
				withInput("nodes.subnetClusterTag", map[string]any{"key": "kubernetes.io/cluster/{cluster}"}),
			want: "spec.cluster.name: Forbidden: is immutable: the controller role \"prod-eu-karpenter\" exists",
		},
		"RegionChangedByThePlatform": {
			reason: "A platform that moves the cluster's region would recreate the queue and rules elsewhere.",
			req: aRequest(t).withSpec("cluster.region", nil).withInput("tenancy.clusters",
				[]any{declared(clusterName, account, "eu-west-1", "team-a"), eu2}),
			want: "spec.cluster.region: Forbidden: is immutable: the interruption queue exists in eu-west-3",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := tc.req.observing(observed).build()
			rsp := run(t, req)
			got := fatal(rsp)
			if !strings.Contains(got, tc.want) {
				t.Errorf("%s\nfatal message %q does not say %q", tc.reason, got, tc.want)
			}
			checkRefusalShown(t, rsp, "Refused", got)
			// Crossplane applies nothing from a Fatal response: what exists stays.
			for n := range observed {
				if _, ok := rsp.GetDesired().GetResources()[string(n)]; ok {
					t.Errorf("%s\na refused change must not re-emit %s with the new identity", tc.reason, n)
				}
			}
		})
	}
}

// TestOneKarpenterPerCluster checks that a cluster another XR holds cannot
// be claimed again, even from a namespace the platform allows: both would
// manage the same AWS role, queue and rules. A rival counts only when the
// XR that controls it exists; no refusal names it.
func TestOneKarpenterPerCluster(t *testing.T) {
	const (
		earlier = "2026-11-01T10:00:00Z"
		later   = "2026-11-02T10:00:00Z"
	)
	teamC := claimXR("team-c-karpenter-q9w8e", "team-c", "prod-eu")
	other := controllerRole(teamC, earlier)
	platform := claimXR("platform-karpenter", "", "prod-eu")
	nsC := namespacedXR("karpenter", "team-c", "prod-eu")
	self := func(b *requestBuilder) map[string]any { return controllerRole(b.xr, earlier) }
	cases := map[string]struct {
		reason string
		req    *requestBuilder
		want   string
	}{
		"NotResolvedYet": {
			reason: "Before Crossplane answered the requirement nothing is known: compose as usual; Crossplane calls again with the answer.",
			req:    aRequest(t),
		},
		"NoRoleYet": {
			reason: "Nobody holds the cluster.",
			req:    aRequest(t).requiring(),
		},
		"OwnRoleOnly": {
			reason: "The XR's own role is not a rival.",
			req:    func() *requestBuilder { b := aRequest(t); return b.requiring(self(b)) }(),
		},
		"HeldByAnotherClaim": {
			reason: "team-c's claim holds prod-eu: team-a's is refused, without learning by whom.",
			req:    aRequest(t).requiring(other, teamC),
			want:   `spec.cluster.name: Forbidden: cluster "prod-eu" is already claimed: one Karpenter per cluster`,
		},
		"HeldByThePlatform": {
			reason: "An XR without a claim holds prod-eu: its name is not told (a claim's spec.resourceRef would need it).",
			req:    aRequest(t).requiring(controllerRole(platform, earlier), platform),
			want:   `cluster "prod-eu" is already claimed: one Karpenter per cluster`,
		},
		"HolderDeleted": {
			reason: "A role whose XR no longer exists holds nothing (a forged one, or one left behind).",
			req:    aRequest(t).requiring(other),
		},
		"HolderBeingDeleted": {
			reason: "A role whose XR is being deleted holds nothing more: its cluster is being freed.",
			req:    aRequest(t).requiring(other, with(teamC, "metadata.deletionTimestamp", earlier)),
		},
		"HolderOfAnotherUID": {
			reason: "An XR of the holder's name that is not the one that composed the role (a new one, after the old was deleted) does not make it hold.",
			req:    aRequest(t).requiring(other, with(teamC, "metadata.uid", "0b9d1c3e-0000-4000-8000-000000000000")),
		},
		"HolderAsksForAnotherCluster": {
			reason: "A role labelled for prod-eu whose XR asks for prod-us holds nothing of prod-eu.",
			req:    aRequest(t).requiring(other, with(teamC, "spec.cluster.name", "prod-us")),
		},
		"RaceLostByTheYounger": {
			reason: "Both XRs composed a role at once: the one with the younger role gives way.",
			req: func() *requestBuilder {
				b := aRequest(t)
				return b.requiring(controllerRole(b.xr, later), other, teamC)
			}(),
			want: `cluster "prod-eu" is already claimed: one Karpenter per cluster`,
		},
		"NamespacedXRHeldByAClaim": {
			reason: "team-c's claim holds prod-eu: team-a's namespaced XR is refused, across APIs.",
			req:    aNamespacedRequest(t).requiring(other, teamC),
			want:   `cluster "prod-eu" is already claimed: one Karpenter per cluster`,
		},
		"ClaimHeldByANamespacedXR": {
			reason: "team-c's namespaced XR holds prod-eu: team-a's claim is refused, across APIs.",
			req:    aRequest(t).requiring(controllerRole(nsC, earlier), nsC),
			want:   `cluster "prod-eu" is already claimed: one Karpenter per cluster`,
		},
		"OwnNamespacedRole": {
			reason: "The namespaced XR's own role, in its own namespace, is not a rival.",
			req:    func() *requestBuilder { b := aNamespacedRequest(t); return b.requiring(self(b)) }(),
		},
		"SameNameInAnotherNamespace": {
			reason: "Two namespaced XRs may share a name: team-c/karpenter's older role holds the cluster against team-a/karpenter.",
			req: func() *requestBuilder {
				b := aNamespacedRequest(t)
				return b.requiring(controllerRole(b.xr, later), controllerRole(nsC, earlier), nsC)
			}(),
			want: `cluster "prod-eu" is already claimed: one Karpenter per cluster`,
		},
		"RaceWonByTheOlder": {
			reason: "Both XRs composed a role at once: the one with the older role keeps the cluster.",
			req: func() *requestBuilder {
				b := aRequest(t)
				own := controllerRole(b.xr, earlier)
				return b.observing(map[resource.Name]map[string]any{"controller-role": own}).requiring(own, controllerRole(teamC, later), teamC)
			}(),
		},
		"SquatterOutsideTheTenancy": {
			reason: "A namespaced XR's role in a namespace the tenancy does not give prod-eu to is not even asked for.",
			req: func() *requestBuilder {
				z := namespacedXR("karpenter", "team-z", "prod-eu")
				return aRequest(t).requiring(controllerRole(z, earlier), z)
			}(),
		},
		"RoleNoXRComposed": {
			reason: "A labelled Role that no XR controls holds nothing.",
			req: aRequest(t).requiring(func() map[string]any {
				r := controllerRole(teamC, earlier)
				delete(r["metadata"].(map[string]any), "ownerReferences")
				return r
			}(), teamC),
		},
		"OtherTenantsClaim": {
			reason: "A role of a claim from a namespace the tenancy does not give prod-eu to holds nothing.",
			req: func() *requestBuilder {
				b := claimXR("team-b-karpenter-m3n4p", "team-b", "prod-eu")
				return aRequest(t).requiring(controllerRole(b, earlier), b)
			}(),
		},
		"HolderHiddenFromNonMember": {
			reason: "team-b, to which prod-eu is not given, is refused without learning who holds it.",
			req:    aRequest(t).withSpec("claimRef.namespace", "team-b").requiring(other, teamC),
			want:   `claims from namespace "team-b" may not target cluster "prod-eu"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// The tests' tenancy gives prod-eu to team-c too.
			tc.req.withInput("tenancy.clusters", []any{declared(clusterName, account, region, "team-a", "team-c")})
			rsp := run(t, tc.req.build())
			checkDecision(t, tc.reason, tc.want, rsp)
			for _, hidden := range []string{"team-c-karpenter-q9w8e", "platform-karpenter", "team-c/karpenter"} {
				if strings.Contains(fatal(rsp), hidden) {
					t.Errorf("%s\nthe refusal names %s: %s", tc.reason, hidden, fatal(rsp))
				}
			}
			// Every answer asks again, so a rival that appears later is seen:
			// roles and leases of the claim API and the platform's XRs at the
			// cluster scope, of namespaced XRs in each namespace prod-eu is
			// given to, and nowhere else.
			reqs := rsp.GetRequirements().GetResources()
			want := map[string][3]string{
				"cluster-controller-roles-claim": {"iam.aws.upbound.io/v1beta1", "Role", ""},
				"cluster-leases-claim":           {"kubernetes.crossplane.io/v1alpha2", "Object", ""},
			}
			for _, ns := range []string{"team-a", "team-c"} {
				want["cluster-controller-roles-namespaced/"+ns] = [3]string{"iam.aws.m.upbound.io/v1beta1", "Role", ns}
				want["cluster-leases-namespaced/"+ns] = [3]string{"kubernetes.m.crossplane.io/v1alpha1", "Object", ns}
			}
			for key, w := range want {
				sel := reqs[key]
				what := map[string]string{"Role": "controller-role", "Object": "cluster-lease"}[w[1]]
				wantLabels := map[string]string{"socle.do-now.io/cluster": "prod-eu", "socle.do-now.io/composition-resource": what}
				if sel.GetApiVersion() != w[0] || sel.GetKind() != w[1] || sel.GetNamespace() != w[2] || (w[2] == "") != (sel.Namespace == nil) ||
					!cmp.Equal(wantLabels, sel.GetMatchLabels().GetLabels()) {
					t.Errorf("requirement %s %v, want the %s %ss labelled %v in namespace %q", key, sel, w[0], w[1], wantLabels, w[2])
				}
			}
			for key := range reqs {
				if _, ok := want[key]; !ok && !strings.HasPrefix(key, "composite/") {
					t.Errorf("requirement %s %v: nothing else is asked for", key, reqs[key])
				}
			}
		})
	}
}

// claimXR is the XKarpenter Crossplane created for claim namespace/karpenter
// asking for cluster (the platform's own when namespace is empty), with a
// UID of its own.
func claimXR(name, namespace, cluster string) map[string]any {
	xr := map[string]any{
		"apiVersion": "platform.socle.do-now.io/v1alpha1",
		"kind":       "XKarpenter",
		"metadata":   map[string]any{"name": name, "uid": "uid-" + name},
		"spec":       map[string]any{"cluster": map[string]any{"name": cluster}},
	}
	if namespace != "" {
		xr["spec"].(map[string]any)["claimRef"] = map[string]any{"apiVersion": "platform.socle.do-now.io/v1alpha1", "kind": "Karpenter", "name": "karpenter", "namespace": namespace}
	}
	return xr
}

// namespacedXR is team namespace's Karpenter XR asking for cluster.
func namespacedXR(name, namespace, cluster string) map[string]any {
	return map[string]any{
		"apiVersion": "platform.m.socle.do-now.io/v1alpha1",
		"kind":       "Karpenter",
		"metadata":   map[string]any{"name": name, "namespace": namespace, "uid": "uid-" + namespace + "-" + name},
		"spec":       map[string]any{"cluster": map[string]any{"name": cluster}},
	}
}

// with is o with the dotted path set to v.
func with(o map[string]any, path string, v any) map[string]any {
	o = deepCopy(o)
	if err := fieldpath.Pave(o).SetValue(path, v); err != nil {
		panic(err)
	}
	return o
}

// controllerRole is the controller role for prod-eu that xr composed, as
// Crossplane renders it (composedBy), created at created.
func controllerRole(xr map[string]any, created string) map[string]any {
	gv := map[string]string{"XKarpenter": "iam.aws.upbound.io/v1beta1", "Karpenter": "iam.aws.m.upbound.io/v1beta1"}[xr["kind"].(string)]
	r := composedBy(xr, "controller-role", map[string]any{
		"apiVersion": gv,
		"kind":       "Role",
		"metadata": map[string]any{
			"name":              xr["metadata"].(map[string]any)["name"].(string) + "-controller-role",
			"labels":            map[string]any{"socle.do-now.io/cluster": "prod-eu", "socle.do-now.io/composition-resource": "controller-role"},
			"creationTimestamp": created,
		},
	})
	return r
}

// TestClustersShareOneControlPlane walks two claims for two clusters to
// Ready: no AWS name and no Kubernetes object of one is the other's, and
// everything of each goes to its own cluster through its own ProviderConfig,
// the Kustomizations built from the source its own Flux has.
func TestClustersShareOneControlPlane(t *testing.T) {
	aws := fakeProviders{t: t, account: account}
	usDeclared := declared("prod-us", otherAccount, "us-east-1", "team-b")
	usDeclared["kubernetesProviderConfig"] = "eks-prod-us"
	usDeclared["awsProviderConfig"] = "aws-prod-us"
	usDeclared["flux"] = map[string]any{"sourceRef": map[string]any{"kind": "OCIRepository", "name": "platform-us"}}
	tenancy := []any{declared(clusterName, account, region, "team-a"), usDeclared}
	eu := readyDesired(t, aws, aRequest(t).withInput("tenancy.clusters", tenancy))
	us := readyDesired(t, fakeProviders{t: t, account: otherAccount}, aRequest(t).withInput("tenancy.clusters", tenancy).
		withSpec("claimRef.namespace", "team-b").withSpec("cluster", map[string]any{"name": "prod-us"}).withSpec("nodeIdentity", nil))

	// Each cluster's AWS resources go through its account's provider config.
	for _, tc := range []struct {
		objs           map[string]map[string]any
		providerConfig string
	}{{eu, "default"}, {us, "aws-prod-us"}} {
		aws := 0
		for n, o := range tc.objs {
			if !strings.Contains(o["apiVersion"].(string), ".aws.upbound.io/") {
				continue
			}
			aws++
			if got := o["spec"].(map[string]any)["providerConfigRef"]; !cmp.Equal(got, map[string]any{"name": tc.providerConfig}) {
				t.Errorf("%s goes through %v, want the account's ProviderConfig %s", n, got, tc.providerConfig)
			}
		}
		if aws < 12 {
			t.Errorf("only %d AWS resources composed through %s", aws, tc.providerConfig)
		}
	}
	usPolicy := us["controller-role-policy"]["spec"].(map[string]any)["forProvider"].(map[string]any)["policy"].(string)
	if !strings.Contains(usPolicy, "arn:aws:iam::"+otherAccount+":role/prod-us-bootstrap-nodes") || strings.Contains(usPolicy, account) {
		t.Errorf("prod-us's controller policy must name its own account's node role and nothing of %s: %s", account, usPolicy)
	}

	// What names a resource where it lives: the external name of an AWS
	// resource, the queue's name, what an Object applies and where.
	identities := func(objs map[string]map[string]any, cluster string) map[string]string {
		out := map[string]string{}
		for n, o := range objs {
			md, _ := o["metadata"].(map[string]any)
			labels, _ := md["labels"].(map[string]any)
			if labels["socle.do-now.io/cluster"] != cluster {
				t.Errorf("%s of %s is labelled for cluster %v", n, cluster, labels["socle.do-now.io/cluster"])
			}
			spec, _ := o["spec"].(map[string]any)
			fp, _ := spec["forProvider"].(map[string]any)
			switch o["kind"] {
			case "Object":
				m := fp["manifest"].(map[string]any)
				mmd := m["metadata"].(map[string]any)
				out[n] = fmt.Sprintf("%v %v/%v in %v", m["kind"], mmd["namespace"], mmd["name"], spec["providerConfigRef"].(map[string]any)["name"])
			case "Queue":
				out[n] = fp["name"].(string)
			default:
				if a, ok := md["annotations"].(map[string]any); ok && a["crossplane.io/external-name"] != nil {
					out[n] = a["crossplane.io/external-name"].(string)
				}
			}
		}
		return out
	}
	euIDs, usIDs := identities(eu, "prod-eu"), identities(us, "prod-us")
	if len(euIDs) != len(usIDs) || len(euIDs) < 12 {
		t.Fatalf("named resources: %d for prod-eu, %d for prod-us", len(euIDs), len(usIDs))
	}
	taken := map[string]string{}
	for n, id := range euIDs {
		taken[id] = n
	}
	for n, id := range usIDs {
		if other, ok := taken[id]; ok {
			t.Errorf("prod-us's %s and prod-eu's %s are both %q", n, other, id)
		}
	}
	for _, tc := range []struct {
		objs           map[string]map[string]any
		providerConfig string
		source         map[string]any
	}{
		{eu, "prod-eu", map[string]any{"kind": "GitRepository", "name": "flux-system", "namespace": "flux-system"}},
		{us, "eks-prod-us", map[string]any{"kind": "OCIRepository", "name": "platform-us", "namespace": "flux-system"}},
	} {
		for _, n := range union(step3, step4, step5) {
			if got := tc.objs[n]["spec"].(map[string]any)["providerConfigRef"]; !cmp.Equal(got, map[string]any{"name": tc.providerConfig}) {
				t.Errorf("%s goes through %v, want ProviderConfig %s", n, got, tc.providerConfig)
			}
		}
		for _, n := range union(step4, step5) {
			k := tc.objs[n]["spec"].(map[string]any)["forProvider"].(map[string]any)["manifest"].(map[string]any)
			ks := k["spec"].(map[string]any)
			if got, ok := ks["kubeConfig"]; ok {
				t.Errorf("%s's Kustomization carries kubeConfig %v: the claimed cluster's own Flux applies it, with no kubeconfig", n, got)
			}
			if got := ks["sourceRef"]; !cmp.Equal(got, tc.source) {
				t.Errorf("%s's Kustomization builds from %v, want %v", n, got, tc.source)
			}
		}
	}
}

// TestRefusalWarnsOnce checks that a refusal the claim already shows gets no
// new warning on every reconcile, only the Fatal result and the condition.
func TestRefusalWarnsOnce(t *testing.T) {
	b := aRequest(t).withSpec("claimRef.namespace", "team-b")
	msg := fatal(run(t, b.build()))
	if msg == "" {
		t.Fatal("team-b's claim for prod-eu must be refused")
	}
	b.xrConds = append(b.xrConds, map[string]any{"type": "Accepted", "status": "False", "reason": "Refused", "message": msg})
	rsp := run(t, b.build())
	if results := rsp.GetResults(); len(results) != 1 || results[0].GetSeverity() != fnv1.Severity_SEVERITY_FATAL {
		t.Errorf("the claim already shows this refusal: want only the Fatal result, got %v", results)
	}
	if c := conditionsOf(rsp)["Accepted"]; c != (cond{fnv1.Status_STATUS_CONDITION_FALSE, "Refused"}) {
		t.Errorf("Accepted %v, want it kept False/Refused", c)
	}
}

// otherAccount is the account of the tests' second cluster.
const otherAccount = "444455556666"

// declared is a cluster as the platform's tenancy declares it: its account,
// region, bootstrap node role and instance profile (<name>-bootstrap-nodes),
// and the namespaces that may claim it.
func declared(name, account, region string, namespaces ...any) map[string]any {
	return map[string]any{
		"name": name, "account": account, "region": region, "namespaces": namespaces,
		"nodeIdentity": map[string]any{"roleArn": "arn:aws:iam::" + account + ":role/" + name + "-bootstrap-nodes", "instanceProfile": name + "-bootstrap-nodes"},
	}
}

// readyDesired answers b's calls with the fake providers until the function
// says the XR is Ready, and returns what it desires then.
func readyDesired(t *testing.T, aws fakeProviders, b *requestBuilder) map[string]map[string]any {
	t.Helper()
	var observed map[resource.Name]map[string]any
	for range 16 {
		rsp := run(t, b.observing(observed).build())
		if msg := fatal(rsp); msg != "" {
			t.Fatalf("refused: %s", msg)
		}
		if rsp.GetDesired().GetComposite().GetReady() != fnv1.Ready_READY_FALSE {
			out := map[string]map[string]any{}
			for n, r := range rsp.GetDesired().GetResources() {
				out[n] = r.GetResource().AsMap()
			}
			return out
		}
		observed = aws.observe(rsp, true)
	}
	t.Fatal("not Ready after 10 calls")
	return nil
}
