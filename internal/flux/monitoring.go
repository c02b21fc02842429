package flux

import (
	"github.com/crossplane/function-sdk-go/resource"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/monitoring"
)

// MonitoringKustomization is the composed resource name of the monitoring
// step. It is API.
const MonitoringKustomization resource.Name = "monitoring-kustomization"

// MonitoringName is the name of a cluster's monitoring Kustomization.
func MonitoringName(c *config.Config) string {
	return config.KubernetesName(c.Spec.Cluster.Name) + "-karpenter-monitoring"
}

// Monitoring returns the monitoring step: the Object carrying the
// Kustomization of the monitoring base. The sequence has the step only
// when the platform turns monitoring on.
func Monitoring(c *config.Config) (map[resource.Name]runtime.Object, error) {
	return inObject(c, MonitoringKustomization, MonitoringManifest(c))
}

// MonitoringManifest is the Kustomization of the monitoring base: in the
// namespace and with the labels the platform's Prometheus and Grafana
// select, the near-limits ratio substituted into the rules, and the
// controller's namespace into the PodMonitor. It depends on the
// controller's, so the rules arrive with the metrics they read; the node
// pools do not wait for it.
func MonitoringManifest(c *config.Config) *kustomizev1.Kustomization {
	controller, _ := Names(c)
	m := c.Input.Monitoring
	k := kustomization(c, MonitoringName(c), c.Input.Flux.MonitoringPath)
	k.Spec.TargetNamespace = c.MonitoringNamespace()
	if len(m.Labels) > 0 {
		k.Spec.CommonMetadata = &kustomizev1.CommonMetadata{Labels: m.Labels}
	}
	k.Spec.DependsOn = []kustomizev1.DependencyReference{{Name: controller}}
	k.Spec.PostBuild = &kustomizev1.PostBuild{Substitute: map[string]string{
		monitoring.NearLimitsVar:         m.NearLimitsRatio,
		monitoring.KarpenterNamespaceVar: c.Input.PodIdentity.Namespace,
	}}
	return k
}
