//go:build e2e

package e2e

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A fault kills one process of the control plane at once (SIGKILL: a crash, the OOM killer) and
// later starts it again as it was.
type fault struct {
	process string
	// reports: what the XR's Synced condition names while the process is down, when Crossplane
	// can say it (the function's calls fail); empty when the process is Crossplane itself.
	reports string
	// serving waits until the restarted process serves again.
	serving func(t *testing.T, p *proc) error
}

var faults = []fault{
	{process: "function", reports: "function", serving: func(t *testing.T, p *proc) error {
		return cp.functionListening(t.Context(), p)
	}},
	{process: "crossplane", serving: func(t *testing.T, p *proc) error {
		return waitHealthy(t.Context(), restartWait, "crossplane ready again", p, cp.crossplaneReadyz)
	}},
	// The hub's API server (etcd kept): every client of it reconnects.
	{process: "kube-apiserver", serving: func(t *testing.T, p *proc) error {
		return cp.apiserverReady(t.Context(), p, restartWait)
	}},
}

// TestFaults kills the function, then Crossplane core, then the hub's kube-apiserver (etcd kept),
// one after the other, at four points of a claim's life on a real claimed cluster (prod-eu,
// realClaimedClusters: the real provider-kubernetes and Flux; the fake plays provider-aws): in the
// middle of its walk (its first step composed, nothing of it Ready yet), once it is Ready, in the
// middle of its upgrade a minor up (midUpgrade) and in the middle of its uninstall, while the
// final check holds it (uninstallPastAnInstance). Each process comes back as it was. Each time
// the claim gets to where it was going (Ready, upgraded, gone), every composed resource that
// existed before the faults is the same object after them (same UID, same AWS identity: its
// external name), nothing is being deleted, and so is every object of the claim in the claimed
// cluster (installedUIDs). The function stays down mid-walk until the XR's Synced condition says
// it cannot be called. That took 1 s in one run (the call under way failed with the process) and
// 241 s in another; a call made while it is down waits two minutes: Crossplane v2.4.2 calls functions with waitForReady
// (internal/xfn/function_runner.go, svcConfig), so such a call waits for the function until the
// XR reconcile's own timeout (internal/controller/apiextensions/composite/reconciler.go, timeout,
// 2 minutes), and only then fails DeadlineExceeded. (The claim cannot say it: Crossplane
// copies to a claim only its own sync's Synced and the XR's custom condition types,
// internal/controller/apiextensions/claim/reconciler.go; the function, being down, sets none.)
// Crossplane and the API server stay down 10 seconds each. Mid-upgrade, the claimed cluster's
// parts go down too (claimedFaults.outages). It prints how long each outage lasted and how long
// after the process came back the XR was Synced again.
func TestFaults(t *testing.T) {
	timed(t)
	claimed, provider, _ := realClaimedClusters(t, claimedOptions{}, "prod-eu")
	eu := claimed["prod-eu"]
	from, to := upgradeVersions()
	c := newKarpenterFrom(t, claimAPI, "team-a", "karpenter", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, from, "spec", "version")
	})
	// Step one's first round: its policy waits for the observed EKS cluster, which no provider
	// reports Ready before the faults.
	before := c.waitComposed(throughRound(0, 0), converge)
	for _, f := range faults {
		f.outage(t, c, "mid-walk", f.reports)
	}
	c.walkToReady()
	c.settled()
	ready, _ := c.composed()
	checkUnchanged(t, "after the faults mid-walk", before, ready)

	installed := installedUIDs(t, c, eu)
	for _, f := range faults {
		f.outage(t, c, "Ready", "")
		c.waitCondition("Ready", "True", converge)
		after, _ := c.composed()
		checkUnchanged(t, "after the "+f.process+" came back with everything Ready", ready, after)
		checkInstalledSurvived(t, "after the "+f.process+" came back with everything Ready", installed, installedUIDs(t, c, eu))
	}

	midUpgrade(t, c, eu, from, to, (&claimedFaults{provider: provider, claimed: eu}).outages(t))

	c.waitUsagesBound()
	resources, usages := c.composed()
	var outages []claimedOutage
	for _, f := range faults {
		outages = append(outages, claimedOutage{f.process, func() time.Time {
			_, back := f.interrupt(t, nil)
			return back
		}})
	}
	seen := uninstallPastAnInstance(t, c, eu, outages)
	assertDeletedInOrder(t, c, append(sortedKeys(resources), sortedKeys(usages)...), usageEdges(resources, usages), seen)
	ns, _, _ := unstructured.NestedString(platformInput(t, c.api), "podIdentity", "namespace")
	eu.waitUninstalled(t, ns)
}

// midUpgrade upgrades the Ready claim from one Karpenter minor, from, to the next, to, while the
// claimed cluster refuses every change to the controller's HelmRelease (an admission policy):
// the function moves the controller's Kustomization to the new chart, and kustomize-controller
// cannot apply it (Ready=False, ReconciliationFailed: v1.9.3 internal/controller/
// kustomization_controller.go, an apply's error), so the upgrade stays where the first half of it
// leaves it, the node pools at from. There each fault's process goes down and comes back, then
// each of claimedOutages (the claimed cluster's parts, which TestRealProviderKubernetes stops at
// the other points). Back, the upgrade is where it was: the node pools still at from,
// VersionReady Upgrading. The refusal lifted, helm-controller upgrades the chart, the node pools
// follow, and the claim is Ready at to, every composed resource and every object in the claimed
// cluster the same object.
func midUpgrade(t *testing.T, c *karpenter, claimed *claimedCluster, from, to string, claimedOutages []claimedOutage) {
	t.Helper()
	before, _ := c.composed()
	installed := installedUIDs(t, c, claimed)
	ns, _, _ := unstructured.NestedString(platformInput(t, c.api), "podIdentity", "namespace")
	release, err := claimed.dyn.Resource(helmReleaseGVR).Namespace(ns).Get(t.Context(), "karpenter", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no HelmRelease %s/karpenter to upgrade: %v", ns, err)
	}
	lift := claimed.denyUpdates(t, helmReleaseGVR.Group, helmReleaseGVR.Resource, "e2e: an admission policy holds the HelmRelease karpenter", release)
	if err := c.setVersion(to); err != nil {
		t.Fatalf("cannot upgrade the claim: %v", err)
	}
	c.waitBuiltFor("controller-kustomization", to, converge)
	kustomizationReported(t, c, claimed, "ReconciliationFailed")
	held := func(what string) {
		t.Helper()
		c.waitCondition("VersionReady", "False", converge, from+" → "+to)
		during, _ := c.composed()
		if v := builtFor(during["nodes-kustomization"]); v != from {
			t.Errorf("after %s came back mid-upgrade, the node pools moved to %q before the controller was Ready at %s", what, v, to)
		}
	}
	for _, f := range faults {
		f.outage(t, c, "mid-upgrade", f.reports)
		held("the " + f.process)
	}
	for _, o := range claimedOutages {
		back := o.outage()
		fmt.Printf("e2e: %-40s %s killed mid-upgrade, back %s\n", t.Name(), o.what, back.Format(time.TimeOnly))
		held(o.what)
	}
	lift()
	lifted := time.Now()
	c.waitBuiltFor("nodes-kustomization", to, 8*time.Minute)
	c.waitCondition("VersionReady", "True", converge, "Karpenter "+to)
	c.waitCondition("Ready", "True", converge)
	fmt.Printf("e2e: %-40s upgraded to %s and Ready %.0fs after the HelmRelease's refusal was lifted\n", t.Name(), to, time.Since(lifted).Seconds())
	after, _ := c.composed()
	checkUnchanged(t, "after the faults mid-upgrade", before, after)
	checkInstalledSurvived(t, "after the faults mid-upgrade", installed, installedUIDs(t, c, claimed))
}

// outage kills the fault's process, keeps it down until the XR's Synced condition is False and
// names reported (or, with nothing to report, 10 seconds), starts it again, and waits until the
// XR is Synced again.
func (f fault) outage(t *testing.T, c *karpenter, when, reported string) {
	t.Helper()
	var hold func()
	if reported != "" {
		hold = func() {
			// The call under way waits for the function until the reconcile's 2-minute timeout.
			c.wait(5*time.Minute, fmt.Sprintf("the XR Synced=False naming the %s while it is down", reported), func() (bool, error) {
				cond := condition(c.getXR(), "Synced")
				msg, _ := cond["message"].(string)
				return cond["status"] == "False" && strings.Contains(strings.ToLower(msg), reported), nil
			})
		}
	}
	down, back := f.interrupt(t, hold)
	c.wait(converge, "the XR Synced again", func() (bool, error) {
		return conditionStatus(c.getXR(), "Synced") == "True", nil
	})
	fmt.Printf("e2e: %-40s %s killed %s: down %.0fs, the XR Synced again %.0fs after it came back\n",
		t.Name(), f.process, when, back.Sub(down).Seconds(), time.Since(back).Seconds())
}

// interrupt kills the fault's process, keeps it down while hold runs (nil: 10 seconds), starts
// it again and returns when it serves: when it went down and when it came back.
func (f fault) interrupt(t *testing.T, hold func()) (down, back time.Time) {
	t.Helper()
	p := cp.process(t, f.process)
	p.kill()
	down = time.Now()
	restarted := false
	// A hold that fails the test must not leave the process down for every later test.
	defer func() {
		if !restarted {
			_ = p.restart()
		}
	}()
	if hold != nil {
		hold()
	} else {
		time.Sleep(10 * time.Second)
	}
	restarted = true
	if err := p.restart(); err != nil {
		t.Fatal(err)
	}
	if err := f.serving(t, p); err != nil {
		t.Fatal(err)
	}
	return down, time.Now()
}

// checkUnchanged is checkSurvived, and each object keeps its external name (its AWS identity,
// for a provider-aws resource).
func checkUnchanged(t *testing.T, when string, before, after map[string]*unstructured.Unstructured) {
	t.Helper()
	checkSurvived(t, when, before, after)
	for _, n := range sortedKeys(before) {
		if a, ok := after[n]; ok && externalName(a) != externalName(before[n]) {
			t.Errorf("%s changed its external name %s: %q, was %q", n, when, externalName(a), externalName(before[n]))
		}
	}
}

func externalName(u *unstructured.Unstructured) string {
	return u.GetAnnotations()["crossplane.io/external-name"]
}

// restartWait is how long a process the test started again may take to serve: on two shared
// cores a restarted kube-apiserver took more than 90 s (cold, 2026-12-04), and one exited on its
// own after two minutes, starved, to be started again by the kubelet's part (proc.asKubelet).
const restartWait = 5 * time.Minute

// claimedFaults are the faults that need the real provider-kubernetes and a real claimed
// cluster, injected into one request's walk in TestRealProviderKubernetes (the other request,
// on the other claimed cluster, shares the provider and walks through them):
//   - the claimed cluster's kube-apiserver (its etcd kept) killed mid step 1, once the lease (an
//     observe-only Object of the claimed cluster) is composed, and started again a minute later,
//     before step 1's AWS resources are reported Ready;
//   - the claimed cluster's kube-apiserver killed just before step 3 is
//     composed, and started again a minute later: step 3's Objects cannot be applied, and the
//     claim's AccessCheckReady says so, naming the Object and the provider's error;
//   - provider-kubernetes killed as step 4 is composed, started again 10 seconds later;
//   - helm-controller killed while Helm installs Karpenter's chart (its release pending-install
//     in Helm's storage), started again 10 seconds later (killHelmOnInstall, restartHelm);
//   - with the request Ready, provider-kubernetes, the claimed cluster's API server and Flux's
//     three controllers, one after the other (outages);
//   - mid-uninstall, while the final check holds it (EC2 still lists an instance), the same.
//
// provider-kubernetes re-reads an Object that is Ready every 10 minutes (v1.3.1
// cmd/provider/main.go, --poll, default 10m): a Ready request does not notice a claimed cluster
// gone for a minute, and the test asserts only that nothing changed. Each time, every composed
// resource and every object the provider applied in the claimed cluster is the same object
// after the fault (same UID), and the request gets to where it was going.
type claimedFaults struct {
	provider *proc
	claimed  *claimedCluster
	down     time.Time // when the claimed cluster's API server was killed mid-walk
	// killedHelm says when helm-controller was killed mid-install (killHelmOnInstall).
	killedHelm <-chan helmKilled
}

// claimedDown is how long the claimed cluster's API server stays unreachable.
const claimedDown = time.Minute

// beforeReady runs at step i of the walk, once the step is composed and before the fake
// provider reports its AWS resources Ready (which lets the function compose the next step). It
// returns when the part it stopped, if any, came back.
func (f *claimedFaults) beforeReady(t *testing.T, c *karpenter, i int) (back time.Time) {
	if f == nil {
		return time.Time{}
	}
	switch steps[i].condition {
	case "IdentityAndQueueReady": // the claimed cluster down since the lease was composed
		// Step 1 is all in AWS: the request keeps the cluster it holds, and waits only on
		// step 1's resources, not on its lease, which the provider cannot observe meanwhile.
		time.Sleep(time.Until(f.down.Add(claimedDown)))
		held, step := c.condition("ClusterHeld"), c.condition(steps[i].condition)
		if held["status"] != "True" || strings.Contains(fmt.Sprint(step["message"]), lease) {
			t.Errorf("the claimed cluster's API server down mid step 1: ClusterHeld %v (%v), %s %v (%v); want the cluster held and step 1 waiting on its own resources only",
				held["status"], held["message"], steps[i].condition, step["status"], step["message"])
		}
		t.Logf("the claimed cluster's API server down mid step 1: ClusterHeld=%v, %s=%v: %v", held["status"], steps[i].condition, step["status"], step["message"])
		return f.restartClaimed(t)
	case "InterruptionWiringReady": // step 3, the first in the claimed cluster, comes next
		f.killClaimed(t)
	case "ControllerReady":
		return f.restartHelm(t, f.killedHelm)
	}
	return time.Time{}
}

// helmKilled reports when killHelmOnInstall killed helm-controller, or why it did not.
type helmKilled struct {
	at  time.Time
	err error
}

// killHelmOnInstall watches Helm's storage in the claimed cluster from before the controller's
// step is composed and kills helm-controller (SIGKILL) on the first event of the release
// karpenter pending-install, which an install writes first and turns deployed or failed when it
// ends (helm.sh/helm/v4 v4.2.2, helm-controller's, pkg/action/install.go; the labels of
// pkg/storage/driver/secrets.go). A watch, not a poll: an install on kwok's nodes can be over in
// a second or two. restartHelm starts it again.
func (f *claimedFaults) killHelmOnInstall(t *testing.T) <-chan helmKilled {
	t.Helper()
	ctx := t.Context()
	helm := f.claimed.process(t, "helm-controller")
	out := make(chan helmKilled, 1)
	w, err := f.claimed.kube.CoreV1().Secrets("").Watch(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=karpenter"})
	if err != nil {
		out <- helmKilled{err: err}
		return out
	}
	go func() {
		defer w.Stop()
		for e := range w.ResultChan() {
			s, ok := e.Object.(*corev1.Secret)
			if !ok {
				continue
			}
			switch s.Labels["status"] {
			case "pending-install":
				helm.kill()
				out <- helmKilled{at: time.Now()}
				return
			case "deployed", "failed":
				out <- helmKilled{err: fmt.Errorf("the watch saw release karpenter %s, never pending-install", s.Labels["status"])}
				return
			}
		}
		out <- helmKilled{err: fmt.Errorf("the watch of Helm's storage ended before the install")}
	}()
	return out
}

// restartHelm waits for killHelmOnInstall to kill helm-controller, and starts it again 10
// seconds after. helm-controller finds the release locked and recovers (helmRecovered): the step
// must still get to Ready.
func (f *claimedFaults) restartHelm(t *testing.T, killed <-chan helmKilled) time.Time {
	t.Helper()
	var k helmKilled
	select {
	case k = <-killed:
	case <-time.After(3 * time.Minute):
		k.err = fmt.Errorf("no install of release karpenter within 3 minutes")
	}
	if k.err != nil {
		t.Errorf("helm-controller was not killed mid-install: %v", k.err)
		return time.Time{}
	}
	time.Sleep(time.Until(k.at.Add(10 * time.Second)))
	back := f.restartFlux(t, 0, "helm-controller")
	fmt.Printf("e2e: %-40s helm-controller killed mid-install at %s, back %.0fs later\n", t.Name(), k.at.Format(time.TimeOnly), back.Sub(k.at).Seconds())
	return back
}

// beforeComposed runs at step i of the walk, before the test waits for all of it to be composed.
func (f *claimedFaults) beforeComposed(t *testing.T, c *karpenter, i int) (back time.Time) {
	if f == nil {
		return time.Time{}
	}
	switch steps[i].condition {
	case "IdentityAndQueueReady":
		// Mid step 1: the lease, an observe-only Object of the claimed cluster, is composed;
		// step 1, all in AWS, is being composed. The cluster comes back in beforeReady, or, if
		// the test fails first, before its cleanup needs it.
		c.waitComposed([]string{lease}, converge)
		f.killClaimed(t)
	case "AccessCheckReady":
		// The namespace, step 3's first round, cannot be applied: the next round waits for it.
		cond := c.waitCondition(steps[i].condition, "False", 2*time.Minute, "controller-namespace", "Synced=False")
		t.Logf("the claimed cluster's API server down: %s=False: %s", steps[i].condition, cond["message"])
		time.Sleep(time.Until(f.down.Add(claimedDown)))
		return f.restartClaimed(t)
	case "ControllerReady":
		f.killedHelm = f.killHelmOnInstall(t)
		return f.restartProvider(t, 10*time.Second)
	}
	return time.Time{}
}

// atReady kills, with the request Ready, provider-kubernetes, then the claimed cluster's API
// server, and checks that the request stays Ready with nothing re-created, here or there.
func (f *claimedFaults) atReady(t *testing.T, c *karpenter) {
	if f == nil {
		return
	}
	f.helmRecovered(t)
	before, _ := c.composed()
	remote := f.remoteUIDs(t, before)
	for _, fault := range f.outages(t) {
		back := fault.outage()
		c.wait(converge, "the XR Synced and Ready again", func() (bool, error) {
			xr := c.getXR()
			return conditionStatus(xr, "Synced") == "True" && conditionStatus(xr, "Ready") == "True", nil
		})
		fmt.Printf("e2e: %-40s %s killed with everything Ready: Synced and Ready %.0fs after it came back\n",
			t.Name(), fault.what, time.Since(back).Seconds())
		after, _ := c.composed()
		checkUnchanged(t, "after "+fault.what+" came back with everything Ready", before, after)
		if now := f.remoteUIDs(t, after); !maps.Equal(now, remote) {
			t.Errorf("after %s came back, the claimed cluster's objects are not the same: %v, were %v", fault.what, now, remote)
		}
	}
}

// A claimedOutage is one of the parts atReady, midUpgrade and uninstallPastAnInstance stop:
// outage stops it, starts it again and returns when it is back.
type claimedOutage struct {
	what   string
	outage func() time.Time
}

// outages are provider-kubernetes down 10 seconds, the claimed cluster's API server down for
// claimedDown, then Flux's three controllers down 10 seconds.
func (f *claimedFaults) outages(t *testing.T) []claimedOutage {
	return []claimedOutage{
		{"provider-kubernetes", func() time.Time { return f.restartProvider(t, 10*time.Second) }},
		{"the claimed cluster's kube-apiserver", func() time.Time {
			f.claimed.process(t, "kube-apiserver").kill()
			time.Sleep(claimedDown)
			return f.restartClaimed(t)
		}},
		{"Flux's controllers", func() time.Time { return f.restartFlux(t, 10*time.Second, fluxControllers...) }},
	}
}

// restartProvider kills provider-kubernetes, keeps it down for down and starts it again; it
// returns when it is healthy.
func (f *claimedFaults) restartProvider(t *testing.T, down time.Duration) time.Time {
	t.Helper()
	f.provider.kill()
	time.Sleep(down)
	if err := f.provider.restart(); err != nil {
		t.Fatal(err)
	}
	if err := providerHealthy(t.Context(), f.provider); err != nil {
		t.Fatal(err)
	}
	return time.Now()
}

// helmRecovered checks what helm-controller v1.6.2 made of the install killHelmOnInstall cut:
// it unlocked the release (revision 1, pending-install, marked failed), found it not in the
// HelmRelease's history (the controller died before recording it: "release not managed by
// controller") and upgraded over it (atomic_release.go, ReleaseStatusUnmanaged), which marks the
// failed revision superseded (helm.sh/helm/v4 v4.2.2 pkg/action/upgrade.go): Helm's storage
// holds revision 1 superseded and revision 2 deployed, and nothing was uninstalled.
func (f *claimedFaults) helmRecovered(t *testing.T) {
	t.Helper()
	l, err := f.claimed.kube.CoreV1().Secrets("").List(t.Context(), metav1.ListOptions{LabelSelector: "owner=helm,name=karpenter"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range l.Items {
		got[s.Labels["version"]] = s.Labels["status"]
	}
	if want := map[string]string{"1": "superseded", "2": "deployed"}; !maps.Equal(got, want) {
		t.Errorf("after helm-controller was killed mid-install, Helm's storage holds revisions %v, want %v", got, want)
	}
}

// restartFlux kills the claimed cluster's Flux controllers named, keeps them down for down and
// starts them again; it returns when each answers its health check (--health-addr).
func (f *claimedFaults) restartFlux(t *testing.T, down time.Duration, names ...string) time.Time {
	t.Helper()
	var procs []*proc
	for _, n := range names {
		p := f.claimed.process(t, n)
		p.kill()
		procs = append(procs, p)
	}
	time.Sleep(down)
	for _, p := range procs {
		if err := p.restart(); err != nil {
			t.Fatal(err)
		}
		addr := ""
		for _, a := range p.args {
			if v, ok := strings.CutPrefix(a, "--health-addr="); ok {
				addr = v
			}
		}
		if err := waitHealthy(t.Context(), restartWait, p.name+" healthy again", p, "http://"+addr+"/healthz"); err != nil {
			t.Fatal(err)
		}
	}
	return time.Now()
}

// killClaimed kills the claimed cluster's API server mid-walk (its etcd kept) and notes when;
// restartClaimed starts it again. Should the test fail first, it is started again before the
// test's cleanup, which needs it.
func (f *claimedFaults) killClaimed(t *testing.T) {
	p := f.claimed.process(t, "kube-apiserver")
	p.kill()
	f.down = time.Now()
	t.Cleanup(func() {
		if done, _ := p.exited(); done {
			_ = p.restart()
		}
	})
}

// restartClaimed starts the claimed cluster's API server again; it returns when it is ready.
func (f *claimedFaults) restartClaimed(t *testing.T) time.Time {
	t.Helper()
	p := f.claimed.process(t, "kube-apiserver")
	if err := p.restart(); err != nil {
		t.Fatal(err)
	}
	if err := f.claimed.apiserverReady(t.Context(), p, restartWait); err != nil {
		t.Fatal(err)
	}
	return time.Now()
}

// remoteUIDs are the UIDs of the objects the request's applied Objects hold in the claimed
// cluster, by Object name.
func (f *claimedFaults) remoteUIDs(t *testing.T, resources map[string]*unstructured.Unstructured) map[string]string {
	t.Helper()
	uids := map[string]string{}
	for _, n := range appliedObjects(resources) {
		r, err := f.claimed.remote(t.Context(), resources[n])
		if err != nil || r == nil {
			t.Errorf("%s: the claimed cluster %s holds no object (%v)", n, f.claimed.name, err)
			continue
		}
		uids[n] = string(r.GetUID())
	}
	return uids
}
