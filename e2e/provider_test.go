//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Labels and annotations Crossplane puts on every composed resource.
const (
	compositeLabel      = "crossplane.io/composite"
	resourceNameAnno    = "crossplane.io/composition-resource-name"
	externalNameAnno    = "crossplane.io/external-name"
	providerFinalizer   = "finalizer.managedresource.crossplane.io"
	fluxFinalizer       = "finalizers.fluxcd.io"
	testAccount         = "111122223333"
	kustomizationRevSHA = "main@sha1:0123abc"
)

// composedKind is a kind the function composes and the fake provider watches.
type composedKind struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
	// finalizer is what the kind's real controller puts on an object and removes once it has
	// deleted what the object stands for ("" when nothing does).
	finalizer string
}

var composedKinds = []composedKind{
	{schema.GroupVersionResource{Group: "iam.aws.upbound.io", Version: "v1beta1", Resource: "roles"}, "Role", false, providerFinalizer},
	{schema.GroupVersionResource{Group: "iam.aws.upbound.io", Version: "v1beta1", Resource: "rolepolicies"}, "RolePolicy", false, providerFinalizer},
	{schema.GroupVersionResource{Group: "sqs.aws.upbound.io", Version: "v1beta1", Resource: "queues"}, "Queue", false, providerFinalizer},
	{schema.GroupVersionResource{Group: "sqs.aws.upbound.io", Version: "v1beta1", Resource: "queuepolicies"}, "QueuePolicy", false, providerFinalizer},
	{schema.GroupVersionResource{Group: "cloudwatchevents.aws.upbound.io", Version: "v1beta1", Resource: "rules"}, "Rule", false, providerFinalizer},
	{schema.GroupVersionResource{Group: "cloudwatchevents.aws.upbound.io", Version: "v1beta1", Resource: "targets"}, "Target", false, providerFinalizer},
	{schema.GroupVersionResource{Group: "eks.aws.upbound.io", Version: "v1beta1", Resource: "podidentityassociations"}, "PodIdentityAssociation", false, providerFinalizer},
	{schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "Namespace", false, ""},
	{schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, "ServiceAccount", true, ""},
	{schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, "Job", true, ""},
	{schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}, "Kustomization", true, fluxFinalizer},
	{schema.GroupVersionResource{Group: "protection.crossplane.io", Version: "v1beta1", Resource: "usages"}, "Usage", true, ""},
	{schema.GroupVersionResource{Group: "protection.crossplane.io", Version: "v1beta1", Resource: "clusterusages"}, "ClusterUsage", false, ""},
}

func kindOf(kind string) composedKind {
	for _, k := range composedKinds {
		if k.kind == kind {
			return k
		}
	}
	panic("unknown composed kind " + kind)
}

// fakeProvider plays provider-aws and Flux's kustomize-controller in the background, every
// 100ms: like the real controllers it puts its finalizer on every object it manages as soon as
// it sees it, keeps each object's status at what the test says AWS or Flux reports (set), and on
// deletion "deletes the external resource" and releases the object. It also records, for every
// composed object of any kind, when its deletion was first seen (deletionTimestamp set, or the
// object gone), so tests can check the order of deletions.
type fakeProvider struct {
	cp *controlPlane

	mu      sync.Mutex
	wants   map[string]want        // by XR and composition resource name
	seen    map[types.UID]deletion // every composed object seen alive, by UID
	deleted []deletion             // in the order their deletions were seen
}

// A want is what the fake provider reports for one composed resource, as AWS or Flux would
// answer. The background loop keeps the object's status at it: like a real controller it
// re-asserts its status whenever the object says otherwise.
type want struct {
	state   state
	message string // the provider's or Flux's message, for failing and unready
	dropARN bool   // unready only: the provider no longer observes the resource's ARN
}

type state int

const (
	ready   state = iota + 1 // created: atProvider filled, Ready and Synced; a Job completed; a Kustomization applied
	failing                  // AWS refused it: Synced=False with the provider's error
	unready                  // degraded after being Ready
)

// set makes the fake provider report w for a composed resource of an XR from now on.
func (f *fakeProvider) set(xr, name string, w want) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wants[xr+"/"+name] = w
}

func (f *fakeProvider) wantFor(u *unstructured.Unstructured) (want, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.wants[u.GetLabels()[compositeLabel]+"/"+u.GetAnnotations()[resourceNameAnno]]
	return w, ok
}

// A deletion is a composed object whose deletion the API server accepted.
type deletion struct {
	name  string // composition resource name
	kind  string
	at    time.Time
	cycle int // the fake provider's poll cycle that saw it: equal cycles are simultaneous
}

func newFakeProvider(c *controlPlane) *fakeProvider {
	return &fakeProvider{cp: c, wants: map[string]want{}, seen: map[types.UID]deletion{}}
}

// run reconciles every 100ms until ctx ends.
func (f *fakeProvider) run(ctx context.Context) {
	for cycle := 0; ; cycle++ {
		present := map[types.UID]bool{}
		complete := true
		for _, k := range composedKinds {
			l, err := f.cp.dyn.Resource(k.gvr).List(ctx, metav1.ListOptions{LabelSelector: compositeLabel})
			if err != nil {
				complete = false
				continue
			}
			for i := range l.Items {
				u := &l.Items[i]
				present[u.GetUID()] = true
				f.observe(u, cycle)
				if k.finalizer != "" {
					f.reconcileFinalizer(ctx, k, u)
				}
				if w, ok := f.wantFor(u); ok && u.GetDeletionTimestamp() == nil && !reports(u, w) {
					_ = f.report(ctx, u, w)
				}
			}
		}
		if complete {
			f.forgetGone(present, cycle)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (f *fakeProvider) observe(u *unstructured.Unstructured, cycle int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, known := f.seen[u.GetUID()]
	if !known {
		d = deletion{name: u.GetAnnotations()[resourceNameAnno], kind: u.GetKind()}
		f.seen[u.GetUID()] = d
	}
	if u.GetDeletionTimestamp() != nil && d.at.IsZero() {
		d.at, d.cycle = time.Now(), cycle
		f.seen[u.GetUID()] = d
		f.deleted = append(f.deleted, d)
	}
}

// forgetGone records the deletion of objects that vanished between two polls.
func (f *fakeProvider) forgetGone(present map[types.UID]bool, cycle int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for uid, d := range f.seen {
		if present[uid] {
			continue
		}
		if d.at.IsZero() {
			d.at, d.cycle = time.Now(), cycle
			f.deleted = append(f.deleted, d)
		}
		delete(f.seen, uid)
	}
}

func (f *fakeProvider) reconcileFinalizer(ctx context.Context, k composedKind, u *unstructured.Unstructured) {
	has := false
	var others []any
	for _, fin := range u.GetFinalizers() {
		if fin == k.finalizer {
			has = true
		} else {
			others = append(others, fin)
		}
	}
	switch {
	case u.GetDeletionTimestamp() == nil && !has:
		others = append(others, k.finalizer)
	case u.GetDeletionTimestamp() != nil && has:
	default:
		return
	}
	// The resourceVersion makes this a compare-and-swap: never clobber a concurrent change.
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers": others, "resourceVersion": u.GetResourceVersion()}})
	_, _ = f.cp.dyn.Resource(k.gvr).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
}

// deletions returns, and forgets, the deletions seen so far.
func (f *fakeProvider) deletions() []deletion {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.deleted
	f.deleted = nil
	return out
}

// patchStatus merge-patches an object's status subresource.
func (f *fakeProvider) patchStatus(ctx context.Context, u *unstructured.Unstructured, status map[string]any) error {
	k := kindOf(u.GetKind())
	b, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	_, err = f.cp.dyn.Resource(k.gvr).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.MergePatchType, b, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("cannot patch the status of %s %s (%s): %w", u.GetKind(), u.GetName(), u.GetAnnotations()[resourceNameAnno], err)
	}
	return nil
}

// report writes w into an object's status the way its controller would: a managed resource
// gets the identifiers AWS assigns in status.atProvider and Ready/Synced, or the provider's
// error; a Job completes; a Kustomization reports the applied revision or a failed health check.
// Namespaces, ServiceAccounts and Usages need nothing (the API server makes a Namespace Active,
// Crossplane makes a Usage Ready).
func (f *fakeProvider) report(ctx context.Context, u *unstructured.Unstructured, w want) error {
	switch u.GetKind() {
	case "Namespace", "ServiceAccount", "Usage", "ClusterUsage":
		return nil
	case "Job":
		return f.jobFinished(ctx, u, w.state == ready)
	case "Kustomization":
		if w.state == ready {
			return f.patchStatus(ctx, u, map[string]any{
				"observedGeneration":    u.GetGeneration(),
				"lastAppliedRevision":   kustomizationRevSHA,
				"lastAttemptedRevision": kustomizationRevSHA,
				"conditions": []any{fluxCondition("Ready", "True", "ReconciliationSucceeded", "Applied revision: "+kustomizationRevSHA, u.GetGeneration()),
					fluxCondition("Healthy", "True", "Succeeded", "Health check passed", u.GetGeneration())},
			})
		}
		return f.patchStatus(ctx, u, map[string]any{"conditions": []any{
			fluxCondition("Ready", "False", "HealthCheckFailed", w.message, u.GetGeneration())}})
	}
	switch w.state {
	case failing:
		return f.patchStatus(ctx, u, map[string]any{
			"conditions": []any{xpCondition("Ready", "False", "Creating", ""), xpCondition("Synced", "False", "ReconcileError", w.message)},
		})
	case unready:
		status := map[string]any{
			"conditions": []any{xpCondition("Ready", "False", "Unavailable", w.message), xpCondition("Synced", "True", "ReconcileSuccess", "")},
		}
		if w.dropARN {
			status["atProvider"] = map[string]any{"arn": nil}
		}
		return f.patchStatus(ctx, u, status)
	}
	return f.patchStatus(ctx, u, map[string]any{
		"atProvider": atProvider(u),
		"conditions": []any{xpCondition("Ready", "True", "Available", ""), xpCondition("Synced", "True", "ReconcileSuccess", "")},
	})
}

// reports tells whether an object's status already says what w says.
func reports(u *unstructured.Unstructured, w want) bool {
	readyC, synced := condition(u, "Ready"), condition(u, "Synced")
	is := func(c map[string]any, status, reason, message string) bool {
		return c != nil && c["status"] == status && (reason == "" || c["reason"] == reason) && (message == "" || c["message"] == message)
	}
	switch u.GetKind() {
	case "Namespace", "ServiceAccount", "Usage", "ClusterUsage":
		return true
	case "Job":
		if w.state == ready {
			return is(condition(u, "Complete"), "True", "", "")
		}
		return is(condition(u, "Failed"), "True", "", "")
	case "Kustomization":
		if w.state == ready {
			return is(readyC, "True", "", "")
		}
		return is(readyC, "False", "HealthCheckFailed", w.message)
	}
	arn, hasARN, _ := unstructured.NestedString(u.Object, "status", "atProvider", "arn")
	switch w.state {
	case failing:
		return is(synced, "False", "ReconcileError", w.message)
	case unready:
		return is(readyC, "False", "Unavailable", w.message) && !(w.dropARN && hasARN)
	}
	_, wantsARN := atProvider(u)["arn"]
	return is(readyC, "True", "", "") && is(synced, "True", "", "") && (!wantsARN || arn != "")
}

// jobFinished records a Job's end as the Job controller does: the terminal condition follows
// SuccessCriteriaMet or FailureTarget, with start and completion times, which the API server's
// status validation requires.
func (f *fakeProvider) jobFinished(ctx context.Context, u *unstructured.Unstructured, succeeded bool) error {
	now := metav1.Now().UTC().Format(time.RFC3339)
	status := map[string]any{"startTime": now, "ready": int64(0), "terminating": int64(0)}
	if succeeded {
		status["succeeded"] = int64(1)
		status["completionTime"] = now
		status["conditions"] = []any{
			jobCondition("SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods", now),
			jobCondition("Complete", "CompletionsReached", "Reached expected number of succeeded pods", now),
		}
	} else {
		status["failed"] = int64(7)
		status["conditions"] = []any{
			jobCondition("FailureTarget", "BackoffLimitExceeded", "Job has reached the specified backoff limit", now),
			jobCondition("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit", now),
		}
	}
	return f.patchStatus(ctx, u, status)
}

// atProvider is what provider-aws reports once AWS created the resource: ARNs and URLs built the
// way AWS builds them, from the spec and the external name the function chose.
func atProvider(u *unstructured.Unstructured) map[string]any {
	fp, _, _ := unstructured.NestedMap(u.Object, "spec", "forProvider")
	str := func(k string) string { s, _ := fp[k].(string); return s }
	ext := u.GetAnnotations()[externalNameAnno]
	region := str("region")
	at := map[string]any{"id": ext}
	switch u.GetKind() {
	case "Role":
		at["arn"] = fmt.Sprintf("arn:aws:iam::%s:role%s%s", testAccount, str("path"), ext)
		at["uniqueId"] = "AROAE2E" + strings.ToUpper(strings.ReplaceAll(ext, "-", ""))
	case "Queue":
		at["arn"] = fmt.Sprintf("arn:aws:sqs:%s:%s:%s", region, testAccount, str("name"))
		at["url"] = fmt.Sprintf("https://sqs.%s.amazonaws.com/%s/%s", region, testAccount, str("name"))
		at["id"] = at["url"]
	case "Rule":
		at["arn"] = fmt.Sprintf("arn:aws:events:%s:%s:rule/%s", region, testAccount, ext)
	case "PodIdentityAssociation":
		at["associationArn"] = fmt.Sprintf("arn:aws:eks:%s:%s:podidentityassociation/%s/a-e2e0123456789", region, testAccount, str("clusterName"))
		at["associationId"] = "a-e2e0123456789"
		at["id"] = str("clusterName") + ",a-e2e0123456789"
	}
	return at
}

func xpCondition(typ, status, reason, message string) map[string]any {
	c := map[string]any{"type": typ, "status": status, "reason": reason, "lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339)}
	if message != "" {
		c["message"] = message
	}
	return c
}

func fluxCondition(typ, status, reason, message string, generation int64) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": message,
		"observedGeneration": generation, "lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339)}
}

func jobCondition(typ, reason, message, now string) map[string]any {
	return map[string]any{"type": typ, "status": "True", "reason": reason, "message": message,
		"lastProbeTime": now, "lastTransitionTime": now}
}

// composedOf lists what exists in the API server for one XR, by composition resource name.
func composedOf(ctx context.Context, c *controlPlane, xr string) (map[string]*unstructured.Unstructured, error) {
	out := map[string]*unstructured.Unstructured{}
	for _, k := range composedKinds {
		l, err := c.dyn.Resource(k.gvr).List(ctx, metav1.ListOptions{LabelSelector: compositeLabel + "=" + xr})
		if err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("cannot list %s: %w", k.gvr.Resource, err)
		}
		for i := range l.Items {
			u := &l.Items[i]
			name := u.GetAnnotations()[resourceNameAnno]
			if prev, dup := out[name]; dup {
				return nil, fmt.Errorf("two composed resources named %q: %s %s and %s %s", name, prev.GetKind(), prev.GetName(), u.GetKind(), u.GetName())
			}
			out[name] = u
		}
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
