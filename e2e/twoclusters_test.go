//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/do-now/function-karpenter/internal/ami"
)

// Scenario 5: two requests for two clusters, from two tenant namespaces, through one API, coexist
// on one Crossplane without a name clash, in AWS or in Kubernetes: team-a's for prod-eu and
// team-b's for prod-us walk to Ready side by side, each with its own AWS names, its own
// Kustomizations (named after its cluster), everything in the cluster applied through its own
// cluster's provider config, and every resource labelled with its own cluster. A third request
// for prod-eu, from team-c (which the tenancy allows) and of the same name as team-a's, is
// refused because prod-eu is already held — through either API: one Karpenter per cluster,
// whichever API asks; one from team-b is refused by the tenancy. Neither request names a version
// or an AMI, and the platform starts them a wave behind its shipped pins; then it moves prod-eu's
// pins alone, and prod-eu upgrades while prod-us keeps its version and AMI (aWave). Deleting one
// request leaves the other's resources untouched.
//
// Both clusters are real (realClaimedClusters): the real provider-kubernetes applies each
// request's Objects to its own claimed cluster, whose real Flux installs its own Karpenter. Each
// cluster's controller runs with its own cluster's name, queue and ServiceAccount; deleting
// prod-us's request uninstalls it from prod-us alone, and prod-eu's install stays as it was.
func TestTwoClusters(t *testing.T) {
	timed(t)
	claimed, _, _ := realClaimedClusters(t, claimedOptions{}, "prod-eu", "prod-us")
	forEachAPI(t, func(t *testing.T, a *api) { testTwoClusters(t, a, claimed) })
}

func testTwoClusters(t *testing.T, a *api, claimed map[string]*claimedCluster) {
	// The shipped Composition must declare both clusters, prod-eu for team-a and team-c, prod-us
	// for team-b; fail at once, saying so, rather than time out on a request it refuses.
	requireTenancy(t, a, map[string][]string{"prod-eu": {"team-a", "team-c"}, "prod-us": {"team-b"}})
	// The API before this one installed into the same clusters: its uninstall is over in
	// Crossplane's cluster, and must be in the claimed ones too.
	ns, _, _ := unstructured.NestedString(platformInput(t, a), "podIdentity", "namespace")
	for _, c := range sortedKeys(claimed) {
		claimed[c].waitUninstalled(t, ns)
	}

	// The fleet starts a wave behind: the platform pins the release before its default (one it
	// may roll back to: the same minor and CRDs) and the AMI release before its pin. Neither
	// request names a version or an AMI: both follow the platform, until aWave moves prod-eu.
	newest, _, _ := unstructured.NestedString(platformInput(t, a), "versions", "default")
	older := rollbackOf(newest)
	if older == "" {
		t.Fatalf("internal/versions knows no release before the shipped default %s to start the wave from", newest)
	}
	previous, latest := mustSeededReleases(t)
	changeInput(t, a, func(input map[string]any) {
		_ = unstructured.SetNestedField(input, older, "versions", "default")
		_ = unstructured.SetNestedField(input, ami.Prefix+previous, "nodes", "defaultAmiAlias")
	})
	followsPlatform := func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, "spec", "version") }
	eu := newKarpenterFrom(t, a, "team-a", "karpenter-eu", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "prod-eu", "spec", "cluster", "name")
		followsPlatform(u)
	})
	us := newKarpenterFrom(t, a, "team-b", "karpenter-us", func(u *unstructured.Unstructured) {
		onProdUS(u)
		followsPlatform(u)
	})
	start := time.Now()
	walkToReady(t, eu, us)
	t.Logf("both %ss Ready in %.1fs", a.kind, time.Since(start).Seconds())
	eu.settled()
	us.settled()
	// Each claimed cluster runs its own request's controller: installedByFlux holds its
	// Deployment's ServiceAccount, CLUSTER_NAME and INTERRUPTION_QUEUE to the request's.
	installedByFlux(t, eu, claimed["prod-eu"])
	installedByFlux(t, us, claimed["prod-us"])

	euRes, euUsages := eu.composed()
	usRes, usUsages := us.composed()
	for _, c := range []struct {
		k                 *karpenter
		resources, usages map[string]*unstructured.Unstructured
		cluster           string
	}{{eu, euRes, euUsages, "prod-eu"}, {us, usRes, usUsages, "prod-us"}} {
		if !equalSets(sortedKeys(c.resources), allNames()) {
			t.Errorf("%s: want every resource composed, got %v", c.k, sortedKeys(c.resources))
		}
		assertDelivery(t, c.resources, c.cluster)
		assertScope(t, c.k, c.resources, c.usages)
	}
	if len(euUsages) != len(usUsages) || len(euUsages) == 0 {
		t.Errorf("want the same Usages for both %ss, got %d and %d", a.kind, len(euUsages), len(usUsages))
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
			k       *karpenter
			objects map[string]*unstructured.Unstructured
		}{{eu, euRes}, {eu, euUsages}, {us, usRes}, {us, usUsages}} {
			xrUID := c.k.getXR().GetUID()
			for _, n := range sortedKeys(c.objects) {
				u := c.objects[n]
				id := fmt.Sprintf("%s %s %s/%s", u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName())
				if prev, clash := objects[id]; clash {
					t.Errorf("%s is composed by both %s and %s", id, prev, c.k)
				}
				objects[id] = c.k.String()
				if ref := controllerOf(u); ref != string(xrUID) {
					t.Errorf("%s (%s of %s) is controlled by %q, not by its XR %s", id, n, c.k, ref, xrUID)
				}
			}
		}
	})

	t.Run("each reports its own cluster's identifiers", func(t *testing.T) {
		for _, c := range []struct {
			k              *karpenter
			roleARN, queue string
		}{
			{eu, wantRoleARN, wantQueueARN},
			{us, "arn:aws:iam::111122223333:role/socle/prod-us/prod-us-karpenter", "arn:aws:sqs:us-east-1:111122223333:prod-us-karpenter"},
		} {
			st, _, _ := unstructured.NestedMap(c.k.get().Object, "status")
			q, _ := st["queue"].(map[string]any)
			if st["roleArn"] != c.roleARN || q["arn"] != c.queue {
				t.Errorf("%s: want role %s and queue %s, got %v and %v", c.k, c.roleARN, c.queue, st["roleArn"], q["arn"])
			}
		}
	})
	assertNothingLocal(t)

	// Refusals. Each refused request is deleted when its subtest ends. The one from team-c has
	// the name of team-a's: a namespaced XR's composed resources carry its name alone in their
	// labels, so only their namespace tells the two apart.
	for _, b := range apis {
		t.Run("a "+b.kind+" for a cluster already held is refused", func(t *testing.T) {
			c := newKarpenter(t, b, "team-c", eu.name, "prod-eu")
			c.assertRefused(fmt.Sprintf("team-c asks for prod-eu with a %s, which %s holds", b.kind, eu), "Refused",
				`cluster "prod-eu" is already claimed: one Karpenter per cluster`)
		})
	}
	t.Run("a "+a.kind+" for another tenant's cluster is refused", func(t *testing.T) {
		c := newKarpenter(t, a, "team-b", "karpenter-eu", "prod-eu")
		c.assertRefused("team-b asks for prod-eu, which the tenancy gives to team-a and team-c", "Refused", `claims from namespace "team-b" may not target cluster "prod-eu"`)
	})
	assertUntouched(t, eu, euRes, nil)
	assertUntouched(t, us, usRes, nil)

	aWave(t, a, eu, claimed["prod-eu"], us, claimed["prod-us"], older, newest, ami.Prefix+previous, ami.Prefix+latest)
	// The wave proved prod-eu's new AMI with a new access check Pod, which has an Object of its
	// own: what prod-us's deletion must leave untouched is what prod-eu composes now.
	euRes, _ = eu.composed()

	// Deleting prod-us's request uninstalls it from prod-us and leaves prod-eu's resources, and
	// its install, alone.
	deletions := us.deleteAndWait()
	assertUntouched(t, eu, euRes, deletions)
	if n := len(deletions); n < len(usRes)+len(usUsages) {
		t.Errorf("deleting %s: want the deletion of its %d resources and %d Usages seen, saw %d", us, len(usRes), len(usUsages), n)
	}
	claimed["prod-us"].waitUninstalled(t, ns)
	installedByFlux(t, eu, claimed["prod-eu"])
}

// Scenario 5, across the APIs at once: a namespaced XR from team-c and a claim from team-a ask for
// prod-eu back to back, in the same instant. Each composes its lease first, and nothing in AWS
// until it holds the cluster. Exactly one holds it (ClusterHeld, Accepted); the other is refused
// naming the holder, and has composed its lease alone. The holder walks to Ready; deleting the
// refused one then deletes its lease alone, and the holder stays Ready with every AWS identity
// and every composed resource as they were. prod-eu is real (realClaimedClusters): each lease
// is an observe-only Object of its kube-system Namespace, which the real provider-kubernetes
// reads and, deleting a lease, leaves alone; the holder is installed there by its real Flux.
func TestOneKarpenterPerCluster(t *testing.T) {
	timed(t)
	claimed, _, _ := realClaimedClusters(t, claimedOptions{}, "prod-eu")
	kubeSystem := func() (*corev1.Namespace, error) {
		return claimed["prod-eu"].kube.CoreV1().Namespaces().Get(context.Background(), metav1.NamespaceSystem, metav1.GetOptions{})
	}
	system, err := kubeSystem()
	if err != nil {
		t.Fatal(err)
	}
	// Registered before the requests are created: runs once both are deleted, leases and all.
	t.Cleanup(func() {
		if got, err := kubeSystem(); err != nil || got.UID != system.UID || got.DeletionTimestamp != nil {
			t.Errorf("both requests deleted, prod-eu's kube-system Namespace, which their leases observed, is gone or going (%v)", err)
		}
	})
	both := []*karpenter{
		newKarpenter(t, namespacedAPI, "team-c", "karpenter", "prod-eu"),
		newKarpenter(t, claimAPI, "team-a", "karpenter", "prod-eu"),
	}
	var holder, refused *karpenter
	settled := func() bool {
		holder, refused = nil, nil
		for _, c := range both {
			held, accepted := c.condition("ClusterHeld"), c.condition("Accepted")
			switch {
			case held["status"] == "True" && accepted["status"] == "True":
				holder = c
			case accepted["status"] == "False" && accepted["reason"] == "Refused":
				refused = c
			}
		}
		return holder != nil && refused != nil
	}
	if err := waitFor(t.Context(), react, "one of them holding prod-eu, the other Refused", func() (bool, error) { return settled(), nil }); err != nil {
		t.Fatalf("%v\n%s%s", err, both[0].describe(), both[1].describe())
	}
	t.Logf("%s holds prod-eu; %s is refused: %s", holder, refused, refused.condition("Accepted")["message"])
	refused.waitCondition("Accepted", "False", react, `cluster "prod-eu" is already claimed: one Karpenter per cluster`)
	checkLeaseOnly := func(when string) {
		resources, usages := refused.composed()
		if !equalSets(sortedKeys(resources), []string{lease}) || len(usages) != 0 {
			t.Errorf("%s: the refused %s must have composed its lease alone, has %v and Usages %v", when, refused, sortedKeys(resources), sortedKeys(usages))
		}
	}
	checkLeaseOnly("refused")

	walkToReady(t, holder)
	holder.settled()
	if !settled() {
		t.Errorf("once the holder is Ready, still want it holding and the other refused:\n%s%s", holder.describe(), refused.describe())
	}
	checkLeaseOnly("with the holder Ready")
	if ready := refused.condition("Ready"); ready == nil || ready["status"] != "False" {
		t.Errorf("the refused %s must be Ready=False, got %v", refused, ready)
	}
	before, _ := holder.composed()
	ids := awsIdentities(t, before)

	deletions := refused.deleteAndWait()
	for _, d := range deletions {
		if d.xr != refused.xr || d.name != lease {
			t.Errorf("deleting the refused %s deleted %s (%s)", refused, d.name, d.kind)
		}
	}
	assertUntouched(t, holder, before, deletions)
	if got, err := kubeSystem(); err != nil || got.UID != system.UID || got.DeletionTimestamp != nil {
		t.Errorf("deleting the refused %s's lease touched prod-eu's kube-system Namespace (%v)", refused, err)
	}
	installedByFlux(t, holder, claimed["prod-eu"])
	after, _ := holder.composed()
	if got := awsIdentities(t, after); !maps.Equal(got, ids) {
		t.Errorf("the holder's AWS identities changed when the refused %s was deleted:\nbefore %v\nafter  %v", refused, ids, got)
	}
	t.Logf("deleting the refused %s deleted %d object (its lease); %s is Ready with its %d AWS identities", refused, len(deletions), holder, len(ids))
}

// assertUntouched checks that a Ready request still has exactly the resources it had
// (checkSurvived, and none seen deleted among deletions), each still Ready, and is still Ready.
func assertUntouched(t *testing.T, c *karpenter, before map[string]*unstructured.Unstructured, deletions []deletion) {
	t.Helper()
	for _, d := range deletions {
		if d.xr == c.xr {
			t.Errorf("%s's %s (%s) was deleted", c, d.name, d.kind)
		}
	}
	after, _ := c.composed()
	checkSurvived(t, fmt.Sprintf("(a resource of %s)", c), before, after)
	for _, n := range sortedKeys(before) {
		if a, ok := after[n]; ok && conditionStatus(a, "Ready") != "True" {
			t.Errorf("%s's %s is no longer Ready:\n%s", c, n, conditionsText(a))
		}
	}
	if ready := c.condition("Ready"); ready == nil || ready["status"] != "True" {
		t.Errorf("%s must still be Ready, got %v", c, ready)
	}
}

// awsIdentities is every name or identifier a request's managed resources take in AWS, each mapped
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

// platformInput is the function input of the API's shipped Composition: the platform's
// configuration.
func platformInput(t *testing.T, a *api) map[string]any {
	t.Helper()
	input, err := shippedInput(a)
	if err != nil {
		t.Fatal(err)
	}
	return input
}

// shippedInput is platformInput, for callers without a test.
func shippedInput(a *api) (map[string]any, error) { return a.input("..") }

// requireTenancy fails the test unless the API's shipped Composition's tenancy declares every
// cluster of want, claimable from (at least) the namespaces listed.
func requireTenancy(t *testing.T, a *api, want map[string][]string) {
	t.Helper()
	clusters, _, _ := unstructured.NestedSlice(platformInput(t, a), "tenancy", "clusters")
	declared := map[string][]string{}
	for _, cl := range clusters {
		m := cl.(map[string]any)
		name, _ := m["name"].(string)
		ns, _, _ := unstructured.NestedStringSlice(m, "namespaces")
		declared[name] = ns
	}
	for _, cluster := range sortedKeys(want) {
		for _, ns := range want[cluster] {
			if !slices.Contains(declared[cluster], ns) {
				t.Fatalf("this scenario needs %s's tenancy to let %s claim %s; it declares %v", a.composition, ns, cluster, declared)
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

// aWave moves one cluster of the fleet, as a platform does cluster by cluster: the platform pins
// movedCluster alone (tenancy.clusters[].defaultVersion and .amiAlias) to version to and AMI
// toAMI. moved, which names neither, upgrades with the real Flux, controller first
// (movedByFlux), and its claimed cluster's EC2NodeClasses take toAMI. kept, on another cluster
// and naming neither either, renders the new input too (it moves to the new
// CompositionRevision) and keeps what it runs: no composed resource of it changes (the same
// generation), its claimed cluster's release stays at from with no new one, and its EC2NodeClasses
// keep fromAMI.
func aWave(t *testing.T, a *api, moved *karpenter, movedCluster *claimedCluster, kept *karpenter, keptCluster *claimedCluster, from, to, fromAMI, toAMI string) {
	t.Helper()
	ctx := t.Context()
	keptBefore, _ := kept.composed()
	ns, _, _ := unstructured.NestedString(platformInput(t, a), "podIdentity", "namespace")
	keptReleases := keptCluster.dyn.Resource(helmReleaseGVR).Namespace(ns)
	hr, err := keptReleases.Get(ctx, "karpenter", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	keptHistory, _, _ := unstructured.NestedSlice(hr.Object, "status", "history")

	movedByFlux(t, moved, movedCluster, from, to, func() error {
		changeInput(t, a, func(input map[string]any) {
			clusters, _, _ := unstructured.NestedSlice(input, "tenancy", "clusters")
			for _, c := range clusters {
				if m := c.(map[string]any); m["name"] == movedCluster.name {
					m["defaultVersion"], m["amiAlias"] = to, toAMI
				}
			}
			_ = unstructured.SetNestedSlice(input, clusters, "tenancy", "clusters")
		})
		return nil
	})
	installedByFlux(t, moved, movedCluster)

	// kept has rendered the new input once it is on moved's CompositionRevision.
	revision := func(c *karpenter) string {
		name, _, _ := unstructured.NestedString(c.getXR().Object, append(a.crossplaneField("compositionRevisionRef"), "name")...)
		return name
	}
	kept.wait(3*time.Minute, kept.String()+" on the CompositionRevision "+moved.String()+" moved with", func() (bool, error) {
		return revision(kept) != "" && revision(kept) == revision(moved), nil
	})
	// A reconcile's writes after the revision's: one poll of the providers' later.
	time.Sleep(30 * time.Second)
	keptAfter, _ := kept.composed()
	checkUnchanged(t, "by another cluster's wave", keptBefore, keptAfter)
	for _, n := range sortedKeys(keptBefore) {
		if a, ok := keptAfter[n]; ok && a.GetGeneration() != keptBefore[n].GetGeneration() {
			t.Errorf("%s's %s changed (generation %d, was %d) by another cluster's wave", kept, n, a.GetGeneration(), keptBefore[n].GetGeneration())
		}
	}
	for _, n := range []string{"controller-kustomization", "nodes-kustomization"} {
		if v := builtFor(keptAfter[n]); v != from {
			t.Errorf("%s's %s carries %q after another cluster's wave, want %s", kept, n, v, from)
		}
	}
	if hr, err := keptReleases.Get(ctx, "karpenter", metav1.GetOptions{}); err != nil {
		t.Error(err)
	} else if history, _, _ := unstructured.NestedSlice(hr.Object, "status", "history"); deployedChart(hr) != from || len(history) != len(keptHistory) {
		t.Errorf("%s's release after another cluster's wave: %q deployed, %d releases; want %s, %d releases", keptCluster.name, deployedChart(hr), len(history), from, len(keptHistory))
	}
	installedByFlux(t, kept, keptCluster)

	for cl, want := range map[*claimedCluster]string{movedCluster: toAMI, keptCluster: fromAMI} {
		classes, err := cl.dyn.Resource(ec2NodeClassGVR).List(ctx, metav1.ListOptions{})
		if err != nil || len(classes.Items) == 0 {
			t.Errorf("%s holds no EC2NodeClass (%v)", cl.name, err)
			continue
		}
		for _, nc := range classes.Items {
			terms, _, _ := unstructured.NestedSlice(nc.Object, "spec", "amiSelectorTerms")
			if alias := aliasOf(terms); alias != want {
				t.Errorf("%s's EC2NodeClass %s selects the AMI %q after the wave, want %s", cl.name, nc.GetName(), alias, want)
			}
		}
	}
	t.Logf("the wave moved %s to %s and %s, and left %s at %s and %s", movedCluster.name, to, toAMI, keptCluster.name, from, fromAMI)
}

// aliasOf is the alias of an EC2NodeClass's one amiSelectorTerms term, or "".
func aliasOf(terms []any) string {
	if len(terms) != 1 {
		return ""
	}
	m, _ := terms[0].(map[string]any)
	alias, _ := m["alias"].(string)
	return alias
}
