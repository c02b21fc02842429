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

	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/flux"
	"github.com/do-now/function-karpenter/internal/monitoring"
	"github.com/do-now/function-karpenter/internal/versions"
)

// prometheusOperator carries the monitoring.coreos.com CRDs.
var prometheusOperator = module{"github.com/prometheus-operator/prometheus-operator", "v0.85.0", "h1:M5xLCLEoaW2IJfnuCwFzzpL+jSVQu3KGT84Pye+fW8s="}

func monitoringKustomization(t *testing.T, c *config.Config) *kustomizev1.Kustomization {
	t.Helper()
	return kustomization(t, flux.Monitoring, c, versions.All[len(versions.All)-1], flux.MonitoringKustomization)
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
		// Flux substituted the controller's namespace wherever a rule
		// names it, and nothing else is left to substitute.
		if r["alert"] == monitoring.AlertControllerDown && !strings.Contains(r["expr"].(string), `namespace="`+c.Input.PodIdentity.Namespace+`"`) {
			t.Errorf("the controller-down rule does not select the controller's namespace %s: %s", c.Input.PodIdentity.Namespace, r["expr"])
		}
		if b, _ := json.Marshal(r); strings.Contains(string(b), "${") {
			t.Errorf("rule %s keeps an unsubstituted variable: %s", r["alert"], b)
		}
	}
	var names []string
	for _, r := range monitoring.Rules("0.9", "karpenter").Spec.Groups[0].Rules {
		names = append(names, r.Alert)
	}
	if diff := cmp.Diff(names, alerts); diff != "" {
		t.Errorf("alerts the claimed cluster gets (-want +got):\n%s", diff)
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
func checkScrapesTheController(t *testing.T, c *config.Config, selector map[string]string) {
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

// A ruleCase is one alert's synthetic series, shaped as Karpenter and
// Prometheus emit them (labels as their sources register them): on the
// firing series the alert fires at eval with the labels given; on each
// quiet set, never. quiet holds the false positives each rule must not
// page on.
type ruleCase struct {
	alert  string
	firing []series
	quiet  [][]series
	eval   string
	labels map[string]string
	value  string // what {{ .Value }} renders as, humanized where the template says so
}

type series struct {
	Series string `json:"series"`
	Values string `json:"values"`
}

// The controller's scrape target as prometheus-operator labels a
// PodMonitor's (job <its namespace>/<its name>, namespace the pod's).
const upSeries = `up{job="monitoring/karpenter",namespace="karpenter",pod="karpenter-0",endpoint="http-metrics"}`

// idle is a healthy cluster with nothing to do: the controller up and
// leading, the queue polled, every class and pool Ready, EC2 answering
// (Karpenter's validation dry runs included), no pod waiting. No alert
// fires on it.
var idle = []series{
	{upSeries, "1x70"},
	{monitoring.LeaderStatus + `{name="karpenter-leader-election",namespace="karpenter",pod="karpenter-0"}`, "1x70"},
	{monitoring.AWSRequests + `{service="SQS",action="ReceiveMessage",code="200"}`, "0+3x70"},
	{monitoring.AWSRequests + `{service="EC2",action="DescribeInstances",code="200"}`, "0+2x70"},
	{monitoring.AWSRequests + `{service="EC2",action="CreateFleet",code="412"}`, "0+1x70"},
	{monitoring.EC2NodeClassCondition + `{name="private",type="Ready",status="True"}`, "1x70"},
	{monitoring.NodePoolCondition + `{name="private",type="Ready",status="True"}`, "1x70"},
	{monitoring.NodePoolUsage + `{nodepool="private",resource_type="cpu"}`, "0x70"},
	{monitoring.NodePoolLimit + `{nodepool="private",resource_type="cpu"}`, "100x70"},
}

// TestRulesFire runs promtool's rule unit tests: each alert fires on a
// synthetic series that breaks what it guards, with its severity, runbook
// and annotations rendered, and stays quiet on its false positives and on
// an idle cluster.
func TestRulesFire(t *testing.T) {
	ratio := "0.9"
	cases := []ruleCase{
		{
			alert:  monitoring.AlertControllerDown,
			firing: []series{{upSeries, "0x20"}},
			quiet:  [][]series{{{upSeries, "1x20"}}},
			eval:   "10m",
		},
		{
			alert: monitoring.AlertNoLeader,
			firing: []series{
				{monitoring.LeaderStatus + `{name="karpenter-leader-election",namespace="karpenter",pod="karpenter-0"}`, "0x30"},
				{monitoring.LeaderStatus + `{name="karpenter-leader-election",namespace="karpenter",pod="karpenter-1"}`, "0x30"},
			},
			// A backup replica reports 0 beside the leader.
			quiet: [][]series{{
				{monitoring.LeaderStatus + `{name="karpenter-leader-election",namespace="karpenter",pod="karpenter-0"}`, "1x30"},
				{monitoring.LeaderStatus + `{name="karpenter-leader-election",namespace="karpenter",pod="karpenter-1"}`, "0x30"},
			}},
			eval: "20m", value: "0",
		},
		{
			alert:  monitoring.AlertEC2NodeClassNotReady,
			firing: []series{{monitoring.EC2NodeClassCondition + `{name="private",type="Ready",status="False",reason="SubnetsNotFound"}`, "1x30"}},
			quiet: [][]series{
				{{monitoring.EC2NodeClassCondition + `{name="private",type="Ready",status="True"}`, "1x30"}},
				{{monitoring.EC2NodeClassCondition + `{name="private",type="Ready",status="False"}`, "0x30"}},
			},
			eval: "20m", labels: map[string]string{"name": "private"},
		},
		{
			alert:  monitoring.AlertNodePoolNotReady,
			firing: []series{{monitoring.NodePoolCondition + `{name="public",type="Ready",status="Unknown"}`, "1x30"}},
			quiet:  [][]series{{{monitoring.NodePoolCondition + `{name="public",type="Ready",status="True"}`, "1x30"}}},
			eval:   "20m", labels: map[string]string{"name": "public"},
		},
		{
			alert: monitoring.AlertNodePoolNearLimits,
			firing: []series{
				{monitoring.NodePoolUsage + `{nodepool="private",resource_type="cpu"}`, "95x30"},
				{monitoring.NodePoolLimit + `{nodepool="private",resource_type="cpu"}`, "100x30"},
			},
			quiet: [][]series{{
				{monitoring.NodePoolUsage + `{nodepool="private",resource_type="cpu"}`, "80x30"},
				{monitoring.NodePoolLimit + `{nodepool="private",resource_type="cpu"}`, "100x30"},
				{monitoring.NodePoolUsage + `{nodepool="private",resource_type="pods"}`, "100x30"},
				{monitoring.NodePoolLimit + `{nodepool="private",resource_type="pods"}`, "100x30"},
			}},
			eval: "20m", labels: map[string]string{"nodepool": "private", "resource_type": "cpu"}, value: "95%",
		},
		{
			alert: monitoring.AlertEC2APIErrors,
			firing: []series{
				{monitoring.AWSRequests + `{service="EC2",action="CreateFleet",code="403"}`, "0+6x40"},
				{monitoring.AWSRequests + `{service="EC2",action="CreateFleet",code="200"}`, "0+54x40"},
			},
			quiet: [][]series{
				{
					{monitoring.AWSRequests + `{service="EC2",action="CreateFleet",code="403"}`, "0+1x40"},
					{monitoring.AWSRequests + `{service="EC2",action="CreateFleet",code="200"}`, "0+99x40"},
					{monitoring.AWSRequests + `{service="SQS",action="ReceiveMessage",code="500"}`, "0+50x40"},
				},
				// A burst of Karpenter's validation dry runs: each answered
				// DryRunOperation, HTTP 412.
				{
					{monitoring.AWSRequests + `{service="EC2",action="CreateFleet",code="412"}`, "0+20x40"},
					{monitoring.AWSRequests + `{service="EC2",action="RunInstances",code="412"}`, "0+20x40"},
					{monitoring.AWSRequests + `{service="EC2",action="CreateLaunchTemplate",code="412"}`, "0+20x40"},
					{monitoring.AWSRequests + `{service="EC2",action="CreateFleet",code="200"}`, "0+1x40"},
				},
				// Three calls in ten minutes, all refused: too few to page on.
				{{monitoring.AWSRequests + `{service="EC2",action="RunInstances",code="403"}`, "0+0.3x40"}},
			},
			eval: "30m", labels: map[string]string{"action": "CreateFleet"}, value: "10%",
		},
		{
			alert:  monitoring.AlertLaunchesFailing,
			firing: []series{{monitoring.CloudProviderErrors + `{controller="nodeclaim.lifecycle",method="Create",provider="aws",error="InsufficientCapacityError",nodepool="private"}`, "0+1x40"}},
			quiet: [][]series{{
				// NodeClaims whose instance is gone: Get errors, not launches.
				{monitoring.CloudProviderErrors + `{controller="nodeclaim.lifecycle",method="Get",provider="aws",error="NodeClaimNotFoundError",nodepool="private"}`, "0+5x40"},
				{monitoring.CloudProviderErrors + `{controller="nodeclaim.lifecycle",method="Create",provider="aws",error="InsufficientCapacityError",nodepool="private"}`, "0 1x40"},
			}},
			eval: "35m", labels: map[string]string{"nodepool": "private", "error": "InsufficientCapacityError"}, value: "15",
		},
		{
			alert:  monitoring.AlertNodesNotRegistering,
			firing: []series{{monitoring.NodeClaimsDisrupted + `{reason="registration_timeout",nodepool="private",capacity_type="spot",consolidation_policy="",termination_mode="eventual"}`, "0+0.1x70"}},
			quiet: [][]series{{
				{monitoring.NodeClaimsDisrupted + `{reason="underutilized",nodepool="private",capacity_type="spot",consolidation_policy="WhenEmptyOrUnderutilized",termination_mode="graceful"}`, "0+1x70"},
				// One timeout in an hour: a one-off.
				{monitoring.NodeClaimsDisrupted + `{reason="launch_timeout",nodepool="private",capacity_type="spot",consolidation_policy="",termination_mode="eventual"}`, "0 1x69"},
			}},
			eval: "70m", labels: map[string]string{"nodepool": "private"}, value: "6",
		},
		{
			alert:  monitoring.AlertNodesNotInitialized,
			firing: []series{{monitoring.NodeClaimConditionSeconds + `{name="private-x7k2p",type="Initialized",status="Unknown",reason="AwaitingInitialization"}`, "0+60x40"}},
			// A node that initializes in three minutes.
			quiet: [][]series{{
				{monitoring.NodeClaimConditionSeconds + `{name="private-x7k2p",type="Initialized",status="Unknown",reason="AwaitingInitialization"}`, "0+60x3"},
				{monitoring.NodeClaimConditionSeconds + `{name="private-x7k2p",type="Initialized",status="True",reason="Initialized"}`, "_x3 0+60x36"},
			}},
			eval: "30m", labels: map[string]string{"name": "private-x7k2p"}, value: "30m 0s",
		},
		{
			alert: monitoring.AlertInterruptionStalled,
			firing: []series{
				{upSeries, "1x30"},
				{monitoring.AWSRequests + `{service="SQS",action="ReceiveMessage",code="403"}`, "0+3x30"},
			},
			quiet: [][]series{
				{{upSeries, "1x30"}, {monitoring.AWSRequests + `{service="SQS",action="ReceiveMessage",code="200"}`, "0+3x30"}},
				// The controller down: KarpenterControllerDown says so.
				{{upSeries, "0x30"}},
			},
			eval: "25m", value: "0",
		},
		{
			alert:  monitoring.AlertNodeTerminationStuck,
			firing: []series{{monitoring.NodeClaimTerminatingSeconds + `{name="private-x7k2p"}`, "0+60x70"}},
			quiet:  [][]series{{{monitoring.NodeClaimTerminatingSeconds + `{name="private-x7k2p"}`, "0+60x30"}}},
			eval:   "70m", labels: map[string]string{"name": "private-x7k2p"}, value: "1h 10m 0s",
		},
		{
			alert:  monitoring.AlertUnschedulablePods,
			firing: []series{{monitoring.PodUnboundSeconds + `{name="web-0",exported_namespace="team-a",dynamic_resources="false",namespace="karpenter"}`, "0+60x40"}},
			quiet: [][]series{
				// A pod bound to a node and stuck pulling its image: the
				// scheduler's gauge keeps its last value, a pod is
				// Pending, but nothing is unbound.
				{
					{monitoring.UnschedulablePods + `{controller="provisioner"}`, "3x40"},
					{monitoring.PodState + `{name="web-0",namespace="team-a",phase="Pending"}`, "1x40"},
				},
				// A pod that waited five minutes for its node.
				{{monitoring.PodUnboundSeconds + `{name="web-0",exported_namespace="team-a",dynamic_resources="false",namespace="karpenter"}`, "0+60x5"}},
			},
			eval: "30m", value: "1",
		},
	}
	rules := monitoring.Rules(ratio, "karpenter")
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
	var idleChecks []any
	for _, tc := range cases {
		r, ok := byAlert[tc.alert]
		if !ok {
			t.Fatalf("no rule %s", tc.alert)
		}
		if sev := r.Labels["severity"]; sev != "critical" && sev != "warning" {
			t.Errorf("%s: severity %q, want critical (pages) or warning (tickets)", tc.alert, sev)
		}
		labels := map[string]string{"severity": r.Labels["severity"]}
		for k, v := range tc.labels {
			labels[k] = v
		}
		annotations := map[string]string{}
		for k, v := range r.Annotations {
			annotations[k] = render(v, labels, tc.value)
		}
		tests = append(tests, map[string]any{"interval": "1m", "input_series": tc.firing, "alert_rule_test": []any{map[string]any{
			"eval_time": tc.eval, "alertname": tc.alert,
			"exp_alerts": []any{map[string]any{"exp_labels": labels, "exp_annotations": annotations}},
		}}})
		for _, quiet := range tc.quiet {
			tests = append(tests, map[string]any{"interval": "1m", "input_series": quiet, "alert_rule_test": []any{map[string]any{
				"eval_time": tc.eval, "alertname": tc.alert, "exp_alerts": []any{},
			}}})
		}
		idleChecks = append(idleChecks, map[string]any{"eval_time": "70m", "alertname": tc.alert, "exp_alerts": []any{}})
	}
	tests = append(tests, map[string]any{"interval": "1m", "input_series": idle, "alert_rule_test": idleChecks})
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
		t.Errorf("promtool test rules: %v\n%s", err, out)
	}
}

// render expands an annotation's template as Prometheus does for the
// handful of forms the rules use.
func render(tmpl string, labels map[string]string, value string) string {
	out := regexp.MustCompile(`\{\{ \.Labels\.(\w+) \}\}`).ReplaceAllStringFunc(tmpl, func(m string) string {
		return labels[regexp.MustCompile(`\.Labels\.(\w+)`).FindStringSubmatch(m)[1]]
	})
	out = strings.ReplaceAll(out, "{{ .Value | humanizePercentage }}", value)
	out = strings.ReplaceAll(out, "{{ .Value | humanizeDuration }}", value)
	out = strings.ReplaceAll(out, "{{ .Value | humanize }}", value)
	return strings.ReplaceAll(out, "{{ .Value }}", value)
}
