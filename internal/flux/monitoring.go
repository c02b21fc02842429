package flux

import (
	"fmt"

	"github.com/crossplane/function-sdk-go/resource"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/do-now/function-karpenter/internal/cluster"
	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/monitoring"
	"github.com/do-now/function-karpenter/internal/versions"
)

// MonitoringKustomization is the composed resource name of the monitoring
// step. It is API.
const MonitoringKustomization resource.Name = "monitoring-kustomization"

// MonitoringName is the name of a cluster's monitoring Kustomization.
func MonitoringName(c *config.Config) string {
	return config.KubernetesName(c.Spec.Cluster.Name) + "-karpenter-monitoring"
}

// Monitoring returns the monitoring step: the Object carrying the
// Kustomization of the monitoring base and, where the platform names the
// Grafana instances that import them, Karpenter v's own dashboards
// (UpstreamDashboards). The sequence has the step only when the platform
// turns monitoring on.
func Monitoring(c *config.Config, v versions.Version) (map[resource.Name]runtime.Object, error) {
	out, err := inObject(c, MonitoringKustomization, MonitoringManifest(c))
	if err != nil {
		return nil, err
	}
	for name, d := range UpstreamDashboards(c, v) {
		o, err := cluster.Object(c, d, cluster.Created)
		if err != nil {
			return nil, fmt.Errorf("cannot wrap GrafanaDashboard %s: %w", d.GetName(), err)
		}
		out[name] = o
	}
	return out, nil
}

// UpstreamDashboard is the composed resource name of Karpenter's own
// dashboard name (capacity, performance). It is API.
func UpstreamDashboard(name string) resource.Name {
	return resource.Name("upstream-dashboard-" + name)
}

// UpstreamDashboards are Karpenter v's own dashboards as grafana-operator
// v5 GrafanaDashboards (grafana.integreatly.org/v1beta1, its CRD's
// spec.url and the required spec.instanceSelector): by reference to the
// URL Karpenter's documentation publishes each at, never a copy, in the
// monitoring namespace with the monitoring labels, imported by the Grafana
// instances the platform names. None unless it names them. Ours (the
// monitoring base's) add what those lack: EC2 errors without the dry runs,
// refused launches, the interruption queue, the pools against their limits.
func UpstreamDashboards(c *config.Config, v versions.Version) map[resource.Name]*unstructured.Unstructured {
	u := c.Input.Monitoring.UpstreamDashboards
	if u == nil || len(u.InstanceLabels) == 0 {
		return nil
	}
	out := map[resource.Name]*unstructured.Unstructured{}
	for name, url := range v.Dashboards {
		labels := map[string]any{}
		for k, val := range c.Input.Monitoring.Labels {
			labels[k] = val
		}
		selector := map[string]any{}
		for k, val := range u.InstanceLabels {
			selector[k] = val
		}
		out[UpstreamDashboard(name)] = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "grafana.integreatly.org/v1beta1",
			"kind":       "GrafanaDashboard",
			"metadata": map[string]any{
				"name":      "karpenter-" + name + "-upstream",
				"namespace": c.MonitoringNamespace(),
				"labels":    labels,
			},
			"spec": map[string]any{
				"url":              url,
				"instanceSelector": map[string]any{"matchLabels": selector},
			},
		}}
	}
	return out
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
