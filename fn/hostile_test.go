package main

import (
	"fmt"
	"maps"
	"math/rand"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

// The findings of issue 48 a tenant reaches through Crossplane's own rules,
// each tried as that tenant, with RBAC in its own namespace only.

// twoTenants gives prod-eu to team-a and team-c.
func twoTenants(b *requestBuilder) *requestBuilder {
	return b.withInput("tenancy.clusters", []any{declared(clusterName, account, region, "team-a", "team-c")})
}

// leaseOf is the lease Crossplane composed for xr, created at created.
func leaseOf(xr map[string]any, created string) map[string]any {
	gv := map[string]string{"XKarpenter": "kubernetes.crossplane.io/v1alpha2", "Karpenter": "kubernetes.m.crossplane.io/v1alpha1"}[xr["kind"].(string)]
	return composedBy(xr, "cluster-lease", map[string]any{
		"apiVersion": gv,
		"kind":       "Object",
		"metadata": map[string]any{
			"name":              xr["metadata"].(map[string]any)["name"].(string) + "-lease",
			"labels":            map[string]any{"socle.do-now.io/cluster": "prod-eu", "socle.do-now.io/composition-resource": "cluster-lease"},
			"creationTimestamp": created,
		},
	})
}

// aws reports whether rsp composes anything in AWS.
func composesAWS(rsp *fnv1.RunFunctionResponse) []string {
	var out []string
	for n, r := range rsp.GetDesired().GetResources() {
		if v, _ := r.GetResource().AsMap()["apiVersion"].(string); strings.Contains(v, ".aws.") {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// TestDecoyIsNotAHold: team-c's namespaced XR names, in its
// spec.crossplane.resourceRefs, a ConfigMap of its own namespace annotated
// as a composed resource. Crossplane passes it as observed (it controls
// nothing, so Crossplane does not skip it); it is no proof that the XR holds
// the cluster, which team-a's older lease holds.
func TestDecoyIsNotAHold(t *testing.T) {
	teamA := namespacedXR("karpenter", "team-a", "prod-eu")
	b := twoTenants(aNamespacedRequest(t).withXRNamespace("team-c"))
	b.xr["metadata"].(map[string]any)["uid"] = "uid-team-c-karpenter"
	own := leaseOf(b.xr, "2026-11-02T10:00:00Z")
	decoy := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "decoy", "namespace": "team-c",
			"annotations": map[string]any{"crossplane.io/composition-resource-name": "decoy"}},
	}
	rsp := run(t, b.observing(map[resource.Name]map[string]any{"cluster-lease": own}).
		observingForeign("decoy", decoy).
		requiring(own, leaseOf(teamA, "2026-11-01T10:00:00Z"), teamA).build())
	if got := fatal(rsp); !strings.Contains(got, `cluster "prod-eu" is already claimed`) {
		t.Errorf("team-c's XR with a decoy must be refused, the cluster is team-a's; got %q, composing %v", got, desiredNames(rsp))
	}
	if aws := composesAWS(rsp); len(aws) > 0 {
		t.Errorf("team-c's XR composes %v in AWS on a decoy's word", aws)
	}
}

// TestDecoyIsNeitherKeptNorRead: an XR that holds its cluster and observes
// an object it does not control (no controller, or another XR's) neither
// answers it back (it would become the XR's composed resource) nor reads
// it as its own: a foreign "controller-role" does not stand for the role.
func TestDecoyIsNeitherKeptNorRead(t *testing.T) {
	b := aNamespacedRequest(t)
	observed := walkTo(t, b, 2)
	role := observed["controller-role"]
	delete(observed, "controller-role")
	foreign := composedBy(namespacedXR("other", "team-a", "prod-eu"), "controller-role", role)
	rsp := run(t, aNamespacedRequest(t).observing(observed).observingForeign("controller-role", foreign).requiring().build())
	if msg := fatal(rsp); msg != "" {
		t.Fatalf("refused: %s", msg)
	}
	got := rsp.GetDesired().GetResources()["controller-role"].GetResource().AsMap()
	md, _ := got["metadata"].(map[string]any)
	if _, ok := md["ownerReferences"]; ok {
		t.Errorf("the answer carries the foreign role's metadata: %v", md)
	}
	if slices.Contains(desiredNames(rsp), "queue-policy") {
		t.Errorf("with its own role not observed, the XR must not go on to step 2 on another XR's role: %v", desiredNames(rsp))
	}
}

// walkTo answers b's calls with the fake providers, all Ready, n times,
// and returns what is observed then.
func walkTo(t *testing.T, b *requestBuilder, n int) map[resource.Name]map[string]any {
	t.Helper()
	aws := fakeProviders{t: t, account: account}
	var observed map[resource.Name]map[string]any
	for range n {
		rsp := run(t, b.observing(observed).build())
		if msg := fatal(rsp); msg != "" {
			t.Fatalf("refused: %s", msg)
		}
		observed = aws.observe(rsp, true)
	}
	return observed
}

// TestForgedLeaseHoldsNothing: team-c writes, in its own namespace, an
// Object labelled as a lease for prod-eu, older than any, with a controller
// reference to an XR that does not exist (or none). team-a's claim takes the
// cluster all the same.
func TestForgedLeaseHoldsNothing(t *testing.T) {
	ghost := namespacedXR("karpenter", "team-c", "prod-eu")
	forged := leaseOf(ghost, "2020-01-01T00:00:00Z")
	uncontrolled := leaseOf(ghost, "2020-01-01T00:00:00Z")
	delete(uncontrolled["metadata"].(map[string]any), "ownerReferences")
	for name, l := range map[string]map[string]any{"ControllerMissing": forged, "NoController": uncontrolled} {
		t.Run(name, func(t *testing.T) {
			b := twoTenants(aRequest(t))
			own := leaseOf(b.xr, "2026-11-02T10:00:00Z")
			rsp := run(t, b.observing(map[resource.Name]map[string]any{"cluster-lease": own}).requiring(own, l).build())
			if msg := fatal(rsp); msg != "" {
				t.Fatalf("a forged lease blocks team-a: %s", msg)
			}
			if !slices.Contains(desiredNames(rsp), "controller-role") {
				t.Errorf("team-a's XR holds its cluster and composes step 1, got %v", desiredNames(rsp))
			}
		})
	}
}

// TestClaimBindsOnlyItsOwnXR: a tenant's claim whose spec.resourceRef names
// the platform's own XR (no claimRef) is bound by Crossplane, which writes
// the claim's spec, labels and claimRef on it. The function refuses that
// XR: nothing changes, and the refusal names nothing of the platform's.
func TestClaimBindsOnlyItsOwnXR(t *testing.T) {
	platform := aRequest(t).withSpec("claimRef", nil)
	platform.xr["metadata"] = map[string]any{"name": "platform-karpenter", "uid": xrUID}
	observed := walkTo(t, platform, 8)

	bound := aRequest(t)
	bound.xr["metadata"] = map[string]any{"name": "platform-karpenter", "uid": xrUID,
		"labels": map[string]any{"crossplane.io/claim-name": "karpenter", "crossplane.io/claim-namespace": "team-a"}}
	// What Crossplane observes: what the platform's XR composed, as it
	// labelled it then (no claim).
	composedByPlatform := map[resource.Name]map[string]any{}
	for n, o := range observed {
		composedByPlatform[n] = composedBy(platform.xr, string(n), o)
	}
	rsp := run(t, bound.observing(composedByPlatform).requiring().build())
	got := fatal(rsp)
	if !strings.Contains(got, "spec.claimRef: Forbidden: this XR was not created for claim team-a/karpenter") {
		t.Fatalf("the bound XR must be refused, got %q", got)
	}
	if len(rsp.GetDesired().GetResources()) != 0 {
		t.Errorf("a refused XR answers nothing (Crossplane applies nothing), got %v", desiredNames(rsp))
	}

	t.Run("NothingComposedYet", func(t *testing.T) {
		rsp := run(t, bound.observing(nil).requiring().build())
		if got := fatal(rsp); !strings.Contains(got, "its name was not generated from the claim's") {
			t.Errorf("an XR Crossplane did not name after the claim must be refused, got %q", got)
		}
	})
	t.Run("NamedLikeAClaimsXR", func(t *testing.T) {
		for name, generated := range map[string]bool{
			"karpenter-x7k2p": true, "karpenter-b2c4d": true,
			"karpenter-x7k2":     false, // four characters
			"karpenter-x7k2pp":   false, // six
			"karpenter-aeiou":    false, // vowels the generator never draws
			"karpenter-eu-x7k2p": false, // another claim's
			"platform-karpenter": false,
			"xkarpenter-x7k2p":   false,
		} {
			b := aRequest(t)
			b.xr["metadata"].(map[string]any)["name"] = name
			got := fatal(run(t, b.requiring().build()))
			if refused := strings.Contains(got, "its name was not generated from the claim's"); refused == generated {
				t.Errorf("XR %s of claim karpenter: refused %v, want %v (%s)", name, refused, !generated, got)
			}
		}
	})
	t.Run("CreatedForTheClaim", func(t *testing.T) {
		rsp := run(t, aRequest(t).requiring().build())
		if got := fatal(rsp); got != "" {
			t.Errorf("the XR Crossplane created for the claim is refused: %s", got)
		}
	})
}

// TestHugeLabelledObjects: seventeen Objects labelled as leases for prod-eu,
// each with a 250 KiB annotation, made the request of prod-eu's holder
// 4.49 MB, over the function's 4 MiB gRPC limit: no reconcile of the holder
// could reach it. Written in a namespace prod-eu is not given to, they are
// not even asked for; written in one it is given to, they are more than the
// function reads: a clear refusal for an XR that asks for the cluster, and
// none for the holder, which keeps composing. Either way the request stays
// within what the function receives.
func TestHugeLabelledObjects(t *testing.T) {
	field, _ := reflect.TypeFor[CLI]().FieldByName("MaxRecvMessageSize")
	limitMB, err := strconv.Atoi(field.Tag.Get("default"))
	if err != nil {
		t.Fatal(err)
	}
	flood := func(namespace string) []map[string]any {
		var out []map[string]any
		pad := strings.Repeat("x", 250<<10)
		for i := range 17 {
			xr := namespacedXR(string(rune('a'+i))+"-karpenter", namespace, "prod-eu")
			l := leaseOf(xr, "2026-11-01T10:00:00Z")
			l["metadata"].(map[string]any)["annotations"].(map[string]any)["pad"] = pad
			out = append(out, l)
		}
		return out
	}
	holder := func(b *requestBuilder) *requestBuilder {
		return b.observing(walkTo(t, twoTenants(aRequest(t)).requiring(), 3))
	}
	cases := map[string]struct {
		reason  string
		req     *requestBuilder
		refused string
	}{
		"ElsewhereHolder": {
			reason: "In team-z, which prod-eu is not given to: not asked for.",
			req:    holder(twoTenants(aRequest(t))).requiring(flood("team-z")...),
		},
		"ElsewhereAsking": {
			reason: "In team-z: a new claim takes the cluster as if they were not there.",
			req:    twoTenants(aRequest(t)).requiring(flood("team-z")...),
		},
		"TenantHolder": {
			reason: "In team-c, which shares prod-eu: the holder keeps composing.",
			req:    holder(twoTenants(aRequest(t))).requiring(flood("team-c")...),
		},
		"TenantAsking": {
			reason:  "In team-c: an XR that asks for the cluster is refused, saying why.",
			req:     twoTenants(aRequest(t)).requiring(flood("team-c")...),
			refused: "more than the function reads",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := tc.req.build()
			if size := proto.Size(req); size >= limitMB<<20 {
				t.Errorf("%s\nthe request is %d bytes, over the function's %d MiB gRPC limit", tc.reason, size, limitMB)
			}
			if size := proto.Size(req); strings.HasPrefix(name, "Elsewhere") && size >= 1<<20 {
				t.Errorf("%s\nthe request is %d bytes: objects no tenant of prod-eu wrote inflate it", tc.reason, size)
			}
			rsp := run(t, req)
			got := fatal(rsp)
			switch {
			case tc.refused == "" && got != "":
				t.Errorf("%s\nrefused: %s", tc.reason, got)
			case tc.refused != "" && !strings.Contains(got, tc.refused):
				t.Errorf("%s\nwant refused saying %q, got %q", tc.reason, tc.refused, got)
			}
		})
	}
}

// TestHostileObjectsNeverOwned drives the function with random hostile
// observed and required resources beside a claim's real walk: objects with
// no controller, another XR's controller (same name, other UID; other kind;
// the XR's UID, not as controller), each taking the place of one of the
// XR's composed resources or added under a name of its own, some with big
// annotations, and leases for prod-eu older than any, in the tenant
// namespaces and beyond, with no controller or one that does not exist.
// Whatever it is given, the function answers exactly what it answers
// without them: it never holds, keeps, reads or deletes what it does not
// own, and a hostile lease never refuses the XR that holds its cluster.
func TestHostileObjectsNeverOwned(t *testing.T) {
	settled := walkTo(t, twoTenants(aRequest(t)).requiring(), 8)
	names := slices.Sorted(maps.Keys(settled))
	for seed := int64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewSource(seed))
		hostile, clean := twoTenants(aRequest(t)), twoTenants(aRequest(t))
		observed := maps.Clone(settled)
		var existing []map[string]any
		for i := range 1 + rng.Intn(6) {
			victim := names[rng.Intn(len(names))]
			o := composedBy(hostile.xr, string(victim), settled[victim])
			md := o["metadata"].(map[string]any)
			owner := map[string]any{"apiVersion": "platform.socle.do-now.io/v1alpha1", "kind": "XKarpenter",
				"name": "karpenter-x7k2p", "uid": "forged", "controller": true}
			switch rng.Intn(4) {
			case 0: // no controller
				delete(md, "ownerReferences")
			case 1: // same XR name, another UID
				md["ownerReferences"] = []any{owner}
			case 2: // another kind of the same name and UID
				owner["apiVersion"], owner["kind"], owner["uid"] = "platform.m.socle.do-now.io/v1alpha1", "Karpenter", xrUID
				md["ownerReferences"] = []any{owner}
			case 3: // the XR's UID, but not as controller
				owner["uid"], owner["controller"] = xrUID, false
				md["ownerReferences"] = []any{owner}
			}
			if rng.Intn(2) == 0 {
				md["annotations"].(map[string]any)["pad"] = strings.Repeat("y", rng.Intn(64<<10))
			}
			name := string(victim)
			if rng.Intn(2) == 0 {
				// It takes the place of the XR's own.
				delete(observed, victim)
			} else {
				name = fmt.Sprintf("decoy-%d", i)
			}
			hostile.observingForeign(name, o)
			// And a lease for prod-eu, older than any.
			l := leaseOf(namespacedXR("x", []string{"team-a", "team-c", "team-z"}[rng.Intn(3)], "prod-eu"), "2020-01-01T00:00:00Z")
			if rng.Intn(2) == 0 {
				delete(l["metadata"].(map[string]any), "ownerReferences")
			}
			existing = append(existing, l)
		}
		got := run(t, hostile.observing(observed).requiring(existing...).build())
		want := run(t, clean.observing(observed).requiring().build())
		if msg := fatal(got); msg != "" {
			t.Errorf("seed %d: refused: %s", seed, msg)
			continue
		}
		for what, pair := range map[string][2]proto.Message{
			"desired":    {want.GetDesired(), got.GetDesired()},
			"conditions": {&fnv1.RunFunctionResponse{Conditions: want.GetConditions()}, &fnv1.RunFunctionResponse{Conditions: got.GetConditions()}},
			"results":    {&fnv1.RunFunctionResponse{Results: want.GetResults()}, &fnv1.RunFunctionResponse{Results: got.GetResults()}},
		} {
			if diff := cmp.Diff(pair[0], pair[1], protocmp.Transform()); diff != "" {
				t.Errorf("seed %d: hostile objects change the %s answered (-without +with):\n%s", seed, what, diff)
			}
		}
	}
}

// TestAdmissionPolicyReported: when the platform names the admission
// policy's binding, every claim says whether it denies what it refuses, from
// what Crossplane finds; unnamed, the function asks for nothing of it.
func TestAdmissionPolicyReported(t *testing.T) {
	const name = "karpenter-tenant-requests.platform.socle.do-now.io"
	binding := func(actions ...any) map[string]any {
		return map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"policyName": name, "validationActions": actions}}
	}
	cases := map[string]struct {
		reason   string
		input    any
		existing []map[string]any
		want     string // the condition's status; empty: none
	}{
		"NotAsked":   {reason: "The platform names no binding: no condition, no requirement.", existing: []map[string]any{binding("Deny")}},
		"Bound":      {reason: "The binding denies.", input: name, existing: []map[string]any{binding("Deny")}, want: "STATUS_CONDITION_TRUE"},
		"Absent":     {reason: "No binding of that name.", input: name, want: "STATUS_CONDITION_FALSE"},
		"WarnOnly":   {reason: "A binding that only warns lets the binding through.", input: name, existing: []map[string]any{binding("Warn")}, want: "STATUS_CONDITION_FALSE"},
		"AnotherOne": {reason: "Another binding does not stand for it.", input: name, existing: []map[string]any{with(binding("Deny"), "metadata.name", "other")}, want: "STATUS_CONDITION_FALSE"},
		"OtherPolicy": {reason: "A binding of that name that binds another policy does not stand for it.", input: name,
			existing: []map[string]any{with(binding("Deny"), "spec.policyName", "allow-everything")}, want: "STATUS_CONDITION_FALSE"},
		"Narrowed": {reason: "A binding that matches only some namespaces leaves the others unguarded.", input: name,
			existing: []map[string]any{with(binding("Deny"), "spec.matchResources", map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"x": "y"}}})}, want: "STATUS_CONDITION_FALSE"},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			rsp := run(t, aRequest(t).withInput("admissionPolicyBinding", tc.input).requiring(tc.existing...).build())
			if msg := fatal(rsp); msg != "" {
				t.Fatalf("refused: %s", msg)
			}
			var got *fnv1.Condition
			for _, c := range rsp.GetConditions() {
				if c.GetType() == "TenantAdmission" {
					got = c
				}
			}
			_, asked := rsp.GetRequirements().GetResources()["admission-policy-binding"]
			switch {
			case tc.want == "" && (got != nil || asked):
				t.Errorf("%s\ncondition %v, requirement asked %v", tc.reason, got, asked)
			case tc.want != "" && (got == nil || got.GetStatus().String() != tc.want || !asked):
				t.Errorf("%s\ncondition %v (asked %v), want status %s", tc.reason, got, asked, tc.want)
			}
		})
	}
}
