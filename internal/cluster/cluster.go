// Package cluster builds the Kubernetes objects of step three: the
// controller's namespace, its ServiceAccount (the chart's own is turned off)
// and the access check, a Pod that proves under that ServiceAccount, before
// the controller starts, what Karpenter will do with its role (preflight.go),
// and the final check, which holds an uninstall until no instance of the
// cluster's is left (finalcheck.go).
//
// They belong in the claimed EKS cluster, not in the cluster Crossplane runs
// in, which may serve many: each is wrapped in a provider-kubernetes Object
// applied through the ProviderConfig that reaches the claimed cluster.
package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"

	fnresource "github.com/crossplane/function-sdk-go/resource"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/convert"
	"github.com/do-now/function-karpenter/internal/scope"
)

// Composed resource names of step three. They are API.
const (
	Namespace      fnresource.Name = "controller-namespace"
	ServiceAccount fnresource.Name = "controller-service-account"
	AccessCheck    fnresource.Name = "access-check"
)

// PodSucceeded is the access check's readiness as provider-kubernetes
// evaluates it on the observed Pod: every check passed, not merely started.
const PodSucceeded = `object.status.phase == 'Succeeded'`

// ReconciledQuery is Reconciled's query on the observed object: its
// controller's observedGeneration is its generation, and so is its Ready
// condition's, which is True. The condition's own generation matters for a
// suspended Kustomization: kustomize-controller v1.9.3 then skips the
// reconciliation yet still sets status.observedGeneration to the new
// generation while Ready is True from before (finalizeStatus), but only a
// condition it marks carries the new one (fluxcd/pkg/runtime
// conditions.Set). Each has() guards a field an object just created lacks,
// which would otherwise fail the evaluation (provider-kubernetes reports
// that as the Object's Ready message).
const ReconciledQuery = `has(object.status) && has(object.status.observedGeneration) && ` +
	`object.status.observedGeneration == object.metadata.generation && has(object.status.conditions) && ` +
	`object.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True' && ` +
	`has(c.observedGeneration) && c.observedGeneration == object.metadata.generation)`

// AccessCheckPod is the prefix of the access-check Pod's name, which ends
// in a digest of what it checks: see PodName.
const AccessCheckPod = "karpenter-access-check"

// RunAnnotation on the claim (or the namespaced XR) runs the access check
// again when its value changes: the platform engineer sets it once the
// cause of a failed check is fixed. A check that passed runs again only
// once input.accessCheck.minRunInterval has gone by (Run). The check's Pod
// carries the run it is for under the same key (RunKey).
const RunAnnotation = "socle.do-now.io/access-check-run"

// ManagedNodeLabel is set on every node Karpenter launches: the controller
// and the access check must never run on one.
const ManagedNodeLabel = "karpenter.sh/nodepool"

// Needs says which of step three's resources wait for which sibling: what
// lives in the namespace is applied once the namespace exists. The access
// check does not wait for its ServiceAccount, created alongside: should the
// Pod come first, the API server refuses it and provider-kubernetes applies
// it again a moment later, sooner than another round would.
func Needs(c *config.Config) map[fnresource.Name][]fnresource.Name {
	return map[fnresource.Name][]fnresource.Name{
		ServiceAccount:           {Namespace},
		CheckName(c):             {Namespace},
		FinalCheck:               {Namespace},
		FinalCheckRBAC:           {Namespace},
		FinalCheckRBACBinding:    {Namespace},
		FinalCheckServiceAccount: {Namespace},
	}
}

// Labels are what every manifest the function puts in the claimed cluster
// carries.
func Labels(c *config.Config) map[string]string {
	return map[string]string{
		"app.kubernetes.io/part-of":    "karpenter",
		"app.kubernetes.io/managed-by": "crossplane",
		config.ClusterLabel:            config.KubernetesName(c.Spec.Cluster.Name),
	}
}

// Manifests returns step three's objects as the claimed cluster gets them.
func Manifests(c *config.Config) map[fnresource.Name]runtime.Object {
	ns := c.Input.PodIdentity.Namespace
	labels := Labels(c)
	out := finalCheck(c, labels)
	maps.Copy(out, map[fnresource.Name]runtime.Object{
		CheckName(c): accessCheck(c, labels),
		Namespace: &corev1.Namespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels},
		},
		ServiceAccount: &corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: metav1.ObjectMeta{Name: c.Input.PodIdentity.ServiceAccount, Namespace: ns, Labels: labels},
		},
	})
	return out
}

// Readiness is how provider-kubernetes judges an Object Ready from the
// object it observes in the claimed cluster (spec.readiness).
type Readiness map[string]any

// Readiness policies.
var (
	// Created: Ready once the object exists (provider-kubernetes'
	// SuccessfulCreate, its default).
	Created Readiness
	// Reconciled: Ready once the object's own controller (Flux) has acted
	// on its current generation and found it Ready. DeriveFromObject reads
	// the Ready condition alone, which stays True for the generation before
	// a change, and provider-kubernetes re-reads a Ready Object only at its
	// poll interval (v1.3.1 cmd/provider/main.go --poll, default 10m), an
	// unready one every 30s ± 10% (internal/controller/cluster/object/
	// object.go, its poll interval hook): read right after the apply, a
	// changed Kustomization stayed Ready at the generation before, and the
	// step waited for the next poll. Reconciled keeps it unready, so
	// re-read within 30s, until Flux has acted.
	Reconciled = Readiness{"policy": "DeriveFromCelQuery", "celQuery": ReconciledQuery}
	// Succeeded: Ready once the access check's Pod succeeded. (Available,
	// the final check's, is in finalcheck.go.)
	Succeeded = Readiness{"policy": "DeriveFromCelQuery", "celQuery": PodSucceeded}
)

// Objects returns step three: each manifest in a provider-kubernetes Object
// bound to the claimed cluster's ProviderConfig.
func Objects(c *config.Config) (map[fnresource.Name]runtime.Object, error) {
	out := map[fnresource.Name]runtime.Object{}
	readiness := map[fnresource.Name]Readiness{CheckName(c): Succeeded, FinalCheck: Available}
	for name, m := range Manifests(c) {
		o, err := Object(c, m, readiness[name])
		if err != nil {
			return nil, fmt.Errorf("cannot convert the %s manifest: %w", name, err)
		}
		out[name] = o
	}
	return out, nil
}

// Object wraps a manifest for the claimed cluster in a provider-kubernetes
// Object (the claim API's kind, which scope turns into the XR's), applied
// Object wraps a manifest for the claimed cluster in a provider-kubernetes
// Object (the claim API's kind, which scope turns into the XR's), applied
// through the cluster's ProviderConfig and judged Ready as r says.
func Object(c *config.Config, m runtime.Object, r Readiness) (*unstructured.Unstructured, error) {
	// Converted as the SDK converts composed resources, so empty structs
	// are omitted and the manifest says only what we mean.
	cd, err := convert.Composed(m)
	if err != nil {
		return nil, err
	}
	manifest := cd.Object
	delete(manifest, "status") // the cluster's to write, not ours
	objSpec := map[string]any{
		"forProvider":       map[string]any{"manifest": manifest},
		"providerConfigRef": map[string]any{"name": c.Delivery().ProviderConfig},
	}
	if r != nil {
		objSpec["readiness"] = map[string]any(r)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": scope.Kubernetes,
		"kind":       scope.ObjectKind,
		"spec":       objSpec,
	}}, nil
}

// accessCheck is the access check's Pod: the preflight's script, once, on
// the controller's ServiceAccount and where the controller runs. A Pod,
// not a Job: its status carries the container's termination message, where
// a failed check writes its name and AWS's own error text, and its name is
// fixed, so the Object observes it. It is never restarted: a check that
// failed for a passing cause is tried again as a new Pod (Attempt); any
// other failure stays until what it checks or RunAnnotation changes.
func accessCheck(c *config.Config, labels map[string]string) *corev1.Pod {
	pod := builtPod(c)
	annotations := map[string]string{AttemptAnnotation: strconv.Itoa(attempt(c))}
	// Only when one was asked for: the Pods of before carry none, and
	// each keeps its manifest.
	if c.AccessCheckRun != "" {
		annotations[RunAnnotation] = c.AccessCheckRun
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: podName(pod, c.AccessCheckRun, attempt(c)), Namespace: c.Input.PodIdentity.Namespace, Labels: labels,
			Annotations: annotations},
		// A copy: the Pod is converted, and may be changed, on its own.
		Spec: *pod.Spec.DeepCopy(),
	}
}

// Prepare builds the access check's Pod spec once c is complete, so that
// the parts of one call that name or build the Pod (Attempt, PodName,
// Objects) build it once: built three times, its preflight script and
// digest were a tenth of the function's work on a changed request
// (docs/performance.md). Nothing the spec reads may change in c after;
// AccessCheckAttempt is not read.
func Prepare(c *config.Config) {
	c.AccessCheck = nil
	c.AccessCheck = builtPod(c)
}

// builtPod is the access check's Pod spec, as Prepare kept it or built now.
func builtPod(c *config.Config) *config.AccessCheckPod {
	if c.AccessCheck != nil {
		return c.AccessCheck
	}
	spec := accessCheckSpec(c)
	b, _ := json.Marshal(spec) // a PodSpec always marshals
	return &config.AccessCheckPod{Spec: spec, JSON: b}
}

func attempt(c *config.Config) int { return max(c.AccessCheckAttempt, 1) }

func accessCheckSpec(c *config.Config) corev1.PodSpec {
	nonRoot := int64(65532)
	yes, no := true, false
	script, _ := Preflight(c)
	return corev1.PodSpec{
		ServiceAccountName: c.Input.PodIdentity.ServiceAccount,
		// The check needs no Kubernetes API: EKS Pod Identity brings its
		// AWS credentials through a projected volume of its own (as AWS's
		// sample-eks-nitro-sandbox service-account.yaml relies on, with
		// automountServiceAccountToken false).
		AutomountServiceAccountToken: &no,
		RestartPolicy:                corev1.RestartPolicyNever,
		ActiveDeadlineSeconds:        c.Input.AccessCheck.ActiveDeadlineSeconds,
		NodeSelector:                 c.Input.Controller.NodeSelector,
		Tolerations:                  c.Input.Controller.Tolerations,
		Affinity:                     NotOnManagedNodes(),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   &yes,
			RunAsUser:      &nonRoot,
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers: []corev1.Container{{
			Name:                     "aws",
			Image:                    c.Input.AccessCheck.Image,
			Command:                  []string{"/bin/sh", "-c", script},
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			Env:                      append(awsEnv(c), clusterVersion(c)...),
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: &no,
				ReadOnlyRootFilesystem:   &yes,
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
			VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
			Resources:    AccessCheckResources(),
		}},
		Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}
}

// awsEnv is what the AWS CLI is run with in the claimed cluster: the
// cluster's region, its regional STS endpoint, no pager, a writable home.
func awsEnv(c *config.Config) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "AWS_REGION", Value: c.Spec.Cluster.Region},
		{Name: "AWS_STS_REGIONAL_ENDPOINTS", Value: "regional"},
		{Name: "AWS_PAGER", Value: ""},
		{Name: "HOME", Value: "/tmp"},
	}
}

// PodName is the access check's Pod's name: it ends in a digest of the
// Pod's spec and of its run. A Pod cannot be changed, so a change of what
// the check checks, a new run or a new attempt is a new Pod, which runs the
// checks again, in a composed Object of its own (Place): Crossplane deletes
// the Object of the Pod it supersedes, and provider-kubernetes its Pod.
func PodName(c *config.Config) string {
	return podName(builtPod(c), c.AccessCheckRun, attempt(c))
}

func podName(pod *config.AccessCheckPod, run string, attempt int) string {
	return AccessCheckPod + "-" + accessCheckDigest(pod, run, attempt)
}

// accessCheckDigest is a digest of the Pod's spec, its run and, after the
// first, the attempt.
func accessCheckDigest(pod *config.AccessCheckPod, run string, attempt int) string {
	h := sha256.New()
	h.Write(pod.JSON)
	h.Write([]byte{0})
	h.Write([]byte(run))
	if attempt > 1 {
		h.Write([]byte{0})
		h.Write([]byte(strconv.Itoa(attempt)))
	}
	return hex.EncodeToString(h.Sum(nil))[:10]
}

// AccessCheckResources are the access check's fixed requests and limits:
// enough for the AWS CLI, small beside what a system node holds.
func AccessCheckResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
}

// NotOnManagedNodes keeps a pod off every node Karpenter manages.
func NotOnManagedNodes() *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: ManagedNodeLabel, Operator: corev1.NodeSelectorOpDoesNotExist}},
			}},
		},
	}}
}

// clusterVersion is the Kubernetes version AWS reports for the cluster,
// once observed, which the Pod carries so that a control-plane upgrade
// runs every check again (its AMIs above all) as a new Pod.
func clusterVersion(c *config.Config) []corev1.EnvVar {
	if c.ClusterVersion == "" {
		return nil
	}
	return []corev1.EnvVar{{Name: "EKS_CLUSTER_VERSION", Value: c.ClusterVersion}}
}
