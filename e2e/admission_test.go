//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// TestTenantAdmission installs the tenant admission policy (admission/) on the real API server and sends, as a
// tenant of team-a (impersonated, with RBAC on its namespace alone), the requests that would let a
// tenant escape the platform's policy: binding an XR it did not create, choosing a Composition or a
// revision, Manual updates. Each is refused by the API server, naming what was refused; the
// tenant's plain request is admitted; and Crossplane's own identity (here the admin, as the
// control plane runs it) may write the fields it owns. Every request is a dry run.
func TestTenantAdmission(t *testing.T) {
	timed(t)
	objs, err := readObjects(filepath.Join("..", "admission", "tenant-requests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := cp.apply(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	asTenant := tenantClient(t, "team-a")
	for _, a := range apis {
		t.Run(a.name, func(t *testing.T) {
			base, err := readObjects(filepath.Join("..", a.example))
			if err != nil {
				t.Fatal(err)
			}
			// Where Crossplane's fields are in what the tenant writes.
			at := a.crossplaneField
			create := func(as dynamic.Interface, mutate func(*unstructured.Unstructured)) error {
				u := base[0].DeepCopy()
				u.SetNamespace("team-a")
				u.SetName("admission")
				mutate(u)
				_, err := as.Resource(a.tenant).Namespace("team-a").Create(t.Context(), u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				return err
			}
			set := func(v any, f string) func(*unstructured.Unstructured) {
				return func(u *unstructured.Unstructured) { _ = unstructured.SetNestedField(u.Object, v, at(f)...) }
			}
			ref := map[string]any{"name": "karpenter.platform.socle.do-now.io-0a1b2c3"}
			selector := map[string]any{"matchLabels": map[string]any{"release": "2025"}}
			cases := []struct {
				reason string
				mutate func(*unstructured.Unstructured)
				want   string
			}{
				{"a pinned revision", set(ref, "compositionRevisionRef"), "compositionRevisionRef may not be set or changed"},
				{"a revision selector", set(selector, "compositionRevisionSelector"), "compositionRevisionSelector may not be set or changed"},
				{"a Composition of the tenant's choosing", set(map[string]any{"name": "lax"}, "compositionRef"), "compositionRef may not be set or changed"},
				{"a Composition selector", set(selector, "compositionSelector"), "compositionSelector may not be set or changed"},
				{"Manual updates", set("Manual", "compositionUpdatePolicy"), "compositionUpdatePolicy must be Automatic"},
			}
			if !a.namespaced {
				cases = append(cases, struct {
					reason string
					mutate func(*unstructured.Unstructured)
					want   string
				}{"binding an XR the claim did not create", func(u *unstructured.Unstructured) {
					_ = unstructured.SetNestedField(u.Object, map[string]any{"apiVersion": "platform.socle.do-now.io/v1alpha1", "kind": "XKarpenter", "name": "platform-prod-eu"}, "spec", "resourceRef")
				}, "resourceRef may not be set or changed"})
			}
			// The API server takes a moment to load a new policy, and its authorizer a moment to see
			// the new RoleBinding (until then the tenant is Forbidden by RBAC, not by the policy):
			// wait until the first case is refused by the policy itself, naming what it refuses.
			deadline := time.Now().Add(30 * time.Second)
			for err := create(asTenant, cases[0].mutate); !refusedBy(err, cases[0].want); err = create(asTenant, cases[0].mutate) {
				if time.Now().After(deadline) {
					t.Fatalf("the policy never refused %s: %v", cases[0].reason, err)
				}
				time.Sleep(500 * time.Millisecond)
			}
			for _, tc := range cases {
				err := create(asTenant, tc.mutate)
				if !refusedBy(err, tc.want) {
					t.Errorf("the tenant's %s %s: want it refused saying %q, got %v", a.kind, tc.reason, tc.want, err)
				}
			}
			if err := create(asTenant, func(*unstructured.Unstructured) {}); err != nil {
				t.Errorf("the tenant's plain %s is refused: %v", a.kind, err)
			}
			if err := create(asTenant, set("Automatic", "compositionUpdatePolicy")); err != nil {
				t.Errorf("the tenant's %s with Automatic updates is refused: %v", a.kind, err)
			}
			// Crossplane writes the fields it owns, as the control plane's admin here.
			if err := create(cp.dyn, set(ref, "compositionRevisionRef")); err != nil {
				t.Errorf("Crossplane's identity may not write %s: %v", strings.Join(at("compositionRevisionRef"), "."), err)
			}
			t.Log(fmt.Sprintf("%d escapes refused at admission", len(cases)))
		})
	}
}

// tenant is the user tenantClient acts as.
const tenant = "tenant:team-a"

// tenantClient is a client acting as a tenant of ns (impersonated), with RBAC on ns's
// Karpenter requests alone: what a tenant may do.
func tenantClient(t *testing.T, ns string) dynamic.Interface {
	t.Helper()
	if err := cp.ensureNamespace(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	role := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
		"metadata": map[string]any{"name": "karpenter-tenant", "namespace": ns},
		"rules": []any{map[string]any{
			"apiGroups": []any{"platform.socle.do-now.io", "platform.m.socle.do-now.io"},
			"resources": []any{"karpenters"}, "verbs": []any{"get", "create", "update"},
		}},
	}}
	binding := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
		"metadata": map[string]any{"name": "karpenter-tenant", "namespace": ns},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "karpenter-tenant"},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": tenant}},
	}}
	for _, o := range []*unstructured.Unstructured{role, binding} {
		if err := cp.apply(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(cp.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: tenant, Groups: []string{"system:authenticated"}}
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClaimBindsOnlyItsOwnXR: the platform's own XKarpenter (no claim) exists; team-a's tenant
// creates a claim whose spec.resourceRef names it. Without the admission policy, Crossplane
// binds the claim to it (its claim reconciler binds an XR with no claimRef, writing the claim's
// spec and claimRef on it) and the function refuses the XR, composing nothing, the refusal
// naming only the tenant's claim. With the policy (admission/), the API server refuses the
// claim. Deleting the bound claim deletes the platform's XR: only the policy prevents that.
func TestClaimBindsOnlyItsOwnXR(t *testing.T) {
	timed(t)
	ctx := t.Context()
	xrs := cp.dyn.Resource(claimAPI.xr)
	platform := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "platform.socle.do-now.io/v1alpha1", "kind": "XKarpenter",
		"metadata": map[string]any{"name": "platform-unclaimed"},
		// A cluster the tenancy does not declare: the platform's XR composes nothing of its own.
		"spec": map[string]any{"cluster": map[string]any{"name": "unclaimed"}},
	}}
	if _, err := xrs.Create(ctx, platform, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = xrs.Delete(ctx, "platform-unclaimed", metav1.DeleteOptions{})
		_ = waitFor(ctx, time.Minute, "the platform's XR gone", func() (bool, error) {
			_, err := xrs.Get(ctx, "platform-unclaimed", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	})
	policy, err := readObjects(filepath.Join("..", "admission", "tenant-requests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bindings := cp.dyn.Resource(schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"})
	// Without the policy: a test before may have installed it.
	for _, o := range policy {
		if o.GetKind() == "ValidatingAdmissionPolicyBinding" {
			if err := bindings.Delete(ctx, o.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
	}
	asTenant := tenantClient(t, "team-a")
	objs, err := readObjects(filepath.Join("..", claimAPI.example))
	if err != nil {
		t.Fatal(err)
	}
	claim := objs[0]
	claim.SetNamespace("team-a")
	claim.SetName("binder")
	_ = unstructured.SetNestedField(claim.Object, map[string]any{"apiVersion": "platform.socle.do-now.io/v1alpha1", "kind": "XKarpenter", "name": "platform-unclaimed"}, "spec", "resourceRef")
	// The XR's cluster: the XRD keeps spec.cluster.name immutable, so Crossplane could not write
	// another one onto the XR it binds.
	_ = unstructured.SetNestedField(claim.Object, "unclaimed", "spec", "cluster", "name")
	// The API server takes a moment to drop the binding and to see the tenant's RoleBinding.
	if err := waitFor(ctx, 30*time.Second, "the tenant's claim admitted", func() (bool, error) {
		_, err := asTenant.Resource(claimAPI.tenant).Namespace("team-a").Create(ctx, claim, metav1.CreateOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	// Its context outlives the test's, which its cleanup's deletion needs.
	c := &karpenter{t: t, ctx: context.Background(), api: claimAPI, ns: "team-a", name: "binder", xr: xrRef{name: "platform-unclaimed"}}
	t.Cleanup(func() {
		if c.exists() {
			c.deleteAndWait()
		}
	})
	c.wait(react, "Crossplane binding the claim to the platform's XR", func() (bool, error) {
		ref, _, _ := unstructured.NestedString(c.getXR().Object, "spec", "claimRef", "name")
		return ref == "binder", nil
	})
	c.assertRefused("a claim bound to the platform's own XR", "Refused",
		`spec.claimRef: Forbidden: this XR was not created for claim team-a/binder`)

	// With the policy, the same request is refused at admission.
	for _, o := range policy {
		if err := cp.apply(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	claim.SetName("binder-2")
	want := "resourceRef may not be set or changed"
	if err := waitFor(ctx, 30*time.Second, "the policy refusing the binding", func() (bool, error) {
		_, err := asTenant.Resource(claimAPI.tenant).Namespace("team-a").Create(ctx, claim, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return refusedBy(err, want), nil
	}); err != nil {
		t.Fatal(err)
	}
}

// refusedBy is whether err is the API server refusing a request with a message that says want.
func refusedBy(err error, want string) bool {
	return (apierrors.IsInvalid(err) || apierrors.IsForbidden(err)) && strings.Contains(err.Error(), want)
}

// TestCollidingClusterNames: a platform whose tenancy declares Prod_EU beside prod-eu, for
// another tenant, would have both claims' labels, locks and provider-kubernetes config be
// prod-eu, and IAM names are case-insensitive: team-b's Karpenter would go into team-a's cluster.
// With the claim API's Composition so changed (and restored after), a claim for Prod_EU is
// refused as Invalid, the message naming both entries, and composes nothing.
func TestCollidingClusterNames(t *testing.T) {
	timed(t)
	_, comp, err := claimAPI.read("..")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.apply(context.Background(), comp); err != nil {
			t.Errorf("cannot restore %s: %v", claimAPI.composition, err)
		}
		// Crossplane makes the restored spec's revision the latest again: the tests after this
		// one must not start on the changed input.
		latestRevisionHas(t, comp.GetName(), `"Prod_EU"`, false)
	})
	changed := comp.DeepCopy()
	pipeline, _, _ := unstructured.NestedSlice(changed.Object, "spec", "pipeline")
	step := pipeline[0].(map[string]any)
	clusters, _, _ := unstructured.NestedSlice(step, "input", "tenancy", "clusters")
	clusters = append(clusters, map[string]any{
		"name": "Prod_EU", "account": "444455556666", "region": "eu-west-3", "namespaces": []any{"team-b"},
		"nodeIdentity": map[string]any{"roleArn": "arn:aws:iam::444455556666:role/prod-eu-nodes", "instanceProfile": "prod-eu-nodes"},
	})
	if err := unstructured.SetNestedSlice(step, clusters, "input", "tenancy", "clusters"); err != nil {
		t.Fatal(err)
	}
	pipeline[0] = step
	if err := unstructured.SetNestedSlice(changed.Object, pipeline, "spec", "pipeline"); err != nil {
		t.Fatal(err)
	}
	if err := cp.apply(t.Context(), changed); err != nil {
		t.Fatal(err)
	}
	// A new XR takes the Composition's latest revision: wait until it is the changed one, so
	// the claim never composes under the old input.
	latestRevisionHas(t, comp.GetName(), `"Prod_EU"`, true)
	c := newKarpenter(t, claimAPI, "team-b", "karpenter", "Prod_EU")
	c.assertRefused("the tenancy declares Prod_EU beside prod-eu", "Invalid",
		fmt.Sprintf(`input.tenancy.clusters[%d].name: Invalid value: "Prod_EU": collides with "prod-eu"`, len(clusters)-1))
}

// latestRevisionHas waits until the latest CompositionRevision of Composition name has (or has
// not) s in its spec: what a new XR, or an XR on Automatic updates, then composes with.
func latestRevisionHas(t *testing.T, name, s string, has bool) {
	t.Helper()
	revisions := schema.GroupVersionResource{Group: "apiextensions.crossplane.io", Version: "v1", Resource: "compositionrevisions"}
	what := fmt.Sprintf("the latest revision of %s to have %s: %v", name, s, has)
	if err := waitFor(context.Background(), react, what, func() (bool, error) {
		list, err := cp.dyn.Resource(revisions).List(context.Background(), metav1.ListOptions{LabelSelector: "crossplane.io/composition-name=" + name})
		if err != nil {
			return false, nil
		}
		var latest *unstructured.Unstructured
		var highest int64
		for i := range list.Items {
			r := &list.Items[i]
			if n, _, _ := unstructured.NestedInt64(r.Object, "spec", "revision"); latest == nil || n > highest {
				latest, highest = r, n
			}
		}
		if latest == nil {
			return false, nil
		}
		b, err := json.Marshal(latest.Object["spec"])
		return err == nil && strings.Contains(string(b), s) == has, nil
	}); err != nil {
		t.Error(err)
	}
}
