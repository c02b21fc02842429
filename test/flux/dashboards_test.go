package flux

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/do-now/function-karpenter/internal/flux"
	"github.com/do-now/function-karpenter/internal/versions"
)

// grafanaOperator carries the GrafanaDashboard CRD of grafana-operator v5
// (v5.18.0, the newest the module proxy served on 2026-12-03: v5.20.0 and
// @latest refused, 403).
var grafanaOperator = module{"github.com/grafana/grafana-operator/v5", "v5.18.0", "h1:ei7N2VfjsRjY8iprenH1IDV783WeV7CP5VNp//sB4hI="}

// TestUpstreamDashboardsByReference: where the platform names its Grafana
// instances, every known Karpenter version's own capacity and performance
// dashboards are GrafanaDashboards that grafana-operator's CRD admits (its
// schema and CEL rules), each by its published URL, selecting those
// instances, in the monitoring namespace with the monitoring labels; where
// it names none, there are none.
func TestUpstreamDashboardsByReference(t *testing.T) {
	schemas := loadCRDs(t, grafanaOperator.file(t, "config/crd/bases/grafana.integreatly.org_grafanadashboards.yaml"))
	instances := map[string]string{"dashboards": "grafana"}
	c := load(t, nil, edits{}.with("monitoring.upstreamDashboards", map[string]any{"instanceLabels": map[string]any{"dashboards": "grafana"}}))
	for _, v := range versions.All {
		ds := flux.UpstreamDashboards(c, v)
		var urls []string
		for name, d := range ds {
			schemas.mustAdmit(t, d)
			url, _, _ := unstructured.NestedString(d.Object, "spec", "url")
			urls = append(urls, url)
			selector, _, _ := unstructured.NestedStringMap(d.Object, "spec", "instanceSelector", "matchLabels")
			if !cmp.Equal(selector, instances) || d.GetNamespace() != "monitoring" || d.GetLabels()["release"] != "kube-prometheus-stack" {
				t.Errorf("Karpenter %s, %s: selects %v in %s labelled %v; want %v, in monitoring, labelled as the platform's Prometheus and Grafana select",
					v.Version, name, selector, d.GetNamespace(), d.GetLabels(), instances)
			}
		}
		var want []string
		for _, url := range v.Dashboards {
			want = append(want, url)
		}
		slices.Sort(urls)
		slices.Sort(want)
		if len(want) != 2 || !slices.Equal(urls, want) {
			t.Errorf("Karpenter %s: dashboards by %v, want its two published ones %v", v.Version, urls, want)
		}
	}
	if ds := flux.UpstreamDashboards(load(t, nil, nil), versions.All[0]); len(ds) != 0 {
		t.Errorf("no Grafana instances named, yet GrafanaDashboards %v", ds)
	}
}
