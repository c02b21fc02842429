// Package flux builds the Flux Kustomizations of steps four and five: one
// installs the Karpenter controller (a HelmRelease of the chart from the
// GitOps base, with the claim's values), the other the node pools, after the
// controller and removed before it. Both go to the claimed cluster inside
// provider-kubernetes Objects, like step three's objects, and the cluster's
// own Flux reconciles them: no kubeconfig Secret, no kustomize-controller
// next to Crossplane, the cluster's ProviderConfig the one credential.
package flux

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/crossplane/function-sdk-go/resource"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/kustomize"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/do-now/function-karpenter/internal/cluster"
	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/nodepools"
	"github.com/do-now/function-karpenter/internal/versions"
)

// Composed resource names of steps four and five. They are API.
const (
	ControllerKustomization resource.Name = "controller-kustomization"
	NodesKustomization      resource.Name = "nodes-kustomization"
)

// The HelmRelease of the controller base, which the values patch targets.
const (
	HelmReleaseName = "karpenter"
	helmGroup       = "helm.toolkit.fluxcd.io"
	helmVersion     = "v2"
)

// Substitution variables the bases use.
const (
	VarKarpenterVersion = "KARPENTER_VERSION"
	VarClusterName      = "CLUSTER_NAME"
	VarInstanceProfile  = "NODE_INSTANCE_PROFILE"
	VarRootVolumeSize   = "ROOT_VOLUME_SIZE"
)

// Names returns the names of a cluster's two Kustomizations.
func Names(c *config.Config) (controller, nodes string) {
	base := config.KubernetesName(c.Spec.Cluster.Name) + "-karpenter"
	return base + "-controller", base + "-nodes"
}

// Controller returns step four: the Object carrying the controller's
// Kustomization for Karpenter v, Ready once the Kustomization is.
func Controller(c *config.Config, v versions.Version) (map[resource.Name]runtime.Object, error) {
	k, err := ControllerManifest(c, v)
	if err != nil {
		return nil, err
	}
	return inObject(c, ControllerKustomization, k)
}

// Nodes returns step five: the Object carrying the node pools'
// Kustomization for Karpenter v, Ready once the Kustomization is.
func Nodes(c *config.Config, v versions.Version) (map[resource.Name]runtime.Object, error) {
	k, err := NodesManifest(c, v)
	if err != nil {
		return nil, err
	}
	return inObject(c, NodesKustomization, k)
}

// inObject wraps a Kustomization in the Object that applies it to the
// claimed cluster. The Object is Ready once Flux has acted on the
// Kustomization's current generation and found it Ready (cluster.Reconciled),
// and deleting it deletes the Kustomization and waits
// until it is gone: until Flux has deleted what it applied.
func inObject(c *config.Config, name resource.Name, k *kustomizev1.Kustomization) (map[resource.Name]runtime.Object, error) {
	o, err := cluster.Object(c, k, cluster.Reconciled)
	if err != nil {
		return nil, fmt.Errorf("cannot wrap Kustomization %s: %w", k.Name, err)
	}
	return map[resource.Name]runtime.Object{name: o}, nil
}

// ControllerManifest is the Kustomization that installs the controller of
// Karpenter v: its chart, with the values of v. Wait makes its Ready mean
// the HelmRelease, and so the controller's Deployment, is healthy.
func ControllerManifest(c *config.Config, v versions.Version) (*kustomizev1.Kustomization, error) {
	name, _ := Names(c)
	values, err := json.Marshal([]jsonPatch{{Op: "add", Path: "/spec/values", Value: ControllerValues(c, v)}})
	if err != nil {
		return nil, fmt.Errorf("cannot marshal the controller values patch: %w", err)
	}
	k := kustomization(c, name, c.Input.Flux.ControllerPath)
	k.Spec.TargetNamespace = c.Input.PodIdentity.Namespace
	k.Spec.PostBuild = &kustomizev1.PostBuild{Substitute: map[string]string{VarKarpenterVersion: v.Chart}}
	k.Spec.Patches = []kustomize.Patch{{
		Patch:  string(values),
		Target: &kustomize.Selector{Group: helmGroup, Version: helmVersion, Kind: "HelmRelease", Name: HelmReleaseName},
	}, {
		Patch: helmReleaseMustExist,
	}}
	return k, nil
}

// helmReleaseMustExist is a strategic merge patch of the HelmRelease's
// identity alone: it changes nothing, and fails the build of a base that
// lacks the HelmRelease. The values patch cannot: kustomize applies a JSON
// 6902 patch to every resource its target selects and to none without an
// error (sigs.k8s.io/kustomize/api v0.21.1, which kustomize-controller
// v1.9.3 builds with: internal/builtins/PatchTransformer.go,
// transformJson6902), so a base whose HelmRelease is renamed would install
// Karpenter with none of the claim's values, or nothing, and the
// Kustomization would still be Ready. A strategic merge patch without a
// target fails when no resource has its identity (transformStrategicMerge).
var helmReleaseMustExist = fmt.Sprintf("apiVersion: %s/%s\nkind: HelmRelease\nmetadata:\n  name: %s\n", helmGroup, helmVersion, HelmReleaseName)

// NodesManifest is the Kustomization of the node pools, built for the
// controller of Karpenter v (which it records as KARPENTER_VERSION, so an
// upgrade can tell which version they were last built for). It depends on
// the controller's, and on deletion waits, up to its timeout, until
// Karpenter has deleted the NodePools and EC2NodeClasses. That wait is not
// what keeps an uninstall from stranding an instance: Flux gives up after
// its timeout, and the Usages of package usage hold the controller until
// every EC2NodeClass is gone, however long that takes.
func NodesManifest(c *config.Config, v versions.Version) (*kustomizev1.Kustomization, error) {
	controller, name := Names(c)
	patches, err := nodepools.Patches(c)
	if err != nil {
		return nil, err
	}
	k := kustomization(c, name, c.Input.Flux.NodesPath)
	k.Spec.DependsOn = []kustomizev1.DependencyReference{{Name: controller}}
	k.Spec.DeletionPolicy = kustomizev1.DeletionPolicyWaitForTermination
	k.Spec.PostBuild = &kustomizev1.PostBuild{Substitute: map[string]string{
		VarKarpenterVersion: v.Chart,
		VarClusterName:      c.Spec.Cluster.Name,
		VarInstanceProfile:  c.Spec.NodeIdentity.InstanceProfile,
		VarRootVolumeSize:   c.Input.Nodes.RootVolumeSize,
	}}
	k.Spec.Patches = patches
	return k, nil
}

func kustomization(c *config.Config, name, path string) *kustomizev1.Kustomization {
	// Validated as positive durations by config.Load.
	interval, _ := time.ParseDuration(c.Input.Flux.Interval)
	timeout, _ := time.ParseDuration(c.Input.Flux.Timeout)
	retry, _ := time.ParseDuration(c.Input.Flux.RetryInterval)
	src := c.Delivery().FluxSource
	return &kustomizev1.Kustomization{
		TypeMeta: metav1.TypeMeta{APIVersion: kustomizev1.GroupVersion.String(), Kind: kustomizev1.KustomizationKind},
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: c.Input.Flux.Namespace,
			Labels:    cluster.Labels(c),
		},
		Spec: kustomizev1.KustomizationSpec{
			Interval:      metav1.Duration{Duration: interval},
			RetryInterval: &metav1.Duration{Duration: retry},
			Timeout:       &metav1.Duration{Duration: timeout},
			Path:          path,
			Prune:         true,
			Wait:          true,
			SourceRef:     kustomizev1.CrossNamespaceSourceReference{Kind: src.Kind, Name: src.Name, Namespace: src.Namespace},
			// What kustomize-controller applies, prunes and deletes is
			// what the platform grants this ServiceAccount, not all that
			// its own identity may.
			ServiceAccountName: c.Input.Flux.ServiceAccountName,
		},
	}
}

// jsonPatch is one RFC 6902 operation. The values go in as one JSON patch
// that replaces spec.values whole, so nothing of the base's values survives
// by accident of a merge.
type jsonPatch struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}
