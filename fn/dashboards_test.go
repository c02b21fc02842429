package main

import (
	"strings"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"

	"github.com/do-now/function-karpenter/internal/flux"
	"github.com/do-now/function-karpenter/internal/versions"
)

// TestUpstreamDashboardsBesideTheMonitoring: where the platform names its
// Grafana instances, Karpenter's own dashboards of the claim's version are
// composed with the monitoring (so once the controller is Ready), by their
// published URL; one that the claimed cluster cannot take (no
// grafana-operator CRD) holds MonitoringReady False, and not the node pools.
func TestUpstreamDashboardsBesideTheMonitoring(t *testing.T) {
	aws := fakeProviders{t: t, account: account}
	request := func() *requestBuilder {
		return aRequest(t).withInput("monitoring.upstreamDashboards", map[string]any{"instanceLabels": map[string]any{"dashboards": "grafana"}})
	}
	var observed map[resource.Name]map[string]any
	var rsp *fnv1.RunFunctionResponse
	for range 20 {
		rsp = run(t, request().observing(observed).build())
		names := strings.Join(desiredNames(rsp), " ")
		if strings.Contains(names, "upstream-dashboard-") && !strings.Contains(names, "monitoring-kustomization") {
			t.Fatalf("upstream dashboards composed without the monitoring: %s", names)
		}
		if rsp.GetDesired().GetComposite().GetReady() == fnv1.Ready_READY_TRUE {
			break
		}
		observed = aws.observe(rsp, true)
	}
	// The version the claim runs, as its controller's Kustomization installs it (the chart).
	chart := dig(rsp.GetDesired().GetResources()["controller-kustomization"].GetResource().AsMap(),
		"spec", "forProvider", "manifest", "spec", "postBuild", "substitute", flux.VarKarpenterVersion)
	s, _ := chart.(string)
	v, ok := versions.OfChart(s)
	if !ok {
		t.Fatalf("the controller installs chart %v, of no known version", chart)
	}
	for name, url := range v.Dashboards {
		r := rsp.GetDesired().GetResources()["upstream-dashboard-"+name]
		if r == nil {
			t.Fatalf("settled, no upstream-dashboard-%s among %v", name, desiredNames(rsp))
		}
		got := dig(r.GetResource().AsMap(), "spec", "forProvider", "manifest", "spec", "url")
		if got != url {
			t.Errorf("upstream-dashboard-%s imports %v, want Karpenter %s's published %s", name, got, v.Version, url)
		}
	}

	observed["upstream-dashboard-capacity"] = failing(observed["upstream-dashboard-capacity"],
		`cannot create object: no matches for kind "GrafanaDashboard" in version "grafana.integreatly.org/v1beta1"`)
	rsp = run(t, request().observing(observed).build())
	for typ, want := range map[string]fnv1.Status{"MonitoringReady": fnv1.Status_STATUS_CONDITION_FALSE, "NodePoolsReady": fnv1.Status_STATUS_CONDITION_TRUE} {
		for _, c := range rsp.GetConditions() {
			if c.GetType() == typ && c.GetStatus() != want {
				t.Errorf("a dashboard the claimed cluster refuses: %s is %v (%s), want %v", typ, c.GetStatus(), c.GetMessage(), want)
			}
		}
	}
	if msg := conditionMessage(rsp, "MonitoringReady"); !strings.Contains(msg, "upstream-dashboard-capacity") {
		t.Errorf("MonitoringReady does not name the dashboard: %q", msg)
	}
}
