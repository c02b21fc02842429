package monitoring

import (
	"encoding/json"
	"fmt"
)

// PodMonitor scrapes the controller's pods on the chart's metrics port,
// from the namespace the monitoring objects live in.
type PodMonitor struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   ObjectMeta `json:"metadata"`
	Spec       struct {
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		PodMetricsEndpoints []struct {
			Port string `json:"port"`
			Path string `json:"path"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// MetricsPort is the name of the controller container's metrics port in
// Karpenter's chart.
const MetricsPort = "http-metrics"

// Scrape is the PodMonitor of the controller's pods, selected by labels
// in namespace (the ${KARPENTER_NAMESPACE} substitution in the base).
func Scrape(namespace string, podLabels map[string]string) PodMonitor {
	var m PodMonitor
	m.APIVersion, m.Kind = "monitoring.coreos.com/v1", "PodMonitor"
	m.Metadata = ObjectMeta{Name: "karpenter", Labels: map[string]string{"app.kubernetes.io/name": "karpenter"}}
	m.Spec.NamespaceSelector.MatchNames = []string{namespace}
	m.Spec.Selector.MatchLabels = podLabels
	m.Spec.PodMetricsEndpoints = []struct {
		Port string `json:"port"`
		Path string `json:"path"`
	}{{Port: MetricsPort, Path: "/metrics"}}
	return m
}

// A Dashboard is a Grafana dashboard, as its JSON model has it.
type Dashboard struct {
	UID           string     `json:"uid"`
	Title         string     `json:"title"`
	Tags          []string   `json:"tags"`
	SchemaVersion int        `json:"schemaVersion"`
	Time          timeRange  `json:"time"`
	Refresh       string     `json:"refresh"`
	Templating    templating `json:"templating"`
	Panels        []Panel    `json:"panels"`
}

type timeRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

type templating struct {
	List []variable `json:"list"`
}

type variable struct {
	Name  string `json:"name"`
	Label string `json:"label"`
	Type  string `json:"type"`
	Query string `json:"query"`
}

// A Panel is one time series panel.
type Panel struct {
	ID          int         `json:"id"`
	Type        string      `json:"type"`
	Title       string      `json:"title"`
	Description string      `json:"description"`
	GridPos     gridPos     `json:"gridPos"`
	Datasource  datasource  `json:"datasource"`
	FieldConfig fieldConfig `json:"fieldConfig"`
	Targets     []Target    `json:"targets"`
}

type gridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type fieldConfig struct {
	Defaults struct {
		Unit string `json:"unit"`
	} `json:"defaults"`
}

// A Target is one query of a panel.
type Target struct {
	RefID        string     `json:"refId"`
	Expr         string     `json:"expr"`
	LegendFormat string     `json:"legendFormat"`
	Datasource   datasource `json:"datasource"`
}

// prometheus is the dashboard's data source variable: Grafana substitutes
// it, Flux does not (the dashboards' ConfigMaps opt out of substitution).
var prometheus = datasource{Type: "prometheus", UID: "${datasource}"}

// query is one target: PromQL and its legend.
type query struct{ expr, legend string }

// panel lays panels out two per row.
func panel(i int, title, description, unit string, qs ...query) Panel {
	p := Panel{
		ID: i + 1, Type: "timeseries", Title: title, Description: description,
		GridPos:    gridPos{H: 8, W: 12, X: (i % 2) * 12, Y: (i / 2) * 8},
		Datasource: prometheus,
	}
	p.FieldConfig.Defaults.Unit = unit
	for j, q := range qs {
		p.Targets = append(p.Targets, Target{RefID: string(rune('A' + j)), Expr: q.expr, LegendFormat: q.legend, Datasource: prometheus})
	}
	return p
}

func dashboard(uid, title string, panels ...Panel) Dashboard {
	return Dashboard{
		UID: uid, Title: title, Tags: []string{"karpenter"}, SchemaVersion: 39,
		Time: timeRange{From: "now-6h", To: "now"}, Refresh: "1m",
		Templating: templating{List: []variable{{Name: "datasource", Label: "Prometheus", Type: "datasource", Query: "prometheus"}}},
		Panels:     panels,
	}
}

func quantile(q, histogram, by string) string {
	return fmt.Sprintf(`histogram_quantile(%s, sum by (le, %s) (rate(%s%s[5m])))`, q, by, histogram, bucket)
}

// Capacity is what the pools hold: nodes, what they use against their
// limits, what pods request of what nodes offer, and the node claims
// created and disrupted.
func Capacity() Dashboard {
	ps := []Panel{}
	add := func(title, description, unit string, qs ...query) {
		ps = append(ps, panel(len(ps), title, description, unit, qs...))
	}
	add("Nodes by NodePool", "Nodes Karpenter manages, per pool.", "short",
		query{fmt.Sprintf(`count by (nodepool) (%s{resource_type="cpu"})`, NodeAllocatable), "{{nodepool}}"})
	add("CPU used of the limit", "What each pool's nodes use of its spec.limits.cpu; Karpenter launches nothing for a pool at 100%.", "percentunit",
		query{fmt.Sprintf(`%s{resource_type="cpu"} / on (nodepool, resource_type) %s{resource_type="cpu"}`, NodePoolUsage, NodePoolLimit), "{{nodepool}}"})
	add("Memory used of the limit", "Likewise for spec.limits.memory.", "percentunit",
		query{fmt.Sprintf(`%s{resource_type="memory"} / on (nodepool, resource_type) %s{resource_type="memory"}`, NodePoolUsage, NodePoolLimit), "{{nodepool}}"})
	add("CPU requested of allocatable", "What pods request of what the nodes offer, per pool: low values mean room for consolidation.", "percentunit",
		query{fmt.Sprintf(`sum by (nodepool) (%s{resource_type="cpu"}) / sum by (nodepool) (%s{resource_type="cpu"})`, NodePodRequests, NodeAllocatable), "{{nodepool}}"})
	add("Node claims created", "Node claims launched per hour, by pool and reason.", "short",
		query{fmt.Sprintf(`sum by (nodepool, reason) (increase(%s[1h]))`, NodeClaimsCreated), "{{nodepool}} {{reason}}"})
	add("Node claims disrupted", "Node claims Karpenter disrupted per hour, by pool and reason (consolidation, drift, expiry, interruption).", "short",
		query{fmt.Sprintf(`sum by (nodepool, reason) (increase(%s[1h]))`, NodeClaimsDisrupted), "{{nodepool}} {{reason}}"})
	return dashboard("karpenter-capacity", "Karpenter / Capacity", ps...)
}

// Performance is how fast and how well Karpenter works: scheduling and
// cloud provider latency, pods it cannot place, EC2 API errors and refused
// launches, interruption messages, and its controllers' errors and queues.
func Performance() Dashboard {
	ps := []Panel{}
	add := func(title, description, unit string, qs ...query) {
		ps = append(ps, panel(len(ps), title, description, unit, qs...))
	}
	add("Scheduling duration", "How long one scheduling simulation takes.", "s",
		query{quantile("0.5", SchedulingDuration, "controller"), "p50"},
		query{quantile("0.99", SchedulingDuration, "controller"), "p99"})
	add("Unschedulable pods", "Pods the last simulation could place on no NodePool.", "short",
		query{fmt.Sprintf(`max(%s)`, UnschedulablePods), "pods"})
	add("EC2 API errors", "Share of EC2 calls answered 4xx or 5xx, by action; not 412, Karpenter's own dry runs that would have succeeded.", "percentunit",
		query{fmt.Sprintf(`sum by (action) (rate(%[1]s{service="EC2", code=~"4..|5..", code!="412"}[5m])) / sum by (action) (rate(%[1]s{service="EC2", code!="412"}[5m]))`, AWSRequests), "{{action}}"})
	add("AWS API latency", "p99 of AWS API calls, by service and action.", "s",
		query{quantile("0.99", AWSRequestDuration, "service, action"), "{{service}} {{action}}"})
	add("Launches refused", "Launches EC2 refused, per hour, by reason.", "short",
		query{fmt.Sprintf(`sum by (reason) (increase(%s[1h]))`, LaunchFailures), "{{reason}}"})
	add("Cloud provider latency", "p99 of Karpenter's cloud provider calls, by method.", "s",
		query{quantile("0.99", CloudProviderDuration, "method"), "{{method}}"})
	add("Interruption messages", "Messages read from the interruption queue, per 5 minutes, by type.", "short",
		query{fmt.Sprintf(`sum by (message_type) (increase(%s[5m]))`, InterruptionMessages), "{{message_type}}"})
	add("Reconcile errors and queues", "Reconcile errors per second and work queue depth, by controller.", "short",
		query{fmt.Sprintf(`sum by (controller) (rate(%s[5m]))`, ReconcileErrors), "errors {{controller}}"},
		query{fmt.Sprintf(`sum by (name) (%s)`, WorkQueueDepth), "queue {{name}}"})
	return dashboard("karpenter-performance", "Karpenter / Performance", ps...)
}

// Dashboards are both, by file name stem.
func Dashboards() map[string]Dashboard {
	return map[string]Dashboard{"capacity": Capacity(), "performance": Performance()}
}

// JSON is a dashboard's JSON model, indented.
func (d Dashboard) JSON() string {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		panic(err) // strings and numbers only: always marshals
	}
	return string(b)
}

// Exprs are every PromQL expression the rules and dashboards evaluate.
func Exprs() []string {
	var out []string
	for _, g := range Rules("0.9", "karpenter").Spec.Groups {
		for _, r := range g.Rules {
			out = append(out, r.Expr)
		}
	}
	for _, stem := range []string{"capacity", "performance"} {
		for _, p := range Dashboards()[stem].Panels {
			for _, t := range p.Targets {
				out = append(out, t.Expr)
			}
		}
	}
	return out
}
