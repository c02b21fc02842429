package flux

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/do-now/function-karpenter/internal/flux"
	"github.com/do-now/function-karpenter/internal/monitoring"
	"github.com/do-now/function-karpenter/internal/spec"
	"github.com/do-now/function-karpenter/internal/versions"
)

// prometheusOperator carries the monitoring.coreos.com CRDs.
var prometheusOperator = module{"github.com/prometheus-operator/prometheus-operator", "v0.85.0", "h1:M5xLCLEoaW2IJfnuCwFzzpL+jSVQu3KGT84Pye+fW8s="}

func monitoringKustomization(t *testing.T, c *spec.Config) *kustomizev1.Kustomization {
	t.Helper()
	objs, err := flux.Monitoring(c)
	if err != nil {
		t.Fatalf("flux.Monitoring: %v", err)
	}
	return delivered(t, objs[flux.MonitoringKustomization])
}

// promtool is the binary the Makefile built (hack/tools.mk).
func promtool(t *testing.T) string {
	t.Helper()
	p := os.Getenv("PROMTOOL")
	if p == "" {
		t.Fatal("PROMTOOL is not set: run these tests through make flux-test, which builds it")
	}
	return p
}

// TestMonitoringBuildsValidObjects builds the monitoring Kustomization the
// example claim gets as the claimed cluster's Flux would, and checks what
// it applies: the PrometheusRule and PodMonitor admitted by
// prometheus-operator's CRDs, in the platform's namespace with its labels;
// the ratio substituted into the rule; the PodMonitor finding the
// controller's pods on a port the chart really opens; the dashboards in
// ConfigMaps the Grafana sidecar picks up, their ${datasource} left to
// Grafana. Then promtool checks the rules.
func TestMonitoringBuildsValidObjects(t *testing.T) {
	c := load(t, nil, nil)
	k := monitoringKustomization(t, c)
	controller, _ := flux.Names(c)
	if len(k.Spec.DependsOn) != 1 || k.Spec.DependsOn[0].Name != controller {
		t.Errorf("the monitoring Kustomization depends on %v, want the controller's %s", k.Spec.DependsOn, controller)
	}
	objs := byKindName(fluxBuild(t, k))
	schemas := loadCRDs(t,
		prometheusOperator.file(t, "example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml"),
		prometheusOperator.file(t, "example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml"),
	)
	want := []string{"ConfigMap/karpenter-capacity", "ConfigMap/karpenter-performance", "PodMonitor/karpenter", "PrometheusRule/karpenter"}
	if diff := cmp.Diff(want, keys(objs)); diff != "" {
		t.Fatalf("the monitoring base applies (-want +got):\n%s", diff)
	}
	for name, o := range objs {
		if o.GetNamespace() != "monitoring" {
			t.Errorf("%s is in namespace %q, want the platform's monitoring", name, o.GetNamespace())
		}
		if o.GetLabels()["release"] != "kube-prometheus-stack" {
			t.Errorf("%s is labelled %v: the platform's Prometheus selects release=kube-prometheus-stack", name, o.GetLabels())
		}
		if o.GetAPIVersion() == "monitoring.coreos.com/v1" {
			schemas.mustAdmit(t, o)
		}
	}

	rule := objs["PrometheusRule/karpenter"]
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	if len(groups) != 1 {
		t.Fatalf("rule groups %v", groups)
	}
	var alerts []string
	for _, r := range groups[0].(map[string]any)["rules"].([]any) {
		r := r.(map[string]any)
		alerts = append(alerts, r["alert"].(string))
		if r["alert"] == monitoring.AlertNodePoolNearLimits && !strings.HasSuffix(r["expr"].(string), ">= 0.9") {
			t.Errorf("the near-limits rule does not read the platform's ratio 0.9: %s", r["expr"])
		}
	}
	if diff := cmp.Diff([]string{monitoring.AlertEC2NodeClassNotReady, monitoring.AlertNodePoolNotReady, monitoring.AlertNodePoolNearLimits, monitoring.AlertEC2APIErrors, monitoring.AlertUnschedulablePods}, alerts); diff != "" {
		t.Errorf("alerts (-want +got):\n%s", diff)
	}

	pm := objs["PodMonitor/karpenter"]
	ns, _, _ := unstructured.NestedStringSlice(pm.Object, "spec", "namespaceSelector", "matchNames")
	selector, _, _ := unstructured.NestedStringMap(pm.Object, "spec", "selector", "matchLabels")
	if !cmp.Equal(ns, []string{c.Input.PodIdentity.Namespace}) {
		t.Errorf("the PodMonitor looks in %v, want the controller's namespace %s", ns, c.Input.PodIdentity.Namespace)
	}
	checkScrapesTheController(t, c, selector)

	for _, stem := range []string{"capacity", "performance"} {
		cm := objs["ConfigMap/karpenter-"+stem]
		if cm.GetLabels()["grafana_dashboard"] != "1" {
			t.Errorf("%s lacks the Grafana sidecar's label: %v", stem, cm.GetLabels())
		}
		data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
		var d struct {
			UID    string
			Panels []struct {
				Title      string
				Datasource struct{ UID string }
				Targets    []struct{ Expr string }
			}
		}
		if err := json.Unmarshal([]byte(data["karpenter-"+stem+".json"]), &d); err != nil {
			t.Fatalf("dashboard %s is not JSON: %v", stem, err)
		}
		if len(d.Panels) < 6 {
			t.Errorf("dashboard %s has %d panels", stem, len(d.Panels))
		}
		for _, p := range d.Panels {
			if p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
				t.Errorf("dashboard %s panel %q: datasource %q (Flux must leave ${datasource} to Grafana), %d queries", stem, p.Title, p.Datasource.UID, len(p.Targets))
			}
		}
	}

	// promtool checks the rules as Prometheus would load them.
	dir := t.TempDir()
	file := filepath.Join(dir, "rules.yaml")
	b, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool(t), "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
	// And every dashboard query parses as PromQL: promtool checks them as
	// recording rules.
	var records []map[string]string
	for i, e := range monitoring.Exprs() {
		records = append(records, map[string]string{"record": fmt.Sprintf("karpenter:query%d", i), "expr": e})
	}
	b, err = yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "queries", "rules": records}}})
	if err != nil {
		t.Fatal(err)
	}
	queries := filepath.Join(dir, "queries.yaml")
	if err := os.WriteFile(queries, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool(t), "check", "rules", queries).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules of the dashboards' queries: %v\n%s", err, out)
	}
}

// checkScrapesTheController renders the controller's chart with the
// example claim's values and checks the PodMonitor's selector picks its
// pods and the port it scrapes is one the controller's container opens.
func checkScrapesTheController(t *testing.T, c *spec.Config, selector map[string]string) {
	t.Helper()
	v, err := versions.Get(string(c.Spec.Version))
	if err != nil {
		t.Fatal(err)
	}
	values, err := json.Marshal(flux.ControllerValues(c, v))
	if err != nil {
		t.Fatal(err)
	}
	var vals map[string]any
	_ = json.Unmarshal(values, &vals)
	var deployment *unstructured.Unstructured
	for _, o := range renderChart(t, karpenterChart(t, v), vals, c.Input.PodIdentity.Namespace) {
		if o.GetKind() == "Deployment" {
			deployment = o
		}
	}
	if deployment == nil {
		t.Fatal("the chart renders no Deployment")
	}
	labels, _, _ := unstructured.NestedStringMap(deployment.Object, "spec", "template", "metadata", "labels")
	for k, v := range selector {
		if labels[k] != v {
			t.Errorf("the PodMonitor selects %s=%s; the controller's pods are labelled %v", k, v, labels)
		}
	}
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	found := false
	for _, ct := range containers {
		ports, _ := ct.(map[string]any)["ports"].([]any)
		for _, p := range ports {
			found = found || p.(map[string]any)["name"] == monitoring.MetricsPort
		}
	}
	if !found {
		t.Errorf("the controller's container opens no port %q to scrape", monitoring.MetricsPort)
	}
}

// A ruleCase is one alert's synthetic series: on the firing series the
// alert fires at eval with the labels given; on the quiet ones, never.
type ruleCase struct {
	alert         string
	firing, quiet []series
	eval          string
	labels        map[string]string
	value         string // what {{ .Value }} renders as, humanized where the template says so
}

type series struct {
	Series string `json:"series"`
	Values string `json:"values"`
}

// TestRulesFire runs promtool's rule unit tests: each alert fires on a
// synthetic series that breaks what it guards and stays quiet on a healthy
// one, with its annotations rendered.
func TestRulesFire(t *testing.T) {
	ratio := "0.9"
	cases := []ruleCase{
		{
			alert:  monitoring.AlertEC2NodeClassNotReady,
			firing: []series{{monitoring.EC2NodeClassCondition + `{name="private",type="Ready",status="False"}`, "1x30"}},
			quiet:  []series{{monitoring.EC2NodeClassCondition + `{name="private",type="Ready",status="True"}`, "1x30"}, {monitoring.EC2NodeClassCondition + `{name="private",type="Ready",status="False"}`, "0x30"}},
			eval:   "20m", labels: map[string]string{"name": "private"},
		},
		{
			alert:  monitoring.AlertNodePoolNotReady,
			firing: []series{{monitoring.NodePoolCondition + `{name="public",type="Ready",status="Unknown"}`, "1x30"}},
			quiet:  []series{{monitoring.NodePoolCondition + `{name="public",type="Ready",status="True"}`, "1x30"}},
			eval:   "20m", labels: map[string]string{"name": "public"},
		},
		{
			alert: monitoring.AlertNodePoolNearLimits,
			firing: []series{
				{monitoring.NodePoolUsage + `{nodepool="private",resource_type="cpu"}`, "95x30"},
				{monitoring.NodePoolLimit + `{nodepool="private",resource_type="cpu"}`, "100x30"},
			},
			quiet: []series{
				{monitoring.NodePoolUsage + `{nodepool="private",resource_type="cpu"}`, "80x30"},
				{monitoring.NodePoolLimit + `{nodepool="private",resource_type="cpu"}`, "100x30"},
				{monitoring.NodePoolUsage + `{nodepool="private",resource_type="pods"}`, "100x30"},
				{monitoring.NodePoolLimit + `{nodepool="private",resource_type="pods"}`, "100x30"},
			},
			eval: "20m", labels: map[string]string{"nodepool": "private", "resource_type": "cpu"}, value: "95%",
		},
		{
			alert: monitoring.AlertEC2APIErrors,
			firing: []series{
				{monitoring.AWSRequests + `{service="EC2",action="CreateFleet",code="403"}`, "0+6x40"},
				{monitoring.AWSRequests + `{service="EC2",action="CreateFleet",code="200"}`, "0+54x40"},
			},
			quiet: []series{
				{monitoring.AWSRequests + `{service="EC2",action="CreateFleet",code="403"}`, "0+1x40"},
				{monitoring.AWSRequests + `{service="EC2",action="CreateFleet",code="200"}`, "0+99x40"},
				{monitoring.AWSRequests + `{service="SQS",action="ReceiveMessage",code="500"}`, "0+50x40"},
			},
			eval: "30m", labels: map[string]string{"action": "CreateFleet"}, value: "10%",
		},
		{
			alert: monitoring.AlertUnschedulablePods,
			firing: []series{
				{monitoring.UnschedulablePods + `{controller="provisioner"}`, "3x30"},
				{monitoring.PodState + `{name="web-0",namespace="team-a",phase="Pending"}`, "1x30"},
			},
			// Once no pod is pending Karpenter leaves the gauge at its
			// last value: quiet all the same.
			quiet: []series{
				{monitoring.UnschedulablePods + `{controller="provisioner"}`, "3x30"},
				{monitoring.PodState + `{name="web-0",namespace="team-a",phase="Running"}`, "1x30"},
			},
			eval: "20m", value: "3",
		},
	}
	rules := monitoring.Rules(ratio)
	byAlert := map[string]monitoring.Rule{}
	for _, r := range rules.Spec.Groups[0].Rules {
		byAlert[r.Alert] = r
	}
	if len(cases) != len(byAlert) {
		t.Fatalf("%d alerts, %d cases: every alert needs one", len(byAlert), len(cases))
	}
	dir := t.TempDir()
	b, err := yaml.Marshal(map[string]any{"groups": rules.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	var tests []any
	for _, tc := range cases {
		r := byAlert[tc.alert]
		labels := map[string]string{"severity": "warning"}
		for k, v := range tc.labels {
			labels[k] = v
		}
		annotations := map[string]string{}
		for k, v := range r.Annotations {
			annotations[k] = render(v, labels, tc.value)
		}
		tests = append(tests,
			map[string]any{"interval": "1m", "input_series": tc.firing, "alert_rule_test": []any{map[string]any{
				"eval_time": tc.eval, "alertname": tc.alert,
				"exp_alerts": []any{map[string]any{"exp_labels": labels, "exp_annotations": annotations}},
			}}},
			map[string]any{"interval": "1m", "input_series": tc.quiet, "alert_rule_test": []any{map[string]any{
				"eval_time": tc.eval, "alertname": tc.alert, "exp_alerts": []any{},
			}}},
		)
	}
	b, err = yaml.Marshal(map[string]any{"rule_files": []string{"rules.yaml"}, "evaluation_interval": "1m", "tests": tests})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules_test.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool(t), "test", "rules", "rules_test.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool test rules: %v\n%s\n%s", err, out, b)
	}
}

// render expands an annotation's template as Prometheus does for the
// handful of forms the rules use.
func render(tmpl string, labels map[string]string, value string) string {
	out := regexp.MustCompile(`\{\{ \.Labels\.(\w+) \}\}`).ReplaceAllStringFunc(tmpl, func(m string) string {
		return labels[regexp.MustCompile(`\.Labels\.(\w+)`).FindStringSubmatch(m)[1]]
	})
	out = strings.ReplaceAll(out, "{{ .Value | humanizePercentage }}", value)
	return strings.ReplaceAll(out, "{{ .Value }}", value)
}
