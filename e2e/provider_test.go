//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/cel-go/cel"
	celtypes "github.com/google/cel-go/common/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/do-now/function-karpenter/internal/scope"
)

// Labels and annotations Crossplane puts on every composed resource.
const (
	compositeLabel    = "crossplane.io/composite"
	resourceNameAnno  = "crossplane.io/composition-resource-name"
	externalNameAnno  = "crossplane.io/external-name"
	providerFinalizer = "finalizer.managedresource.crossplane.io"
	fluxFinalizer     = "finalizers.fluxcd.io"
	clusterLabel      = "socle.do-now.io/cluster"
	testAccount       = "111122223333"
	// testVPC is every cluster's VPC, as provider-aws reports it and the access check's AWS
	// answers (awsAccountEnv): a stand-in, since the emulator describes an EKS cluster without
	// its VPC (observeCluster).
	testVPC             = "vpc-0fa4e"
	kustomizationRevSHA = "main@sha1:0123abc"
)

// composedKind is a kind the function composes and the fake provider watches.
type composedKind struct {
	gvr  schema.GroupVersionResource
	kind string
	// namespaced kinds are what the namespaced XR composes, in its namespace; the others what the
	// claim's cluster-scoped XR composes.
	namespaced bool
	// finalizer is what the kind's real controller puts on an object and removes once it has
	// deleted what the object stands for ("" when nothing does).
	finalizer string
	// configs is the group of the provider configs the kind's provider reads ("" for Usages,
	// which no provider reconciles).
	configs string
}

func (k composedKind) apiVersion() string { return k.gvr.GroupVersion().String() }

// composedKinds are the kinds of both APIs: every kind the function's builders make, as each API
// composes it (internal/scope: provider-aws' managed resources, provider-kubernetes' Object,
// which carries step three's Namespace, ServiceAccount and access-check Pod, the three Flux
// Kustomizations and the pools' observers to the claimed cluster through the provider config it
// names), and Crossplane's Usages.
var composedKinds = func() []composedKind {
	var out []composedKind
	for _, a := range scope.APIs {
		for _, k := range a.Kinds() {
			gv, _ := schema.ParseGroupVersion(k.APIVersion)
			out = append(out, composedKind{gv.WithResource(k.Resource), k.Kind, a.Namespaced, providerFinalizer, configsGroup(k)})
		}
	}
	return append(out,
		composedKind{gvr("protection.crossplane.io", "v1beta1", "clusterusages"), "ClusterUsage", false, "", ""},
		composedKind{gvr("protection.crossplane.io", "v1beta1", "usages"), "Usage", true, "", ""})
}()

// configsGroup is the group of the provider configs a kind's provider reads: provider-kubernetes'
// Object's own group; provider-aws' family group (aws.upbound.io, aws.m.upbound.io) for every
// service group under it.
func configsGroup(k scope.Kind) string {
	gv, _ := schema.ParseGroupVersion(k.APIVersion)
	if k.Kind == scope.ObjectKind {
		return gv.Group
	}
	_, family, _ := strings.Cut(gv.Group, ".")
	return family
}

func gvr(group, version, resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: group, Version: version, Resource: resource}
}

// kindOf is the composed kind of an object; ok is false for a kind the function must not compose.
func kindOf(u *unstructured.Unstructured) (composedKind, bool) {
	for _, k := range composedKinds {
		if k.apiVersion() == u.GetAPIVersion() && k.kind == u.GetKind() {
			return k, true
		}
	}
	return composedKind{}, false
}

// An xrRef names an XR: its namespace ("" for the claim's cluster-scoped XR) and its name. A
// namespaced XR composes everything in its own namespace, so two XRs of one name in two
// namespaces label what they compose alike: the namespace tells them apart.
type xrRef struct{ namespace, name string }

func (r xrRef) String() string {
	if r.namespace == "" {
		return r.name
	}
	return r.namespace + "/" + r.name
}

// composerOf is the XR that composed u, as Crossplane labels it.
func composerOf(u *unstructured.Unstructured) xrRef {
	return xrRef{namespace: u.GetNamespace(), name: u.GetLabels()[compositeLabel]}
}

// fakeProvider plays provider-aws and provider-kubernetes in the background, every fakePoll, and
// what the claimed clusters report of the objects applied to them (their Kubernetes and, for
// the Kustomizations, their own Flux): like the real controllers it puts its finalizer on every object it
// manages as soon as it sees it, keeps each object's status at what the test says AWS, the
// claimed cluster or Flux reports (set), and on deletion "deletes the external resource" and
// releases the object. Of provider-aws' managed resources but the Pod Identity association, AWS
// is the shard's emulator (emulated_test.go): a resource the test makes Ready is created or
// updated there from its spec, its status.atProvider is what the emulator answered, a refusal
// fails it with the emulator's words, and its deletion deletes it there. The test still decides
// when AWS answers (set), and the refusals the emulator cannot produce (AccessDenied, a role
// turning unready). It also records, for every composed object of any kind, when its deletion
// was first seen (deletionTimestamp set, or the object gone), so tests can check the order of
// deletions; and every object of step three that ever shows up in Crossplane's own cluster,
// where none belongs. It plays both scopes of both providers: what the claim's XR composes and
// what the namespaced XR composes.
type fakeProvider struct {
	cp *controlPlane
	// The fake provider's own clients, so that its polling and the tests' polling do not share
	// one client-side rate limit: the real providers do not share Crossplane's either.
	dyn  dynamic.Interface
	kube kubernetes.Interface

	mu      sync.Mutex
	wants   map[string]want        // by XR (namespace and name) and composition resource name
	seen    map[types.UID]deletion // every composed object seen alive, by UID
	deleted []deletion             // in the order their deletions were seen, all run long
	local   map[string]bool        // step-three objects seen in Crossplane's cluster
	// pods are the access-check Pods the claimed clusters hold, by the UID of the Object that
	// created them and their name: a renamed Pod is a new one, the old left behind, finished.
	pods map[types.UID]map[string]*remotePod
	// realObjects: the real provider-kubernetes runs (realClaimedClusters), and the fake
	// leaves every Object to it, recording only when each is deleted.
	realObjects atomic.Bool
	// readyByDefault: every composed resource no test set a want for is reported Ready
	// (TestLoad, whose providers answer at once).
	readyByDefault atomic.Bool

	// aws is the shard's AWS, the emulator, where the managed resources of the emulated kinds
	// are made (emulated_test.go); applied is what was made there of each, by UID (under mu).
	aws     *emulatedAWS
	applied map[types.UID]applied
}

// An applied is what the fake last made of a managed resource in AWS: for which generation of
// its spec (and out-of-band statement), what the emulator answered or refused, and whether
// anything exists there for it. The fake asks AWS again only when the spec or the test's want
// changed, or a refusal is due to be tried again: a reconcile that changes nothing calls no AWS.
type applied struct {
	generation int64
	outOfBand  string
	atProvider map[string]any
	refused    string    // provider-aws' message for the emulator's refusal of the last call
	retryAt    time.Time // when a refused call is tried again
	exists     bool
}

// awsRetry is how long the fake waits before it tries a call the emulator refused again (a
// RolePolicy whose role the test holds back, a rule whose targets are still being deleted).
// provider-aws' managed reconciler backs off from 1 s; a short fixed wait keeps the walks quick.
const awsRetry = 2 * time.Second

// A want is what the fake provider reports for one composed resource, as AWS, the claimed
// cluster or Flux would answer. The background loop keeps the object's status at it: like a real
// controller it re-asserts its status whenever the object says otherwise.
type want struct {
	state   state
	message string // provider-aws's message, for failing and unready
	dropARN bool   // unready only: the provider no longer observes the resource's ARN
	// outOfBand is, for a Ready RolePolicy, a statement someone added to the document in AWS
	// beside what the provider last gave it (in the console, say): AWS reports both.
	outOfBand map[string]any
}

// A poolReport is what Karpenter reports in a NodePool's status: its nodes, and the CPU and
// memory they provide (quantities, as Karpenter writes them).
type poolReport struct {
	nodes       int64
	cpu, memory string
}

type state int

const (
	ready   state = iota + 1 // created: atProvider filled, Ready and Synced; the access check's Pod succeeded; a Kustomization applied
	failing                  // the provider's call failed (AWS, or the claimed cluster's API server): Synced=False with its error
	unready                  // degraded after being Ready
)

// set makes the fake provider report w for a composed resource of an XR from now on.
func (f *fakeProvider) set(xr xrRef, name string, w want) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wants[xr.String()+"/"+name] = w
}

func (f *fakeProvider) wantFor(u *unstructured.Unstructured) (want, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.wants[composerOf(u).String()+"/"+u.GetAnnotations()[resourceNameAnno]]
	if !ok && f.readyByDefault.Load() {
		return want{state: ready}, true
	}
	return w, ok
}

// A deletion is a composed object whose deletion the API server accepted.
type deletion struct {
	xr    xrRef  // the XR that composed it
	name  string // composition resource name
	kind  string
	at    time.Time
	cycle int // the fake provider's poll cycle that saw it: equal cycles are simultaneous
}

func newFakeProvider(c *controlPlane) (*fakeProvider, error) {
	dyn, err := dynamic.NewForConfig(c.cfg)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(c.cfg)
	if err != nil {
		return nil, err
	}
	return &fakeProvider{cp: c, dyn: dyn, kube: kube, wants: map[string]want{}, seen: map[types.UID]deletion{}, local: map[string]bool{},
		pods: map[types.UID]map[string]*remotePod{}, aws: c.aws, applied: map[types.UID]applied{}}, nil
}

// fakePoll is how often the fake provider reconciles what it holds of every composed kind. It
// reads them from watch caches (client-go's informers, one per kind, filtered by Crossplane's
// composite label: a LIST, then a WATCH), as a provider's controllers do, not from the API
// server: a LIST per kind every poll was most of the hub API server's CPU (a 180 s CPU profile of
// its kube-apiserver during TestOneKarpenterPerCluster: 59 s, over 800 LISTs of each of the 20
// composed kinds; docs/performance.md). A quarter of a second adds at most that to each round of
// a walk.
const fakePoll = 250 * time.Millisecond

// run reconciles every fakePoll until ctx ends.
func (f *fakeProvider) run(ctx context.Context) {
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(f.dyn, 0, metav1.NamespaceAll,
		func(o *metav1.ListOptions) { o.LabelSelector = compositeLabel })
	caches := make([]informers.GenericInformer, len(composedKinds))
	for i, k := range composedKinds {
		caches[i] = factory.ForResource(k.gvr)
	}
	factory.Start(ctx.Done())
	f.watchLocal(ctx)
	for cycle := 0; ; cycle++ {
		present := map[types.UID]bool{}
		complete := true
		configs := providerConfigs{}
		var writes []func()
		for i, k := range composedKinds {
			items, ok := cached(caches[i])
			if !ok {
				complete = false
				continue
			}
			// The Objects of one XR, by composition resource name: an observe-only Object reads
			// what another one's Kustomization applied.
			siblings := map[string]*unstructured.Unstructured{}
			for i := range items {
				siblings[composerOf(&items[i]).String()+"/"+items[i].GetAnnotations()[resourceNameAnno]] = &items[i]
			}
			for i := range items {
				u := &items[i]
				present[u.GetUID()] = true
				f.observe(u, cycle)
				if k.kind == "Object" && f.realObjects.Load() {
					continue
				}
				if write := f.reconcile(ctx, configs, k, u, siblings); write != nil {
					writes = append(writes, write)
				}
			}
		}
		inParallel(fakeWriters, writes)
		if complete {
			f.forgetGone(present, cycle)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(fakePoll):
		}
	}
}

// fakeWriters is how many objects the fake provider writes at once in a poll. The providers it
// plays each reconcile up to 100 objects at once by default (provider-aws v2.5.0's and
// provider-kubernetes v1.3.1's --max-reconcile-rate, cmd/provider/*/zz_main.go and
// cmd/provider/main.go, as MaxConcurrentReconciles). Written one after the other, a hundred
// claims took 505 s to get Ready where ten at a time took 378 s (make load N=100 with ten
// Crossplane workers, docs/performance.md#load): the stand-in, not Crossplane, was paced.
const fakeWriters = 10

// inParallel runs each job, at most n at once, and returns once all have.
func inParallel(n int, jobs []func()) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, n)
	for _, job := range jobs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			job()
		})
	}
	wg.Wait()
}

// reconcile decides what the fake provider writes of one composed object in this poll: its
// finalizer, then the status its want says (nil if nothing). What it decides from is read here,
// one object after the other; only the writes run in parallel, each object's in order.
func (f *fakeProvider) reconcile(ctx context.Context, configs providerConfigs, k composedKind, u *unstructured.Unstructured, siblings map[string]*unstructured.Unstructured) func() {
	var writes []func()
	switch {
	case k.finalizer == "" || !needsFinalizerPatch(k, u):
	case u.GetDeletionTimestamp() != nil && emulated(k.kind):
		if release := f.deleteInAWS(ctx, k, u); release != nil {
			writes = append(writes, release)
		}
	default:
		writes = append(writes, func() { f.reconcileFinalizer(ctx, k, u) })
	}
	w, ok := f.wantFor(u)
	if !ok && k.kind == "Object" && observeOnly(u) {
		// Nothing for the test to decide: the provider reads whatever the claimed
		// cluster holds, an empty pool unless the test says otherwise.
		w, ok = want{state: ready}, true
	}
	switch {
	case !ok || u.GetDeletionTimestamp() != nil:
	case k.configs == "":
		// A Usage: Crossplane makes it Ready, no provider reports on it.
	case k.kind == "Object":
		nodes := siblings[composerOf(u).String()+"/"+nodesKustomization]
		if status := f.objectStatus(f.providerConfig(ctx, configs, k, u), u, w, nodes); !sameStatus(u.Object["status"], status) {
			writes = append(writes, func() { _ = f.updateStatus(ctx, k, u, status) })
		}
	default:
		// Without its provider config the provider cannot call AWS: whatever the test
		// says AWS answers, the resource fails as the real one would.
		if err := f.providerConfig(ctx, configs, k, u); err != nil {
			w = want{state: failing, message: "connect failed: cannot get terraform setup: cannot get referenced ProviderConfig: " + err.Error()}
		}
		if write := f.reportManaged(ctx, k, u, w); write != nil {
			writes = append(writes, write)
		}
	}
	if len(writes) == 0 {
		return nil
	}
	return func() {
		for _, write := range writes {
			write()
		}
	}
}

// reportManaged decides what the fake writes of a managed resource's status given w (nil if
// nothing): for an emulated kind made Ready, what AWS answered for its current spec, asked in
// the write itself when it was not asked yet (applyInAWS).
func (f *fakeProvider) reportManaged(ctx context.Context, k composedKind, u *unstructured.Unstructured, w want) func() {
	var at map[string]any
	switch {
	case w.state != ready:
	case !emulated(k.kind):
		at = atProvider(u)
	default:
		a, asked := f.awsAnswer(u, w)
		if !asked {
			return func() {
				w, at := f.applyInAWS(ctx, u, w).outcome(w)
				_ = f.report(ctx, k, u, w, at)
			}
		}
		w, at = a.outcome(w)
	}
	if reports(u, w, at) {
		return nil
	}
	return func() { _ = f.report(ctx, k, u, w, at) }
}

// awsAnswer is what AWS answered when the fake last made u what its spec says with w's
// out-of-band statement; asked is false when it has not for this generation, or when a refusal
// is due to be tried again.
func (f *fakeProvider) awsAnswer(u *unstructured.Unstructured, w want) (a applied, asked bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.applied[u.GetUID()]
	asked = ok && a.generation == u.GetGeneration() && a.outOfBand == outOfBandKey(w) &&
		(a.refused == "" || time.Now().Before(a.retryAt))
	return a, asked
}

// applyInAWS makes u what its spec says in AWS and records the emulator's answer.
func (f *fakeProvider) applyInAWS(ctx context.Context, u *unstructured.Unstructured, w want) applied {
	f.mu.Lock()
	prev := f.applied[u.GetUID()]
	f.mu.Unlock()
	a := applied{generation: u.GetGeneration(), outOfBand: outOfBandKey(w), exists: prev.exists}
	at, err := f.aws.apply(ctx, u, w.outOfBand)
	a.exists = prev.exists || at != nil // made, even if a field the fake does not play fails it
	switch {
	case err == nil:
		a.atProvider = at
	case u.GetKind() == "Cluster":
		a.refused = refusal("observe", err)
	case prev.exists:
		a.refused = refusal("update", err)
	default:
		a.refused = refusal("create", err)
	}
	a.retryAt = time.Now().Add(awsRetry)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied[u.GetUID()] = a
	return a
}

func outOfBandKey(w want) string {
	if w.outOfBand == nil {
		return ""
	}
	b, _ := json.Marshal(w.outOfBand)
	return string(b)
}

// outcome is what the provider reports given the answer a: w with AWS's atProvider, or the
// emulator's refusal (Synced=False, ReconcileError, as provider-aws reports a failed call).
func (a applied) outcome(w want) (want, map[string]any) {
	if a.refused != "" {
		return want{state: failing, message: a.refused}, nil
	}
	return w, a.atProvider
}

// deleteInAWS is the write that deletes a managed resource's AWS resource and then releases the
// object (nil while a refused deletion waits to be tried again). What the fake never made in AWS
// is released at once. A refusal (a role that still has its policy, a rule that still has
// targets) is reported as provider-aws reports it, Synced=False, and tried again awsRetry later.
func (f *fakeProvider) deleteInAWS(ctx context.Context, k composedKind, u *unstructured.Unstructured) func() {
	f.mu.Lock()
	a := f.applied[u.GetUID()]
	f.mu.Unlock()
	if a.exists && a.refused != "" && time.Now().Before(a.retryAt) {
		return nil
	}
	return func() {
		if a.exists {
			if err := f.aws.remove(ctx, u); err != nil {
				a.refused, a.retryAt = refusal("delete", err), time.Now().Add(awsRetry)
				f.mu.Lock()
				f.applied[u.GetUID()] = a
				f.mu.Unlock()
				_ = f.patchStatus(ctx, k, u, map[string]any{"conditions": []any{
					xpCondition("Ready", "False", "Deleting", ""), xpCondition("Synced", "False", "ReconcileError", a.refused)}})
				return
			}
		}
		f.mu.Lock()
		delete(f.applied, u.GetUID())
		f.mu.Unlock()
		f.reconcileFinalizer(ctx, k, u)
	}
}

// cached copies what an informer holds, in the order a LIST returns (by namespace, then name),
// once it has synced.
func cached(inf informers.GenericInformer) ([]unstructured.Unstructured, bool) {
	if !inf.Informer().HasSynced() {
		return nil, false
	}
	objs, err := inf.Lister().List(labels.Everything())
	if err != nil {
		return nil, false
	}
	items := make([]unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		items = append(items, *o.(*unstructured.Unstructured).DeepCopy())
	}
	slices.SortFunc(items, func(a, b unstructured.Unstructured) int {
		return cmp.Or(strings.Compare(a.GetNamespace(), b.GetNamespace()), strings.Compare(a.GetName(), b.GetName()))
	})
	return items, true
}

// providerConfigs memoises, for one poll cycle, the lookups of provider configs: nil when found,
// else the API server's error.
type providerConfigs map[string]error

// providerConfig gets the provider config a managed resource names, as its provider does before
// anything else: a cluster-scoped kind names a cluster-scoped ProviderConfig (by name alone); a
// namespaced kind names a ClusterProviderConfig or a ProviderConfig in its own namespace, by kind
// and name. Both default to "default", as the CRDs do.
func (f *fakeProvider) providerConfig(ctx context.Context, memo providerConfigs, k composedKind, u *unstructured.Unstructured) error {
	name, _, _ := unstructured.NestedString(u.Object, "spec", "providerConfigRef", "name")
	kind, _, _ := unstructured.NestedString(u.Object, "spec", "providerConfigRef", "kind")
	if name == "" {
		name = "default"
	}
	namespace := ""
	switch {
	case !k.namespaced:
		kind = "ProviderConfig"
	case kind == "" || kind == "ClusterProviderConfig":
		kind = "ClusterProviderConfig"
	case kind == "ProviderConfig":
		namespace = u.GetNamespace()
	default:
		return fmt.Errorf("unknown provider config kind: %q", kind)
	}
	resource := gvr(k.configs, "v1beta1", strings.ToLower(kind)+"s")
	if strings.HasPrefix(k.configs, "kubernetes.") {
		resource.Version = "v1alpha1"
	}
	key := resource.String() + " " + namespace + "/" + name
	if err, done := memo[key]; done {
		return err
	}
	_, err := f.dyn.Resource(resource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	memo[key] = err
	return err
}

// localKinds are what step three is made of. They belong in the claimed cluster, wrapped in
// Objects; in Crossplane's own cluster none may ever appear.
var localKinds = []schema.GroupVersionResource{
	{Version: "v1", Resource: "namespaces"},
	{Version: "v1", Resource: "serviceaccounts"},
	{Version: "v1", Resource: "pods"},
}

// controllerNamespace is the namespace step three creates in the claimed cluster (the
// Composition's input.podIdentity.namespace).
const controllerNamespace = "karpenter"

// watchLocal records, from watches until ctx ends, any Namespace, ServiceAccount or Pod in
// Crossplane's cluster that Crossplane composed or that carries the cluster label, and the
// controller's namespace by name: a watch sees every object that ever appears, however briefly.
func (f *fakeProvider) watchLocal(ctx context.Context) {
	record := func(name func(*unstructured.Unstructured) string) cache.ResourceEventHandler {
		add := func(o any) {
			if u, ok := o.(*unstructured.Unstructured); ok {
				f.mu.Lock()
				f.local[name(u)] = true
				f.mu.Unlock()
			}
		}
		return cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, o any) { add(o) }}
	}
	composed := record(func(u *unstructured.Unstructured) string {
		return fmt.Sprintf("%s %s/%s (labels %v)", u.GetKind(), u.GetNamespace(), u.GetName(), u.GetLabels())
	})
	for _, sel := range []string{compositeLabel, clusterLabel} {
		factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(f.dyn, 0, metav1.NamespaceAll,
			func(o *metav1.ListOptions) { o.LabelSelector = sel })
		for _, kind := range localKinds {
			_, _ = factory.ForResource(kind).Informer().AddEventHandler(composed)
		}
		factory.Start(ctx.Done())
	}
	byName := dynamicinformer.NewFilteredDynamicSharedInformerFactory(f.dyn, 0, metav1.NamespaceAll,
		func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + controllerNamespace })
	_, _ = byName.ForResource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Informer().AddEventHandler(record(func(*unstructured.Unstructured) string {
		return "Namespace " + controllerNamespace
	}))
	byName.Start(ctx.Done())
}

// localObjects lists every step-three object seen in Crossplane's own cluster so far.
func (f *fakeProvider) localObjects() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return sortedKeys(f.local)
}

func (f *fakeProvider) observe(u *unstructured.Unstructured, cycle int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, known := f.seen[u.GetUID()]
	if !known {
		d = deletion{xr: composerOf(u), name: u.GetAnnotations()[resourceNameAnno], kind: u.GetKind()}
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
		delete(f.applied, uid)
		delete(f.pods, uid) // the claimed cluster's namespace goes with the claim
	}
}

// needsFinalizerPatch tells whether reconcileFinalizer has anything to write: its finalizer
// missing from a live object, or still on a deleted one.
func needsFinalizerPatch(k composedKind, u *unstructured.Unstructured) bool {
	has := slices.Contains(u.GetFinalizers(), k.finalizer)
	return has == (u.GetDeletionTimestamp() != nil)
}

// reconcileFinalizer writes what needsFinalizerPatch found missing; the loop calls it only then.
func (f *fakeProvider) reconcileFinalizer(ctx context.Context, k composedKind, u *unstructured.Unstructured) {
	var others []any
	for _, fin := range u.GetFinalizers() {
		if fin != k.finalizer {
			others = append(others, fin)
		}
	}
	if u.GetDeletionTimestamp() == nil {
		others = append(others, k.finalizer)
	}
	// The resourceVersion makes this a compare-and-swap: never clobber a concurrent change.
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers": others, "resourceVersion": u.GetResourceVersion()}})
	_, _ = f.dyn.Resource(k.gvr).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
}

// deletionMark marks where the deletions seen so far end, for deletionsSince. Tests that run in
// parallel each read their own window; none forgets another's.
func (f *fakeProvider) deletionMark() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.deleted)
}

// deletionsSince returns the deletions seen since mark, of every XR.
func (f *fakeProvider) deletionsSince(mark int) []deletion {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.deleted[mark:])
}

// patchStatus merge-patches an object's status subresource.
func (f *fakeProvider) patchStatus(ctx context.Context, k composedKind, u *unstructured.Unstructured, status map[string]any) error {
	b, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	_, err = f.dyn.Resource(k.gvr).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.MergePatchType, b, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("cannot patch the status of %s %s (%s): %w", u.GetKind(), u.GetName(), u.GetAnnotations()[resourceNameAnno], err)
	}
	return nil
}

// updateStatus replaces an object's whole status with status, unless it already says the same
// (condition times apart). The update carries the object's resourceVersion: a concurrent change
// wins, and the next poll tries again.
func (f *fakeProvider) updateStatus(ctx context.Context, k composedKind, u *unstructured.Unstructured, status map[string]any) error {
	if sameStatus(u.Object["status"], status) {
		return nil
	}
	u = u.DeepCopy()
	u.Object["status"] = status
	_, err := f.dyn.Resource(k.gvr).Namespace(u.GetNamespace()).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	return err
}

// sameStatus compares two statuses as JSON, ignoring when conditions last changed: the
// Object's own, and those of the object it observes in the claimed cluster (a Kustomization's),
// whose lastTransitionTime the fake writes as the time of each poll. A real controller moves it
// only when the condition's status changes (metav1.Condition), so rewriting the status for it
// alone would change what Crossplane observes, and sends the function, every second.
func sameStatus(a, b any) bool {
	var strip func(v any)
	strip = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if conds, ok := e.([]any); ok && k == "conditions" {
					for _, c := range conds {
						if cm, ok := c.(map[string]any); ok {
							delete(cm, "lastTransitionTime")
						}
					}
				}
				strip(e)
			}
		case []any:
			for _, e := range v {
				strip(e)
			}
		}
	}
	norm := func(v any) any {
		var out any
		raw, _ := json.Marshal(v)
		_ = json.Unmarshal(raw, &out)
		strip(out)
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// report writes w into a managed resource's status the way provider-aws would: at, the
// identifiers AWS assigned, in status.atProvider and Ready/Synced, or the provider's error.
// (Usages need nothing: Crossplane makes a Usage Ready.)
func (f *fakeProvider) report(ctx context.Context, k composedKind, u *unstructured.Unstructured, w want, at map[string]any) error {
	switch w.state {
	case failing:
		return f.patchStatus(ctx, k, u, map[string]any{
			"conditions": []any{xpCondition("Ready", "False", "Creating", ""), xpCondition("Synced", "False", "ReconcileError", w.message)},
		})
	case unready:
		status := map[string]any{
			"conditions": []any{xpCondition("Ready", "False", "Unavailable", w.message), xpCondition("Synced", "True", "ReconcileSuccess", "")},
		}
		if w.dropARN {
			status["atProvider"] = map[string]any{"arn": nil}
		}
		return f.patchStatus(ctx, k, u, status)
	}
	return f.patchStatus(ctx, k, u, map[string]any{
		"atProvider": at,
		"conditions": []any{xpCondition("Ready", "True", "Available", ""), xpCondition("Synced", "True", "ReconcileSuccess", "")},
	})
}

// reports tells whether a managed resource's status already says what w says, with at in
// status.atProvider when w is ready.
func reports(u *unstructured.Unstructured, w want, at map[string]any) bool {
	readyC, synced := condition(u, "Ready"), condition(u, "Synced")
	is := func(c map[string]any, status, reason, message string) bool {
		return c != nil && c["status"] == status && (reason == "" || c["reason"] == reason) && (message == "" || c["message"] == message)
	}
	switch w.state {
	case failing:
		return is(synced, "False", "ReconcileError", w.message)
	case unready:
		_, hasARN, _ := unstructured.NestedString(u.Object, "status", "atProvider", "arn")
		return is(readyC, "False", "Unavailable", w.message) && !(w.dropARN && hasARN)
	}
	held, _, _ := unstructured.NestedMap(u.Object, "status", "atProvider")
	for key, v := range at {
		if !sameStatus(held[key], v) {
			return false
		}
	}
	return is(readyC, "True", "", "") && is(synced, "True", "", "")
}

// kustomizationStatus is what the claimed cluster's kustomize-controller reports of a
// Kustomization it applied.
func kustomizationStatus(gen int64) map[string]any {
	return map[string]any{
		"observedGeneration":    gen,
		"lastAppliedRevision":   kustomizationRevSHA,
		"lastAttemptedRevision": kustomizationRevSHA,
		"conditions": []any{fluxCondition("Ready", "True", "ReconciliationSucceeded", "Applied revision: "+kustomizationRevSHA, gen),
			fluxCondition("Healthy", "True", "Succeeded", "Health check passed", gen)},
	}
}

// objectStatus is what provider-kubernetes reports for an Object given w, and config the
// outcome of getting the provider config the Object names (providerConfig), as the real provider
// does to connect to the claimed cluster: it fails with the provider's error when there is none.
// It plays the provider and a claimed cluster where every part answers at once, for TestLoad
// alone (docs/testing.md: ten claimed clusters do not fit here); every other test that composes
// Objects runs the real ones (realClaimedClusters). Once the manifest is applied,
// status.atProvider.manifest is the object as the claimed cluster returns it (a Namespace
// Active, the access check's Pod pending, running, then succeeded, a Kustomization applied) and
// Ready follows the Object's readiness policy: as soon as it exists (SuccessfulCreate, the
// default), once the observed object's Ready condition is True (DeriveFromObject), or the
// Object's own CEL query evaluated on that observed object (DeriveFromCelQuery), as
// provider-kubernetes evaluates them. An observe-only Object (managementPolicies: [Observe])
// creates nothing: see observeOnlyStatus; nodes is its XR's nodes Kustomization Object, nil when
// there is none.
func (f *fakeProvider) objectStatus(config error, u *unstructured.Unstructured, w want, nodes *unstructured.Unstructured) map[string]any {
	synced := xpCondition("Synced", "True", "ReconcileSuccess", "")
	failed := func(message string) map[string]any {
		return map[string]any{"conditions": []any{xpCondition("Ready", "False", "Creating", ""), xpCondition("Synced", "False", "ReconcileError", message)}}
	}
	if config != nil {
		return failed("connect failed: cannot get provider config: " + config.Error())
	}
	manifest, _, _ := unstructured.NestedMap(u.Object, "spec", "forProvider", "manifest")
	if observeOnly(u) {
		return f.observeOnlyStatus(u, manifest, w, nodes)
	}
	observed := f.remoteObject(u, manifest, w)
	available := xpCondition("Ready", "True", "Available", "")
	policy, _, _ := unstructured.NestedString(u.Object, "spec", "readiness", "policy")
	switch policy {
	case "", "SuccessfulCreate":
	case "DeriveFromObject":
		if !remoteReady(observed) {
			available = xpCondition("Ready", "False", "Unavailable", "")
		}
	case "DeriveFromCelQuery":
		query, _, _ := unstructured.NestedString(u.Object, "spec", "readiness", "celQuery")
		ok, err := celReady(query, observed)
		switch {
		case err != nil:
			available = xpCondition("Ready", "False", "Unavailable", err.Error())
		case !ok:
			available = xpCondition("Ready", "False", "Unavailable", "")
		}
	default:
		return failed(fmt.Sprintf("the e2e fake provider does not evaluate readiness policy %q", policy))
	}
	return map[string]any{"atProvider": map[string]any{"manifest": observed}, "conditions": []any{available, synced}}
}

// remoteObject is a manifest as the claimed cluster's API server returns it once created:
// identity and timestamps (derived from the Object's, so they stay stable), a Namespace Active,
// the access check's Pod as its kubelet reports it (pod), the final check's Deployment available,
// a Kustomization as its Flux reports it. (The final check's finalizer does not hold the fake's
// deletion: TestRealProviderKubernetes proves it in a real claimed cluster.)
func (f *fakeProvider) remoteObject(o *unstructured.Unstructured, manifest map[string]any, w want) map[string]any {
	obj := (&unstructured.Unstructured{Object: manifest}).DeepCopy()
	created := o.GetCreationTimestamp().UTC().Format(time.RFC3339)
	obj.SetUID(types.UID("remote-" + string(o.GetUID())))
	obj.SetResourceVersion("1")
	_ = unstructured.SetNestedField(obj.Object, created, "metadata", "creationTimestamp")
	switch obj.GetKind() {
	case "Namespace":
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels["kubernetes.io/metadata.name"] = obj.GetName()
		obj.SetLabels(labels)
		_ = unstructured.SetNestedStringSlice(obj.Object, []string{"kubernetes"}, "spec", "finalizers")
		obj.Object["status"] = map[string]any{"phase": "Active"}
	case "Pod":
		f.pod(o, obj, w)
	case "Deployment":
		// The final check's, as kube-controller-manager reports it once kwok runs its Pod.
		obj.SetGeneration(1)
		obj.Object["status"] = map[string]any{"observedGeneration": int64(1), "replicas": int64(1), "readyReplicas": int64(1), "availableReplicas": int64(1)}
	case "Kustomization":
		obj.SetGeneration(1)
		obj.SetFinalizers([]string{fluxFinalizer})
		obj.Object["status"] = kustomizationStatus(1)
	}
	return obj.Object
}

// nodesKustomization is the composition resource name of the Object whose Kustomization applies
// the NodePools (API: see docs/design.md).
const nodesKustomization = "nodes-kustomization"

// observeOnly tells whether an Object only observes its manifest while it lives: its
// managementPolicies hold neither Create nor Update nor * ([Observe], or [Observe, Delete]).
func observeOnly(u *unstructured.Unstructured) bool {
	policies, found, _ := unstructured.NestedStringSlice(u.Object, "spec", "managementPolicies")
	if !found {
		policies = nil // unset: the default ["*"]
	}
	return !scope.AppliesManifest(policies)
}

// observeOnlyStatus is what provider-kubernetes reports of an observe-only Object: it never
// creates the object, it reads it from the claimed cluster. Of a NodePool, the claimed cluster
// holds one once its Flux applied the nodes Kustomization (the test made that Object Ready):
// spec.limits as the Kustomization's patch for that pool sets them, and the status its Karpenter
// reports of an empty pool (the tests that report a pool's use run a real claimed cluster:
// TestWalkToReady); Ready and
// Synced True (no readiness policy: SuccessfulCreate). Of an EC2NodeClass likewise, once applied,
// as Karpenter's validation leaves it (ValidationSucceeded True). The kube-system Namespace (a lease's)
// always exists. Until then, or of any other kind, the
// object does not exist, and the managed reconciler of crossplane-runtime refuses to create it:
// Synced=False "observe failed: external resource does not exist", nothing at atProvider.
func (f *fakeProvider) observeOnlyStatus(u *unstructured.Unstructured, manifest map[string]any, w want, nodes *unstructured.Unstructured) map[string]any {
	absent := map[string]any{"conditions": []any{xpCondition("Synced", "False", "ReconcileError", "observe failed: external resource does not exist")}}
	if name, _, _ := unstructured.NestedString(manifest, "metadata", "name"); manifest["kind"] == "Namespace" && name == "kube-system" {
		// A lease: every cluster has kube-system.
		obj := (&unstructured.Unstructured{Object: manifest}).DeepCopy()
		obj.SetUID(types.UID("remote-kube-system"))
		obj.Object["status"] = map[string]any{"phase": "Active"}
		return map[string]any{"atProvider": map[string]any{"manifest": obj.Object},
			"conditions": []any{xpCondition("Ready", "True", "Available", ""), xpCondition("Synced", "True", "ReconcileSuccess", "")}}
	}
	if manifest["kind"] != "NodePool" && manifest["kind"] != "EC2NodeClass" || nodes == nil || nodes.GetDeletionTimestamp() != nil {
		return absent
	}
	applied, ok := f.wantFor(nodes)
	if !ok || applied.state != ready {
		return absent
	}
	name, _, _ := unstructured.NestedString(manifest, "metadata", "name")
	if manifest["kind"] == "EC2NodeClass" {
		// The class as Karpenter's own validation left it: its dry runs passed.
		obj := (&unstructured.Unstructured{Object: manifest}).DeepCopy()
		obj.SetUID(types.UID("remote-" + string(u.GetUID())))
		at := u.GetCreationTimestamp().UTC().Format(time.RFC3339)
		obj.Object["status"] = map[string]any{"conditions": []any{
			map[string]any{"type": "ValidationSucceeded", "status": "True", "reason": "ValidationSucceeded", "message": "", "observedGeneration": int64(1), "lastTransitionTime": at},
			map[string]any{"type": "Ready", "status": "True", "reason": "Ready", "message": "", "observedGeneration": int64(1), "lastTransitionTime": at},
		}}
		return map[string]any{"atProvider": map[string]any{"manifest": obj.Object},
			"conditions": []any{xpCondition("Ready", "True", "Available", ""), xpCondition("Synced", "True", "ReconcileSuccess", "")}}
	}
	limits, found := nodePoolLimits(nodes, name)
	if !found {
		return absent // the Kustomization applies no NodePool of that name
	}
	report := poolReport{cpu: "0", memory: "0"}
	obj := (&unstructured.Unstructured{Object: manifest}).DeepCopy()
	obj.SetUID(types.UID("remote-" + string(u.GetUID())))
	obj.SetResourceVersion("1")
	obj.SetGeneration(1)
	_ = unstructured.SetNestedField(obj.Object, u.GetCreationTimestamp().UTC().Format(time.RFC3339), "metadata", "creationTimestamp")
	if limits != nil {
		_ = unstructured.SetNestedField(obj.Object, limits, "spec", "limits")
	}
	obj.Object["status"] = map[string]any{
		"nodes":     report.nodes,
		"resources": map[string]any{"cpu": report.cpu, "memory": report.memory, "nodes": fmt.Sprint(report.nodes)},
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
			"observedGeneration": int64(1), "lastTransitionTime": u.GetCreationTimestamp().UTC().Format(time.RFC3339)}},
	}
	return map[string]any{"atProvider": map[string]any{"manifest": obj.Object},
		"conditions": []any{xpCondition("Ready", "True", "Available", ""), xpCondition("Synced", "True", "ReconcileSuccess", "")}}
}

// nodePoolLimits reads, from a nodes Kustomization Object, the spec.limits its patch of NodePool
// name sets (the patches are YAML documents in spec.forProvider.manifest.spec.patches); found is
// false when no patch targets that NodePool.
func nodePoolLimits(nodes *unstructured.Unstructured, name string) (limits map[string]any, found bool) {
	patches, _, _ := unstructured.NestedSlice(nodes.Object, "spec", "forProvider", "manifest", "spec", "patches")
	for _, p := range patches {
		pm, _ := p.(map[string]any)
		text, _ := pm["patch"].(string)
		var doc map[string]any
		if err := yaml.Unmarshal([]byte(text), &doc); err != nil || doc == nil {
			continue // a JSON patch list, or not an object
		}
		u := &unstructured.Unstructured{Object: doc}
		if u.GetKind() != "NodePool" || u.GetName() != name {
			continue
		}
		limits, _, _ = unstructured.NestedMap(doc, "spec", "limits")
		return limits, true
	}
	return nil, false
}

// remoteReady is provider-kubernetes' DeriveFromObject: the observed object's Ready condition
// is True.
func remoteReady(observed map[string]any) bool {
	conditions, _, _ := unstructured.NestedSlice(observed, "status", "conditions")
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			return m["status"] == "True"
		}
	}
	return false
}

// celReady evaluates an Object's readiness query on the observed object the way
// provider-kubernetes v1.3.1 does (internal/controller/cluster/object: one variable, object, of
// any type; ready when the result is true).
func celReady(query string, observed map[string]any) (bool, error) {
	if query == "" {
		return false, fmt.Errorf("cel query cannot be empty")
	}
	env, err := cel.NewEnv(cel.Variable("object", cel.AnyType))
	if err != nil {
		return false, err
	}
	ast, iss := env.Compile(query)
	if iss.Err() != nil {
		return false, fmt.Errorf("failed to compile query: %w", iss.Err())
	}
	if !reflect.DeepEqual(ast.OutputType(), cel.BoolType) {
		return false, fmt.Errorf("cel query must return a boolean")
	}
	program, err := env.Program(ast)
	if err != nil {
		return false, err
	}
	raw, err := json.Marshal(observed)
	if err != nil {
		return false, err
	}
	obj := map[string]any{}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return false, err
	}
	val, _, err := program.Eval(map[string]any{"object": obj})
	if err != nil {
		return false, fmt.Errorf("failed to eval the program: %w", err)
	}
	return val == celtypes.True, nil
}

// atProvider is what provider-aws reports of a kind the emulator cannot hold (emulated: only the
// EKS Pod Identity association, which moto 5.2.1 lacks): identifiers built the way AWS builds
// them, from the spec.
func atProvider(u *unstructured.Unstructured) map[string]any {
	fp, _, _ := unstructured.NestedMap(u.Object, "spec", "forProvider")
	str := func(k string) string { s, _ := fp[k].(string); return s }
	at := map[string]any{}
	if u.GetKind() == "PodIdentityAssociation" {
		at["associationArn"] = fmt.Sprintf("arn:aws:eks:%s:%s:podidentityassociation/%s/a-e2e0123456789", str("region"), testAccount, str("clusterName"))
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

// composedOf lists what exists in the API server for one XR, by composition resource name: every
// object of a composed kind, of either scope, that Crossplane labels as the XR's. For a namespaced
// XR those are in its namespace, but a cluster-scoped object labelled with its name is listed
// too, so that a test sees it (and fails) rather than overlooks it.
func composedOf(ctx context.Context, c *controlPlane, xr xrRef) (map[string]*unstructured.Unstructured, error) {
	out := map[string]*unstructured.Unstructured{}
	for _, k := range composedKinds {
		// A namespaced XR's resources are in its namespace: listing them there, not across every
		// namespace, where every load test tenant's XR has the same name.
		namespace := metav1.NamespaceAll
		if k.namespaced {
			namespace = xr.namespace
		}
		l, err := c.dyn.Resource(k.gvr).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: compositeLabel + "=" + xr.name})
		if err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("cannot list %s: %w", k.gvr.GroupResource(), err)
		}
		for i := range l.Items {
			u := &l.Items[i]
			if xr.namespace != "" && u.GetNamespace() != "" && u.GetNamespace() != xr.namespace {
				continue // another namespace's XR of the same name
			}
			name := u.GetAnnotations()[resourceNameAnno]
			if prev, dup := out[name]; dup {
				return nil, fmt.Errorf("two composed resources named %q: %s %s and %s %s", name, prev.GetKind(), prev.GetName(), u.GetKind(), u.GetName())
			}
			out[name] = u
		}
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
