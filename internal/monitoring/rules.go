package monitoring

import (
	"fmt"
	"strings"
)

// A Rule is one Prometheus alerting rule.
type Rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// A RuleGroup is a named group of rules.
type RuleGroup struct {
	Name  string `json:"name"`
	Rules []Rule `json:"rules"`
}

// PrometheusRule is the prometheus-operator object carrying the rules.
type PrometheusRule struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   ObjectMeta `json:"metadata"`
	Spec       struct {
		Groups []RuleGroup `json:"groups"`
	} `json:"spec"`
}

// ObjectMeta is the part of a Kubernetes object's metadata the base sets.
type ObjectMeta struct {
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Alert names.
const (
	AlertControllerDown       = "KarpenterControllerDown"
	AlertNoLeader             = "KarpenterNoLeader"
	AlertEC2NodeClassNotReady = "KarpenterEC2NodeClassNotReady"
	AlertNodePoolNotReady     = "KarpenterNodePoolNotReady"
	AlertNodePoolNearLimits   = "KarpenterNodePoolNearLimits"
	AlertEC2APIErrors         = "KarpenterEC2APIErrors"
	AlertLaunchesFailing      = "KarpenterLaunchesFailing"
	AlertNodesNotRegistering  = "KarpenterNodesNotRegistering"
	AlertNodesNotInitialized  = "KarpenterNodesNotInitialized"
	AlertInterruptionStalled  = "KarpenterInterruptionQueueStalled"
	AlertNodeTerminationStuck = "KarpenterNodeTerminationStuck"
	AlertUnschedulablePods    = "KarpenterPodsUnschedulable"
)

// RunbookBase is where every rule's runbook_url points: the runbooks in
// docs/operating.md, one heading per alert (its name, lower-cased, is the
// anchor; make docs-test resolves every runbook_url in the generated rules).
const RunbookBase = "https://github.com/do-now/function-karpenter/blob/main/docs/operating.md#"

// Severities: critical pages (something costs money or stops every
// launch now), warning tickets.
const (
	critical = "critical"
	warning  = "warning"
)

// Rules are the alerts, in one group. ratio is the near-limits ratio and
// namespace the controller's namespace as the rules read them: values, or
// the ${NEAR_LIMITS_RATIO} and ${KARPENTER_NAMESPACE} substitutions in the
// GitOps base. Annotations use Prometheus' .Labels and .Value, not
// $labels: Flux substitutes $-variables in what it applies.
func Rules(ratio, namespace string) PrometheusRule {
	var r PrometheusRule
	r.APIVersion, r.Kind = "monitoring.coreos.com/v1", "PrometheusRule"
	r.Metadata = ObjectMeta{Name: "karpenter", Labels: map[string]string{"app.kubernetes.io/name": "karpenter"}}
	// The controller's scrape targets: prometheus-operator v0.85.0 labels
	// a PodMonitor's targets job="<its namespace>/<its name>" and
	// namespace=<the pod's> (pkg/prometheus/promcfg.go), and Prometheus
	// adds up, 1 when the scrape succeeded (v0.316.0 scrape/scrape.go).
	up := fmt.Sprintf(`up{job=~".+/karpenter", namespace="%s"}`, namespace)
	rules := []Rule{
		{
			Alert: AlertControllerDown,
			// Every other rule reads the controller's own metrics and goes
			// silent with it.
			Expr: fmt.Sprintf(`absent(%s == 1)`, up),
			For:  "5m", Labels: severity(critical),
			Annotations: annotations(AlertControllerDown,
				"No Karpenter controller is scraped: nothing launches, consolidates or handles interruptions, and every other Karpenter alert is silent.",
				"Check: kubectl get pods -n "+namespace+" -l app.kubernetes.io/name=karpenter, and the pods' logs and events; the claim's ControllerReady condition. "+
					"Then: see the runbook for a crash loop (credentials, a webhook, the system nodes' capacity)."),
		},
		{
			Alert: AlertNoLeader,
			// controller-runtime's leader gauge (v0.24.1, the version Karpenter
			// 1.15.0's go.mod requires:
			// pkg/metrics/leaderelection.go): 1 on the leader, 0 once a
			// replica lost the lease; Karpenter's controllers run on the
			// leader alone.
			Expr: fmt.Sprintf(`max(%s{namespace="%s"}) < 1`, LeaderStatus, namespace),
			For:  "10m", Labels: severity(critical),
			Annotations: annotations(AlertNoLeader,
				"Karpenter's pods run, but none holds the leader lease: no controller reconciles.",
				"Check: kubectl get lease -n "+namespace+", and the pods' logs for leader election errors (the API server unreachable, RBAC on leases). "+
					"Then: restart the pods once the API server answers."),
		},
		{
			Alert:  AlertEC2NodeClassNotReady,
			Expr:   fmt.Sprintf(`max by (name) (%s{type="Ready", status!="True"}) > 0`, EC2NodeClassCondition),
			For:    "10m",
			Labels: severity(warning),
			Annotations: annotations(AlertEC2NodeClassNotReady,
				"EC2NodeClass {{ .Labels.name }} is not Ready: Karpenter launches no node for its pools.",
				"Check: kubectl describe ec2nodeclass {{ .Labels.name }} (SubnetsReady, SecurityGroupsReady, AMIsReady, InstanceProfileReady, ValidationSucceeded). "+
					"Then: fix the selector tags, the pinned AMI alias or the instance profile; the claim's AccessCheckReady and NodeClassesValidated conditions say which."),
		},
		{
			Alert:  AlertNodePoolNotReady,
			Expr:   fmt.Sprintf(`max by (name) (%s{type="Ready", status!="True"}) > 0`, NodePoolCondition),
			For:    "10m",
			Labels: severity(warning),
			Annotations: annotations(AlertNodePoolNotReady,
				"NodePool {{ .Labels.name }} is not Ready: Karpenter provisions no node for it.",
				"Check: kubectl describe nodepool {{ .Labels.name }} (NodeClassReady, ValidationSucceeded, NodeRegistrationHealthy). "+
					"Then: fix the EC2NodeClass it names, or the pool's requirements."),
		},
		{
			Alert: AlertNodePoolNearLimits,
			Expr: fmt.Sprintf(`%s{resource_type=~"cpu|memory"} / on (nodepool, resource_type) %s{resource_type=~"cpu|memory"} >= %s`,
				NodePoolUsage, NodePoolLimit, ratio),
			For:    "15m",
			Labels: severity(warning),
			Annotations: annotations(AlertNodePoolNearLimits,
				"NodePool {{ .Labels.nodepool }} uses {{ .Value | humanizePercentage }} of its {{ .Labels.resource_type }} limit.",
				"Karpenter stops launching for a pool at its limits: pods that need more stay Pending. "+
					"Check: the claim's status.pools. Then: raise the pool's limits in the claim, within the platform's ceilings."),
		},
		{
			Alert: AlertEC2APIErrors,
			// code is the HTTP status (aws-sdk-go-prometheus v0.1.1
			// common/metrics.go). EC2 answers a dry run that would have
			// succeeded with DryRunOperation, HTTP 412: Karpenter's
			// EC2NodeClass validation dry-runs CreateFleet,
			// CreateLaunchTemplate and RunInstances (karpenter-provider-aws
			// v1.15.0 pkg/controllers/nodeclass/validation.go; the 412s are
			// reported in aws/karpenter-provider-aws#8015), and its start-up
			// dry-runs DescribeInstanceTypes (pkg/operator/operator.go).
			// Neither is an error. An action called fewer than 6 times in
			// 10m (a validation's single call) alerts on nothing.
			Expr: fmt.Sprintf(`(sum by (action) (rate(%[1]s{service="EC2", code=~"4..|5..", code!="412"}[10m])) `+
				`/ sum by (action) (rate(%[1]s{service="EC2", code!="412"}[10m])) > 0.05) `+
				`and on (action) sum by (action) (increase(%[1]s{service="EC2", code!="412"}[10m])) >= 6`, AWSRequests),
			For:    "15m",
			Labels: severity(warning),
			Annotations: annotations(AlertEC2APIErrors,
				"{{ .Value | humanizePercentage }} of Karpenter's EC2 {{ .Labels.action }} calls fail.",
				"An UnauthorizedOperation from a boundary or an SCP, or throttling. "+
					"Check: the controller's logs for the action. Then: compare the role's policy and boundary with what the call needs; the claim's access check re-proves them."),
		},
		{
			Alert: AlertLaunchesFailing,
			// A Create error is a NodeClaim no offering could launch
			// (sigs.k8s.io/karpenter v1.15.0
			// pkg/cloudprovider/metrics/cloudprovider.go: by method, error
			// and nodepool). Insufficient capacity comes back inside a
			// 200 CreateFleet response, so the API's codes never show it.
			Expr:   fmt.Sprintf(`sum by (nodepool, error) (increase(%s{method="Create"}[15m])) >= 3`, CloudProviderErrors),
			For:    "15m",
			Labels: severity(critical),
			Annotations: annotations(AlertLaunchesFailing,
				"Karpenter cannot launch nodes for NodePool {{ .Labels.nodepool }}: {{ .Value | humanize }} launches failed ({{ .Labels.error }}) in 15 minutes.",
				"Check: "+LaunchFailures+" by reason and zone, and kubectl get nodeclaims. "+
					"Then: for InsufficientCapacityError widen the pool's instance categories, zones or capacity types; otherwise read the NodeClaims' Launched condition."),
		},
		{
			Alert: AlertNodesNotRegistering,
			// Karpenter deletes a NodeClaim whose instance did not launch,
			// or whose node did not register, within its liveness timeout
			// and counts it (sigs.k8s.io/karpenter v1.15.0
			// pkg/controllers/nodeclaim/lifecycle/liveness.go, reasons
			// launch_timeout and registration_timeout): twice in an hour is
			// a loop of billed instances replaced every few minutes.
			Expr:   fmt.Sprintf(`sum by (nodepool) (increase(%s{reason=~"launch_timeout|registration_timeout"}[1h])) >= 2`, NodeClaimsDisrupted),
			Labels: severity(critical),
			Annotations: annotations(AlertNodesNotRegistering,
				"NodePool {{ .Labels.nodepool }}: {{ .Value | humanize }} instances launched in the last hour never joined the cluster; Karpenter replaces them, and each is billed.",
				"Check: kubectl describe nodepool {{ .Labels.nodepool }} (NodeRegistrationHealthy), and an instance's console output (user data, the node role's access entry, the AMI). "+
					"Then: fix what keeps the kubelet from joining; lower the pool's limits meanwhile."),
		},
		{
			Alert: AlertNodesNotInitialized,
			// A NodeClaim whose Initialized condition has not been True for
			// 15m: registered but never ready, or a startup taint that never
			// leaves (the CNI's). operatorpkg's status controller reports the
			// time each condition has held its status, by object name.
			Expr:   fmt.Sprintf(`max by (name) (%s{type="Initialized", status!="True"}) > 900`, NodeClaimConditionSeconds),
			For:    "5m",
			Labels: severity(critical),
			Annotations: annotations(AlertNodesNotInitialized,
				"NodeClaim {{ .Labels.name }} has not initialized in {{ .Value | humanizeDuration }}: a billed instance runs no pod.",
				"Check: kubectl describe nodeclaim {{ .Labels.name }} and its node's taints and conditions (a CNI startup taint that never leaves, a NotReady kubelet). "+
					"Then: fix the DaemonSet that should remove the taint; the pool's consolidateAfter must outlast the CNI's start."),
		},
		{
			Alert: AlertInterruptionStalled,
			// The interruption controller long-polls the queue (20s) and
			// polls again at once (karpenter-provider-aws v1.15.0
			// pkg/providers/sqs/sqs.go, pkg/controllers/interruption):
			// about three successful ReceiveMessage calls a minute, even idle.
			Expr: fmt.Sprintf(`(sum(rate(%s{service="SQS", action="ReceiveMessage", code="200"}[10m])) or vector(0)) == 0 and on () count(%s == 1) > 0`,
				AWSRequests, up),
			For:    "10m",
			Labels: severity(critical),
			Annotations: annotations(AlertInterruptionStalled,
				"Karpenter reads nothing from its interruption queue: Spot interruptions and scheduled events reach no node before it goes.",
				"Check: the controller's logs for the queue (AccessDenied, NonExistentQueue), the claim's InterruptionWiringReady condition. "+
					"Then: restore the queue or its policy (the claim recomposes them) or the role's sqs permissions."),
		},
		{
			Alert: AlertNodeTerminationStuck,
			// How long each NodeClaim has been terminating (operatorpkg's
			// status controller). With no terminationGracePeriod (the
			// default) a drain a PodDisruptionBudget blocks never ends, and
			// an uninstall waits on it.
			Expr:   fmt.Sprintf(`max by (name) (%s) > 3600`, NodeClaimTerminatingSeconds),
			Labels: severity(warning),
			Annotations: annotations(AlertNodeTerminationStuck,
				"NodeClaim {{ .Labels.name }} has been terminating for {{ .Value | humanizeDuration }}.",
				"Check: kubectl describe nodeclaim {{ .Labels.name }}, and the pods left on its node (a PodDisruptionBudget that allows no disruption, karpenter.sh/do-not-disrupt). "+
					"Then: move or scale the blocking workload; an uninstall of the claim waits on this node."),
		},
		{
			Alert: AlertUnschedulablePods,
			// Karpenter sets a pending pod's unbound time while the pod is
			// not scheduled and deletes the series once it is bound
			// (sigs.k8s.io/karpenter v1.15.0
			// pkg/controllers/metrics/pod/controller.go): a pod bound to a
			// node but stuck pulling its image is not counted.
			Expr:   fmt.Sprintf(`count(%s > 900) > 0`, PodUnboundSeconds),
			For:    "5m",
			Labels: severity(warning),
			Annotations: annotations(AlertUnschedulablePods,
				"{{ .Value }} pods have waited over 15 minutes for a node.",
				"Karpenter could place them on no NodePool, or its launches fail. "+
					"Check: kubectl get events -A --field-selector reason=FailedScheduling, and the pods' Karpenter events. "+
					"Then: give the pods a pool's tolerations and requirements, or raise the pool's limits."),
		},
	}
	r.Spec.Groups = []RuleGroup{{Name: "karpenter", Rules: rules}}
	return r
}

func severity(s string) map[string]string { return map[string]string{"severity": s} }

func annotations(alert, summary, description string) map[string]string {
	return map[string]string{
		"summary":     summary,
		"description": description,
		"runbook_url": RunbookBase + strings.ToLower(alert),
	}
}
