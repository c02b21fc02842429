//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// deletionGuardKey is the confirmation the suite's platform chooses (input deletionGuard).
const deletionGuardKey = "socle.do-now.io/delete-with-nodes"

// guardedDeletion deletes c, a Ready request whose claimed cluster's pools report nodes, once the
// platform guards deletions (internal/guard): the function composes a Usage of the XR itself,
// and Crossplane's webhook refuses the deletion with the Usage's reason, which says what it
// protects and how to confirm. A namespaced XR's deletion is refused to the tenant; a claim's is
// accepted, and the claim says why its XR is not deleted. Nothing composed goes, nor does the
// XR. The tenant confirms, annotating what it created with the cluster's name, and the request
// goes, the Usage's replayed deletion deleting the XR.
func guardedDeletion(t *testing.T, c *karpenter, cluster string) {
	t.Helper()
	changeInput(t, c.api, func(input map[string]any) {
		_ = unstructured.SetNestedField(input, deletionGuardKey, "deletionGuard", "annotation")
	})
	var reason string
	c.wait(converge, "the deletion guard composed and the XR in use", func() (bool, error) {
		resources, _ := c.composed()
		g := resources["deletion-guard"]
		if g == nil {
			return false, nil
		}
		reason, _, _ = unstructured.NestedString(g.Object, "spec", "reason")
		// Crossplane's Usage controller labels what a Usage protects; its webhook selects that
		// label (crossplane v2.4.2 cluster/webhookconfigurations/usage.yaml, objectSelector).
		return c.getXR().GetLabels()["crossplane.io/in-use"] == "true", nil
	})
	if !strings.Contains(reason, "cluster "+cluster) || !strings.Contains(reason, deletionGuardKey+"="+cluster) {
		t.Errorf("the guard's reason %q names neither the cluster %s nor the confirmation", reason, cluster)
	}
	before, _ := c.composed()

	start, mark := time.Now(), fake.deletionMark()
	err := c.tryDelete()
	if c.api.namespaced {
		if err == nil || !strings.Contains(err.Error(), reason) {
			t.Fatalf("deleting the guarded %s: want the webhook's refusal with the guard's reason, got %v", c, err)
		}
		t.Logf("the deletion was refused: %v", err)
	} else {
		if err != nil {
			t.Fatalf("cannot delete %s: %v", c, err)
		}
		c.wait(converge, "the claim to say why its XR is not deleted", func() (bool, error) {
			synced := condition(c.get(), "Synced")
			msg, _ := synced["message"].(string)
			return synced["status"] == "False" && strings.Contains(msg, reason), nil
		})
		t.Logf("the claim says: %s", condition(c.get(), "Synced")["message"])
	}
	// A few polls of the providers and reconciles of the XR: nothing goes.
	time.Sleep(30 * time.Second)
	after, _ := c.composed()
	checkUnchanged(t, "by a guarded deletion", before, after)
	if xr := c.getXR(); xr.GetName() == "" || xr.GetDeletionTimestamp() != nil {
		t.Errorf("the guarded XR %s is gone or being deleted", c.xr.name)
	}

	if err := c.setField(cluster, "metadata", "annotations", deletionGuardKey); err != nil {
		t.Fatalf("cannot confirm the deletion of %s: %v", c, err)
	}
	deletions := c.waitGone(start, mark)
	t.Logf("confirmed, %s went in %.0fs, %d deletions seen", c, time.Since(start).Seconds(), len(deletions))
}
