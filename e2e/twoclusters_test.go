//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Scenario 5: two claims for two clusters, from two tenant namespaces, coexist on one Crossplane
// without a name clash, in AWS or in Kubernetes: team-a's claim for prod-eu and team-b's for
// prod-us walk to Ready side by side, each with its own AWS names, its own Kustomizations (named
// after its cluster), everything in the cluster applied through its own cluster's ProviderConfig,
// and every resource labelled with its own cluster. A third claim for prod-eu, from team-c (which
// the tenancy allows), is refused because prod-eu is already claimed; one from team-b is refused
// by the tenancy. Deleting one claim leaves the other's resources untouched.
func TestTwoClusters(t *testing.T) {
	timed(t)
	// The shipped Composition must declare both clusters, prod-eu for team-a and team-c, prod-us
	// for team-b; fail at once, saying so, rather than time out on a claim it refuses.
	requireTenancy(t, map[string][]string{"prod-eu": {"team-a", "team-c"}, "prod-us": {"team-b"}})

	eu := newClaim(t, "team-a", "karpenter-eu", "prod-eu")
	us := newClaimFrom(t, "team-b", "karpenter-us", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "prod-us", "spec", "cluster", "name")
		_ = unstructured.SetNestedField(u.Object, "us-east-1", "spec", "cluster", "region")
		_ = unstructured.SetNestedField(u.Object, "arn:aws:iam::111122223333:role/prod-us-bootstrap-nodes", "spec", "nodeIdentity", "roleArn")
		_ = unstructured.SetNestedField(u.Object, "prod-us-bootstrap-nodes", "spec", "nodeIdentity", "instanceProfile")
	})
	start := time.Now()
	walkToReady(t, eu, us)
	t.Logf("both claims Ready in %.1fs", time.Since(start).Seconds())

	euRes, euUsages := eu.composed()
	usRes, usUsages := us.composed()
	for _, c := range []struct {
		claim     *claim
		resources map[string]*unstructured.Unstructured
		cluster   string
	}{{eu, euRes, "prod-eu"}, {us, usRes, "prod-us"}} {
		if !equalSets(sortedKeys(c.resources), allNames()) {
			t.Errorf("%s/%s: want every resource composed, got %v", c.claim.ns, c.claim.name, sortedKeys(c.resources))
		}
		assertDelivery(t, c.resources, c.cluster)
	}
	if len(euUsages) != len(usUsages) || len(euUsages) == 0 {
		t.Errorf("want the same Usages for both claims, got %d and %d", len(euUsages), len(usUsages))
	}
	for _, c := range []struct {
		usages  map[string]*unstructured.Unstructured
		cluster string
	}{{euUsages, "prod-eu"}, {usUsages, "prod-us"}} {
		for _, u := range mapValues(c.usages) {
			if got := u.GetLabels()[clusterLabel]; got != c.cluster {
				t.Errorf("%s %s: %s=%q, want %q", u.GetKind(), u.GetName(), clusterLabel, got, c.cluster)
			}
		}
	}

	t.Run("no AWS name is shared", func(t *testing.T) {
		euIDs, usIDs := awsIdentities(t, euRes), awsIdentities(t, usRes)
		if len(euIDs) != len(usIDs) {
			t.Errorf("want as many AWS identifiers for both clusters, got %d and %d", len(euIDs), len(usIDs))
		}
		for _, id := range sortedKeys(euIDs) {
			if other, clash := usIDs[id]; clash {
				t.Errorf("AWS identifier %q is used by prod-eu's %s and prod-us's %s", id, euIDs[id], other)
			}
		}
		for cluster, ids := range map[string]map[string]string{"prod-eu": euIDs, "prod-us": usIDs} {
			for _, id := range sortedKeys(ids) {
				if !strings.Contains(id, cluster) {
					t.Errorf("%s's AWS identifier %q (%s) does not name its cluster", cluster, id, ids[id])
				}
			}
		}
		t.Logf("%d AWS identifiers per cluster, none shared, e.g. %q and %q", len(euIDs), firstKey(euIDs, "queue "), firstKey(usIDs, "queue "))
	})

	t.Run("no Kubernetes object is shared", func(t *testing.T) {
		objects := map[string]string{}
		for _, c := range []struct {
			claim   *claim
			objects map[string]*unstructured.Unstructured
		}{{eu, euRes}, {eu, euUsages}, {us, usRes}, {us, usUsages}} {
			xrUID := c.claim.getXR().GetUID()
			for _, n := range sortedKeys(c.objects) {
				u := c.objects[n]
				id := fmt.Sprintf("%s %s %s/%s", u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName())
				if prev, clash := objects[id]; clash {
					t.Errorf("%s is composed by both %s and %s/%s", id, prev, c.claim.ns, c.claim.name)
				}
				objects[id] = c.claim.ns + "/" + c.claim.name
				if ref := controllerOf(u); ref != string(xrUID) {
					t.Errorf("%s (%s of %s/%s) is controlled by %q, not by its XR %s", id, n, c.claim.ns, c.claim.name, ref, xrUID)
				}
			}
		}
	})

	t.Run("each claim reports its own cluster's identifiers", func(t *testing.T) {
		for _, c := range []struct {
			claim          *claim
			roleARN, queue string
		}{
			{eu, wantRoleARN, wantQueueARN},
			{us, "arn:aws:iam::111122223333:role/socle/prod-us/prod-us-karpenter", "arn:aws:sqs:us-east-1:111122223333:prod-us-karpenter"},
		} {
			st, _, _ := unstructured.NestedMap(c.claim.get().Object, "status")
			q, _ := st["queue"].(map[string]any)
			if st["roleArn"] != c.roleARN || q["arn"] != c.queue {
				t.Errorf("%s/%s: want role %s and queue %s, got %v and %v", c.claim.ns, c.claim.name, c.roleARN, c.queue, st["roleArn"], q["arn"])
			}
		}
	})
	assertNothingLocal(t)

	// Refusals. Each refused claim is deleted when its subtest ends.
	t.Run("a claim for a cluster already claimed is refused", func(t *testing.T) {
		c := newClaim(t, "team-c", "karpenter", "prod-eu")
		c.assertRefused("team-c claims prod-eu, which team-a's claim holds", "Refused", "already claimed", `"prod-eu"`, eu.name)
	})
	t.Run("a claim for another tenant's cluster is refused", func(t *testing.T) {
		c := newClaim(t, "team-b", "karpenter-eu", "prod-eu")
		c.assertRefused("team-b claims prod-eu, which the tenancy gives to team-a and team-c", "Refused", `claims from namespace "team-b" may not target cluster "prod-eu"`)
	})
	assertUntouched(t, eu, euRes, nil)
	assertUntouched(t, us, usRes, nil)

	// Deleting prod-us's claim leaves prod-eu's resources alone.
	deletions := us.deleteAndWait()
	assertUntouched(t, eu, euRes, deletions)
	if n := len(deletions); n < len(usRes)+len(usUsages) {
		t.Errorf("deleting %s/%s: want the deletion of its %d resources and %d Usages seen, saw %d", us.ns, us.name, len(usRes), len(usUsages), n)
	}
}

// assertUntouched checks that a Ready claim still has exactly the resources it had (same UIDs,
// none being deleted, none seen deleted among deletions) and is still Ready.
func assertUntouched(t *testing.T, c *claim, before map[string]*unstructured.Unstructured, deletions []deletion) {
	t.Helper()
	for _, d := range deletions {
		if d.xr == c.xr {
			t.Errorf("%s/%s's %s (%s) was deleted", c.ns, c.name, d.name, d.kind)
		}
	}
	after, _ := c.composed()
	for _, n := range sortedKeys(before) {
		a, ok := after[n]
		switch {
		case !ok:
			t.Errorf("%s/%s's %s is gone", c.ns, c.name, n)
		case a.GetUID() != before[n].GetUID():
			t.Errorf("%s/%s's %s was re-created", c.ns, c.name, n)
		case a.GetDeletionTimestamp() != nil:
			t.Errorf("%s/%s's %s is being deleted", c.ns, c.name, n)
		case conditionStatus(a, "Ready") != "True":
			t.Errorf("%s/%s's %s is no longer Ready:\n%s", c.ns, c.name, n, conditionsText(a))
		}
	}
	if ready := c.condition("Ready"); ready == nil || ready["status"] != "True" {
		t.Errorf("%s/%s must still be Ready, got %v", c.ns, c.name, ready)
	}
}

// awsIdentities is every name or identifier a claim's managed resources take in AWS, each mapped
// to the composed resource that takes it. Two clusters in one account must share none.
func awsIdentities(t *testing.T, resources map[string]*unstructured.Unstructured) map[string]string {
	t.Helper()
	out := map[string]string{}
	add := func(n, kind, id string) {
		if id == "" {
			t.Errorf("%s: no %s identifier", n, kind)
			return
		}
		out[kind+" "+id] = n
	}
	for _, n := range sortedKeys(resources) {
		u := resources[n]
		fp := func(f string) string {
			s, _, _ := unstructured.NestedString(u.Object, "spec", "forProvider", f)
			return s
		}
		at := func(f string) string {
			s, _, _ := unstructured.NestedString(u.Object, "status", "atProvider", f)
			return s
		}
		ext := u.GetAnnotations()[externalNameAnno]
		switch u.GetKind() {
		case "Role":
			add(n, "role", ext)
			add(n, "role-arn", at("arn"))
		case "RolePolicy":
			add(n, "role-policy", fp("role")+"/"+ext)
		case "Queue":
			add(n, "queue", fp("name"))
			add(n, "queue-arn", at("arn"))
			add(n, "queue-url", at("url"))
		case "QueuePolicy":
			add(n, "queue-policy", fp("queueUrl"))
		case "Rule":
			add(n, "rule", ext)
			add(n, "rule-arn", at("arn"))
		case "Target":
			add(n, "target", fp("rule")+"/"+fp("targetId"))
		case "PodIdentityAssociation":
			add(n, "pod-identity-association", fp("clusterName")+"/"+fp("namespace")+"/"+fp("serviceAccount"))
			add(n, "pod-identity-association-arn", at("associationArn"))
		}
	}
	return out
}

// requireTenancy fails the test unless the shipped Composition's tenancy declares every cluster
// of want, claimable from (at least) the namespaces listed.
func requireTenancy(t *testing.T, want map[string][]string) {
	t.Helper()
	comps, err := readObjects(filepath.Join("..", "apis", "composition.yaml"))
	if err != nil || len(comps) != 1 {
		t.Fatalf("cannot read apis/composition.yaml: %v", err)
	}
	pipeline, _, _ := unstructured.NestedSlice(comps[0].Object, "spec", "pipeline")
	declared := map[string][]string{}
	for _, step := range pipeline {
		clusters, _, _ := unstructured.NestedSlice(step.(map[string]any), "input", "tenancy", "clusters")
		for _, cl := range clusters {
			m := cl.(map[string]any)
			name, _ := m["name"].(string)
			ns, _, _ := unstructured.NestedStringSlice(m, "namespaces")
			declared[name] = ns
		}
	}
	for _, cluster := range sortedKeys(want) {
		for _, ns := range want[cluster] {
			if !slices.Contains(declared[cluster], ns) {
				t.Fatalf("this scenario needs apis/composition.yaml's tenancy to let %s claim %s; it declares %v", ns, cluster, declared)
			}
		}
	}
}

func controllerOf(u *unstructured.Unstructured) string {
	for _, ref := range u.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller {
			return string(ref.UID)
		}
	}
	return ""
}

func mapValues[V any](m map[string]V) []V {
	out := make([]V, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, m[k])
	}
	return out
}

func firstKey(m map[string]string, prefix string) string {
	for _, k := range sortedKeys(m) {
		if strings.HasPrefix(k, prefix) {
			return k
		}
	}
	return ""
}
