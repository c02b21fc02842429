//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

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
		return waitHealthy(t.Context(), time.Minute, "crossplane ready again", p, cp.crossplaneReadyz)
	}},
	// The hub's API server (etcd kept): every client of it reconnects.
	{process: "kube-apiserver", serving: func(t *testing.T, p *proc) error {
		return waitFor(t.Context(), 90*time.Second, "kube-apiserver ready again", func() (bool, error) {
			if done, err := p.exited(); done {
				return false, fmt.Errorf("kube-apiserver exited: %v", err)
			}
			body, err := cp.kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(t.Context())
			return err == nil && string(body) == "ok", nil
		})
	}},
}

// TestFaults kills the function, then Crossplane core, then the hub's kube-apiserver (etcd kept),
// in the middle of a claim's walk (its first step composed, nothing of it Ready yet) and again
// once the claim is Ready, and starts it again. Each time the claim gets to Ready, every composed
// resource that existed before the fault is the same object after it (same UID, same AWS
// identity: its external name), and nothing is being deleted. The function stays down mid-walk
// until the XR's Synced condition says it cannot be called. That takes two minutes: Crossplane
// v2.4.2 calls functions with waitForReady (internal/xfn/function_runner.go, svcConfig), so a
// call waits for the function until the XR reconcile's own timeout
// (internal/controller/apiextensions/composite/reconciler.go, timeout, 2 minutes), and only then
// fails DeadlineExceeded. (The claim cannot say it: Crossplane copies to a claim only its own
// sync's Synced and the XR's custom condition types,
// internal/controller/apiextensions/claim/reconciler.go; the function, being down, sets none.)
// Crossplane and the API server stay down 10 seconds each. It prints how long each outage
// lasted and how long after the process came back the XR was Synced again.
func TestFaults(t *testing.T) {
	timed(t)
	for _, f := range faults {
		t.Run(f.process, func(t *testing.T) {
			c := newKarpenter(t, claimAPI, "team-a", "karpenter", "prod-eu")
			before := c.waitComposed(throughStep(0), converge)
			f.outage(t, c, "mid-walk", f.reports)
			c.walkToReady()
			ready, _ := c.composed()
			checkUnchanged(t, "after the "+f.process+" came back mid-walk", before, ready)

			f.outage(t, c, "Ready", "")
			c.waitCondition("Ready", "True", converge)
			after, _ := c.composed()
			checkUnchanged(t, "after the "+f.process+" came back with everything Ready", ready, after)
			c.deleteAndWait()
		})
	}
}

// outage kills the fault's process, keeps it down until the XR's Synced condition is False and
// names reported (or, with nothing to report, 10 seconds), starts it again, and waits until the
// XR is Synced again.
func (f fault) outage(t *testing.T, c *karpenter, when, reported string) {
	t.Helper()
	p := cp.process(t, f.process)
	p.kill()
	down := time.Now()
	if reported != "" {
		// The call under way waits for the function until the reconcile's 2-minute timeout.
		c.wait(3*time.Minute, fmt.Sprintf("the XR Synced=False naming the %s while it is down", reported), func() (bool, error) {
			cond := condition(c.getXR(), "Synced")
			msg, _ := cond["message"].(string)
			return cond["status"] == "False" && strings.Contains(strings.ToLower(msg), reported), nil
		})
	} else {
		time.Sleep(10 * time.Second)
	}
	if err := p.restart(); err != nil {
		t.Fatal(err)
	}
	if err := f.serving(t, p); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	c.wait(converge, "the XR Synced again", func() (bool, error) {
		return conditionStatus(c.getXR(), "Synced") == "True", nil
	})
	fmt.Printf("e2e: %-40s %s killed %s: down %.0fs, the XR Synced again %.0fs after it came back\n",
		t.Name(), f.process, when, back.Sub(down).Seconds(), time.Since(back).Seconds())
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
