package main

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	xpv1 "github.com/crossplane/crossplane-runtime/v2/apis/common/v1"
	"github.com/crossplane/function-sdk-go/errors"
	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	cd "github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/crossplane/function-sdk-go/response"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"

	"github.com/do-now/function-karpenter/apis/v1alpha1"
	"github.com/do-now/function-karpenter/internal/awsres"
	"github.com/do-now/function-karpenter/internal/cache"
	"github.com/do-now/function-karpenter/internal/cluster"
	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/guard"
	"github.com/do-now/function-karpenter/internal/poolstatus"
	"github.com/do-now/function-karpenter/internal/requeue"
	"github.com/do-now/function-karpenter/internal/scope"
	"github.com/do-now/function-karpenter/internal/sequence"
	"github.com/do-now/function-karpenter/internal/status"
	"github.com/do-now/function-karpenter/internal/tenancy"
	"github.com/do-now/function-karpenter/internal/upgrade"
	"github.com/do-now/function-karpenter/internal/usage"
)

// Function composes Karpenter for one XKarpenter.
type Function struct {
	fnv1.UnimplementedFunctionRunnerServiceServer

	log logging.Logger
	// debug: log each call's outcome (whether answered from the cache).
	debug bool
	// cache, when set, answers a request answered before with the same
	// response (see internal/cache).
	cache *cache.Responses
	// clock paces a claim that waits (see internal/requeue); time.Now when
	// nil.
	clock func() time.Time
	// pending holds the cached response of each request the gRPC codec
	// found in the cache while decoding it (see wire), by request.
	pending sync.Map
	// decoded holds the observed composed resources of each request the
	// gRPC codec decoded apart (see observedApart), by request.
	decoded sync.Map
	// answers counts the calls answered, by how (see answersMetric); nil
	// when not served.
	answers *prometheus.CounterVec
}

// answersMetric counts RunFunction's answers by how each was made: "cache"
// (a request answered before, unchanged) or "composed". A settled XR's
// reconciles should all be "cache"; one that keeps being composed is changing
// (docs/operating.md). Served beside the SDK's gRPC metrics.
func answersMetric() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "function_karpenter_answers_total",
		Help: "RunFunction answers, by how each was made: from the cache (an unchanged request) or composed.",
	}, []string{"from"})
}

// answered counts one answer made from (cache or composed).
func (f *Function) answered(from string) {
	if f.answers != nil {
		f.answers.WithLabelValues(from).Inc()
	}
}

// RunFunction reads the XR and what exists, and answers with the resources of
// every step whose prerequisites are Ready plus every resource that exists.
// Failures are Fatal results; it never returns an error. The response is
// shared with the cache: callers must not modify it. Its desired composed
// resources are protobuf Structs only when the request did not come through
// the function's codec; otherwise, and in any answer the cache keeps of such
// a request, each is held encoded (setDesiredEncoded): read it only through
// its encoding, never as a Struct, nor compare it with proto.Equal.
func (f *Function) RunFunction(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	if rsp, ok := f.pending.LoadAndDelete(req); ok {
		// Found in the cache as the request was decoded (see wire): the
		// request holds only its tag, so the log names no XR.
		f.answered("cache")
		if f.debug {
			f.log.Debug("answered from the cache", "tag", req.GetMeta().GetTag())
		}
		return rsp.(*fnv1.RunFunctionResponse), nil
	}
	objects, _ := f.decoded.LoadAndDelete(req)
	if req.GetObserved() == nil && cache.IsDigest(req.GetMeta().GetTag()) {
		// Crossplane always sends the observed XR: this is a request wire
		// left partly decoded, whose answer is no longer put aside. It is
		// never composed (nor its answer cached): Crossplane retries the
		// call, applying nothing meanwhile.
		return nil, grpcstatus.Error(codes.Unavailable, "the request's cached answer is gone; call again")
	}
	if f.cache == nil {
		rsp, _ := f.compose(req, objects)
		f.answered("composed")
		return rsp, nil
	}
	key, err := cache.Key(req)
	if err != nil {
		// Not cacheable, still answerable.
		rsp, _ := f.compose(req, objects)
		f.answered("composed")
		return rsp, nil
	}
	if rsp, ok := f.cache.Get(key); ok {
		f.answered("cache")
		if f.debug {
			f.log.Debug("answered from the cache", "xr", cache.XR(req), "tag", req.GetMeta().GetTag())
		}
		return rsp, nil
	}
	rsp, kind := f.compose(req, objects)
	f.answered("composed")
	if f.debug {
		f.log.Debug("composed", "xr", cache.XR(req), "tag", req.GetMeta().GetTag(), "answer", string(kind))
	}
	if kind != paced {
		// An XR's first call and its composed answer each have a slot of
		// their own, so a reconcile of two calls evicts neither.
		if err := f.cache.Put(cache.XR(req)+string(kind), key, rsp); err != nil {
			f.log.Info("cannot cache a response", "error", err.Error())
		}
	}
	return rsp, nil
}

func (f *Function) now() time.Time {
	if f.clock == nil {
		return time.Now()
	}
	return f.clock()
}

// What kind of answer compose gave, and so how the cache keeps it.
type answer string

const (
	// composed: a function of the request alone.
	composed answer = ""
	// asking: only the requirements of a call Crossplane answers next.
	asking answer = "#asking"
	// paced: a claim that waits, whose TTL depends on the clock; never
	// cached.
	paced answer = "#paced"
)

// observedOf reads the request's observed composed resources: objects, as
// the gRPC codec decoded them apart (map[string]map[string]any), or from the
// request, as the SDK reads them.
func observedOf(req *fnv1.RunFunctionRequest, objects any) (map[resource.Name]resource.ObservedComposed, error) {
	apart, ok := objects.(map[string]map[string]any)
	if !ok {
		return request.GetObservedComposedResources(req)
	}
	out := make(map[resource.Name]resource.ObservedComposed, len(apart))
	for name, r := range req.GetObserved().GetResources() {
		ocd := resource.ObservedComposed{Resource: cd.New(), ConnectionDetails: r.GetConnectionDetails()}
		if ocd.ConnectionDetails == nil {
			ocd.ConnectionDetails = make(resource.ConnectionDetails)
		}
		ocd.Resource.Object = apart[name]
		out[resource.Name(name)] = ocd
	}
	return out, nil
}

// compose is RunFunction without the cache; objects are the request's
// observed composed resources as the gRPC codec decoded them apart, if it
// did (observedOf), and then only gRPC reads the response: its desired
// composed resources are kept encoded (setDesiredEncoded). Its response is a
// function of the request alone, except the TTL of a claim that waits:
// kind says which.
func (f *Function) compose(req *fnv1.RunFunctionRequest, objects any) (rsp *fnv1.RunFunctionResponse, kind answer) {
	rsp, kind = response.To(req, requeue.Settled), composed
	// The response must not share the request's state: the SDK's setters
	// modify it in place, and a cached response is shared.
	rsp.Desired, rsp.Context = proto.CloneOf(req.GetDesired()), proto.CloneOf(req.GetContext())

	oxr, err := request.GetObservedCompositeResource(req)
	if err != nil {
		response.Fatal(rsp, errors.Wrap(err, "cannot get observed composite resource"))
		return rsp, composed
	}
	log := f.log.WithValues("xr-kind", oxr.Resource.GetKind(), "xr-namespace", oxr.Resource.GetNamespace(), "xr-name", oxr.Resource.GetName())

	xr, err := scope.Read(oxr.Resource.Object)
	if err != nil {
		log.Info("refusing an XR of no API the function serves", "error", err.Error())
		refuse(rsp, oxr, ReasonInvalid, errors.Wrapf(err, "invalid %s %q: apiVersion", oxr.Resource.GetKind(), oxr.Resource.GetName()))
		return rsp, composed
	}
	if errs := tenancy.Pinned(oxr.Resource.Object, xr.API); len(errs) > 0 {
		log.Info("refusing XR", "error", errs.ToAggregate().Error())
		refuse(rsp, oxr, ReasonRefused, errors.Errorf("refusing %s %q: %s", oxr.Resource.GetKind(), oxr.Resource.GetName(), errs.ToAggregate().Error()))
		return rsp, composed
	}
	xrSpec, _ := oxr.Resource.Object["spec"].(map[string]any)
	cfg, errs := config.Load(config.OwnerOf(oxr.Resource.Object, xr.API), xrSpec, req.GetInput())
	if len(errs) > 0 {
		log.Info("refusing invalid XR or input", "error", errs.ToAggregate().Error())
		refuse(rsp, oxr, ReasonInvalid, errors.Errorf("invalid %s %q: %s", oxr.Resource.GetKind(), oxr.Resource.GetName(), errs.ToAggregate().Error()))
		return rsp, composed
	}
	cfg.XR = xr
	cfg.AccessCheckRun = cluster.RunKey(oxr.Resource.GetAnnotations()[cluster.RunAnnotation])
	// A claim that waits on nothing is reconciled again after the
	// platform's interval; one that waits is paced below.
	rsp.GetMeta().Ttl = durationpb.New(cfg.Settled())

	// Which XRs hold or ask for the cluster: asked of Crossplane on every
	// call, judged once it answered.
	reqs, rivals, done := tenancy.Ask(cfg, xr, req)
	// The claim, whose annotation confirms a guarded deletion.
	if sel, ok := guard.ClaimSelector(cfg, &oxr.Resource.Unstructured); ok {
		reqs[guard.ClaimRequirement] = sel
		if _, answered := req.GetRequiredResources()[guard.ClaimRequirement]; !answered {
			done = false
		}
	}
	rsp.Requirements = &fnv1.Requirements{Resources: reqs}
	if !done {
		// Crossplane calls again, in the same reconcile, with the answer,
		// and applies only that call's response: this one is discarded
		// whole. So it says what it requires and nothing else.
		return rsp, asking
	}

	observed, err := observedOf(req, objects)
	if err != nil {
		response.Fatal(rsp, errors.Wrap(err, "cannot get observed composed resources"))
		return rsp, composed
	}
	// Only what the XR controls is its own: everything below reads,
	// keeps and answers that alone.
	observed, foreign := tenancy.Own(xr, observed)
	if len(foreign) > 0 {
		log.Debug("ignoring observed resources the XR does not control", "resources", foreign)
	}
	reported := awsres.ReadObserved(observed)
	cfg.ClusterVersion = reported.ClusterVersion
	cfg.ClusterVPC = awsres.KnownVPC(reported, observed)
	errs = append(tenancy.Check(cfg, cfg.Owner.Namespace), awsres.CheckIdentity(cfg, observed)...)
	errs = append(errs, cfg.CheckAMIsServe()...)
	if e := tenancy.Bound(oxr.Resource.Object, xr.API, observed); e != nil {
		errs = append(errs, e)
	}
	hold, e := tenancy.Holds(cfg, rivals, observed, f.now())
	if e != nil {
		errs = append(errs, e)
	}
	plan, e := upgrade.Decide(cfg, observed)
	if e != nil {
		errs = append(errs, e)
	}
	// The version this call composes for: the claim's, or for a claim that
	// names none, what it runs when the platform's default is older.
	cfg.Spec.Version = v1alpha1.KarpenterVersion(plan.To)
	errs = append(errs, cfg.CheckVersionServes(plan.To)...)
	if len(errs) > 0 {
		log.Info("refusing XR", "error", errs.ToAggregate().Error())
		refuse(rsp, oxr, ReasonRefused, errors.Errorf("refusing %s %q: %s", oxr.Resource.GetKind(), oxr.Resource.GetName(), errs.ToAggregate().Error()))
		return rsp, composed
	}
	// The config is complete: the access check's Pod, which the next
	// three calls name or build, is built once.
	cluster.Prepare(cfg)
	// A new run asked for starts after a failure, or long enough after a
	// pass; a check that failed for a passing cause runs again, as a new
	// Pod, once its backoff is over. Each Pod has an Object of its own, and
	// the one it supersedes goes.
	_, check := cluster.ObservedCheck(observed)
	runIn, runNote := cluster.Run(cfg, check, f.now())
	attempt, retryIn := cluster.Attempt(cfg, check, f.now())
	cfg.AccessCheckAttempt = attempt
	cluster.Place(cfg, observed)
	sequence.ProvenFirst(cfg, observed, &plan.Parts)
	clusterLabels := map[string]string{config.ClusterLabel: config.KubernetesName(cfg.Spec.Cluster.Name)}
	out, err := sequence.Run(sequence.Steps(cfg, reported, plan.Parts, observed, hold), observed, clusterLabels)
	if err != nil {
		response.Fatal(rsp, err)
		return rsp, composed
	}
	usages := usage.Usages(out.Refs, observed, clusterLabels)
	if changed := sequence.KindChanges(observed, out.Desired, usages); len(changed) > 0 {
		err := errors.Errorf("refusing %s %q: Crossplane cannot change the kind of a composed resource: %s; "+
			"orphan and delete the old ones as docs/operating.md \"Upgrading an existing installation\" says, and the claim goes on",
			oxr.Resource.GetKind(), oxr.Resource.GetName(), strings.Join(changed, "; "))
		log.Info("refusing XR", "error", err.Error())
		refuse(rsp, oxr, ReasonRefused, err)
		return rsp, composed
	}
	response.ConditionTrue(rsp, ConditionAccepted, ReasonAccepted).
		WithMessage(fmt.Sprintf("Karpenter for cluster %q in %s", cfg.Spec.Cluster.Name, cfg.Spec.Cluster.Region)).
		TargetCompositeAndClaim()
	desired, err := request.GetDesiredComposedResources(req)
	if err != nil {
		response.Fatal(rsp, errors.Wrap(err, "cannot get desired composed resources"))
		return rsp, composed
	}
	maps.Copy(desired, out.Desired)
	maps.Copy(desired, usages)
	pools, poolsCondition := poolstatus.Read(cfg, observed)
	if g := guard.Usage(cfg, &oxr.Resource.Unstructured, pools, observed, guard.Confirmed(cfg, &oxr.Resource.Unstructured, req), clusterLabels); g != nil {
		desired[guard.Name] = g
	}
	setDesired := response.SetDesiredComposedResources
	if objects != nil {
		setDesired = setDesiredEncoded
	}
	if err := setDesired(rsp, desired); err != nil {
		response.Fatal(rsp, errors.Wrap(err, "cannot set desired composed resources"))
		return rsp, composed
	}

	dxr, err := request.GetDesiredCompositeResource(req)
	if err != nil {
		response.Fatal(rsp, errors.Wrap(err, "cannot get desired composite resource"))
		return rsp, composed
	}
	if err := status.Write(dxr.Resource, cfg, reported, pools); err != nil {
		response.Fatal(rsp, errors.Wrap(err, "cannot write composite resource status"))
		return rsp, composed
	}
	if !out.Ready || plan.Upgrading {
		// Crossplane would otherwise call the XR Ready as soon as everything
		// emitted so far is, while later steps are still withheld, or while
		// a part still runs another version than the claim's.
		dxr.Ready = resource.ReadyFalse
		ttl := requeue.Waiting(f.now(), out.Unready, observed)
		if retryIn > 0 {
			ttl = min(ttl, retryIn)
		}
		rsp.GetMeta().Ttl = durationpb.New(ttl)
		kind = paced
	}
	if runIn > 0 {
		// The new run is due then: an answer of the clock, never cached.
		rsp.GetMeta().Ttl = durationpb.New(min(rsp.GetMeta().GetTtl().AsDuration(), runIn))
		kind = paced
	}
	if err := response.SetDesiredCompositeResource(rsp, dxr); err != nil {
		response.Fatal(rsp, errors.Wrap(err, "cannot set desired composite resource"))
		return rsp, kind
	}

	if runNote != "" {
		// On AccessCheckReady's message, which keeps its reason: no event
		// for it, however many values are asked for.
		for i := range out.Conditions {
			if out.Conditions[i].Type == sequence.AccessCheckReady {
				out.Conditions[i].Message += "; " + runNote
			}
		}
	}
	conditions := append(out.Conditions, versionCondition(plan), nextMinorCondition(cfg.NextMinor(plan.To)), poolsOf(poolstatus.ConditionType, poolsCondition), poolsOf(poolstatus.ValidationType, poolstatus.Validated(cfg, observed)))
	if c, ok := tenancy.Admission(cfg, req); ok {
		conditions = append(conditions, c)
	}
	if hold.Held {
		conditions = append(conditions, sequence.Condition{Type: sequence.ConditionHeld, Ready: true, Reason: sequence.ReasonAvailable,
			Message: fmt.Sprintf("this %s holds cluster %q", cfg.XR.API.XR.Kind, cfg.Spec.Cluster.Name)})
	}
	for _, c := range conditions {
		setCondition(rsp, c)
		if changed(sequence.ConditionIn(oxr.Resource.Object, xpv1.ConditionType(c.Type)), c) {
			// Events only on transitions: a claim that waits for minutes
			// must not collect an event per reconcile.
			log.Info("step changed", "step", c.Type, "ready", c.Ready, "reason", c.Reason)
			response.Normalf(rsp, "%s: %s", c.Type, c.Message).WithReason(c.Reason).TargetCompositeAndClaim()
		}
	}
	return rsp, kind
}

// ConditionAccepted says on the XR and the claim whether the function takes
// the claim on: a refusal is a Fatal result, which Crossplane shows on the
// XR's Synced condition only, so the claim would otherwise just wait.
const ConditionAccepted = "Accepted"

// Reasons of ConditionAccepted.
const (
	ReasonAccepted = "Accepted"
	// ReasonInvalid: the claim or the platform's input does not validate.
	ReasonInvalid = "Invalid"
	// ReasonRefused: valid, but not this tenant's to claim, or a change
	// that would orphan what exists.
	ReasonRefused = "Refused"
)

// refuse answers a Fatal result, which makes Crossplane apply nothing and
// delete nothing, plus the refusal as a condition and, when it is news, a
// warning event, both on the claim too (Crossplane applies a Fatal
// response's conditions and the events before it).
func refuse(rsp *fnv1.RunFunctionResponse, oxr *resource.Composite, reason string, err error) {
	was := oxr.Resource.GetCondition(ConditionAccepted)
	if was.Status != corev1.ConditionFalse || string(was.Reason) != reason || was.Message != err.Error() {
		response.Warning(rsp, err).WithReason(reason).TargetCompositeAndClaim()
	}
	response.ConditionFalse(rsp, ConditionAccepted, reason).WithMessage(err.Error()).TargetCompositeAndClaim()
	response.Fatal(rsp, err)
}

func setCondition(rsp *fnv1.RunFunctionResponse, c sequence.Condition) {
	if c.Unknown {
		response.ConditionUnknown(rsp, c.Type, c.Reason).WithMessage(c.Message).TargetCompositeAndClaim()
		return
	}
	if c.Ready {
		response.ConditionTrue(rsp, c.Type, c.Reason).WithMessage(c.Message).TargetCompositeAndClaim()
		return
	}
	response.ConditionFalse(rsp, c.Type, c.Reason).WithMessage(c.Message).TargetCompositeAndClaim()
}

// ConditionVersion says whether every part runs the claim's Karpenter
// version, or where an upgrade is and what it waits on.
const ConditionVersion = "VersionReady"

// Reasons of ConditionVersion.
const (
	ReasonCurrent = "Current"
	// ReasonInstalling: the controller or the node pools were never
	// composed yet.
	ReasonInstalling = "Installing"
	ReasonUpgrading  = "Upgrading"
)

// ConditionNextMinor says whether the claim is ready for its cluster's next
// Kubernetes minor: read before upgrading the control plane.
const ConditionNextMinor = "NextMinorReady"

// Reasons of ConditionNextMinor.
const (
	ReasonNextMinorServed  = "Served"
	ReasonNextMinorBlocked = "NotServed"
	ReasonNextMinorUnknown = "ClusterVersionUnknown"
)

func nextMinorCondition(n config.NextMinor) sequence.Condition {
	switch {
	case !n.Known:
		return sequence.Condition{Type: ConditionNextMinor, Unknown: true, Reason: ReasonNextMinorUnknown, Message: "AWS has not reported the cluster's Kubernetes version yet"}
	case len(n.Blockers) > 0:
		return sequence.Condition{Type: ConditionNextMinor, Reason: ReasonNextMinorBlocked,
			Message: fmt.Sprintf("not ready for Kubernetes %s: %s", n.Minor, strings.Join(n.Blockers, "; "))}
	default:
		return sequence.Condition{Type: ConditionNextMinor, Ready: true, Reason: ReasonNextMinorServed,
			Message: fmt.Sprintf("the Karpenter version and every pool's AMI serve Kubernetes %s", n.Minor)}
	}
}

func versionCondition(p upgrade.Plan) sequence.Condition {
	switch {
	case p.Upgrading:
		return sequence.Condition{Type: ConditionVersion, Reason: ReasonUpgrading, Message: p.Message}
	case p.Installing:
		return sequence.Condition{Type: ConditionVersion, Reason: ReasonInstalling, Message: fmt.Sprintf("installing Karpenter %s", p.To)}
	}
	return sequence.Condition{Type: ConditionVersion, Ready: true, Reason: ReasonCurrent, Message: fmt.Sprintf("Karpenter %s", p.To)}
}

// poolsOf is what is observed of the pools as the claim's condition t:
// Unknown while nothing is observed, False when a pool is near its limits
// or Karpenter refuses one's EC2NodeClass.
func poolsOf(t string, c poolstatus.Condition) sequence.Condition {
	return sequence.Condition{Type: t, Ready: c.Within, Unknown: !c.Known, Reason: c.Reason, Message: c.Message}
}

// changed tells whether a step's state differs from what the XR shows.
func changed(was xpv1.Condition, now sequence.Condition) bool {
	status := corev1.ConditionFalse
	switch {
	case now.Unknown:
		status = corev1.ConditionUnknown
	case now.Ready:
		status = corev1.ConditionTrue
	}
	return was.Status != status || string(was.Reason) != now.Reason
}
