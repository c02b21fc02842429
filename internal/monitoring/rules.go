package monitoring

import "fmt"

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
	AlertEC2NodeClassNotReady = "KarpenterEC2NodeClassNotReady"
	AlertNodePoolNotReady     = "KarpenterNodePoolNotReady"
	AlertNodePoolNearLimits   = "KarpenterNodePoolNearLimits"
	AlertEC2APIErrors         = "KarpenterEC2APIErrors"
	AlertUnschedulablePods    = "KarpenterPodsUnschedulable"
)

// Rules are the five alerts, in one group. ratio is the near-limits ratio
// as the rule reads it: a number, or the ${NEAR_LIMITS_RATIO} substitution
// in the GitOps base. Annotations use Prometheus' .Labels and .Value, not
// $labels: Flux substitutes $-variables in what it applies.
func Rules(ratio string) PrometheusRule {
	var r PrometheusRule
	r.APIVersion, r.Kind = "monitoring.coreos.com/v1", "PrometheusRule"
	r.Metadata = ObjectMeta{Name: "karpenter", Labels: map[string]string{"app.kubernetes.io/name": "karpenter"}}
	warning := map[string]string{"severity": "warning"}
	r.Spec.Groups = []RuleGroup{{Name: "karpenter", Rules: []Rule{
		{
			Alert:  AlertEC2NodeClassNotReady,
			Expr:   fmt.Sprintf(`max by (name) (%s{type="Ready", status!="True"}) > 0`, EC2NodeClassCondition),
			For:    "10m",
			Labels: warning,
			Annotations: map[string]string{
				"summary": "EC2NodeClass {{ .Labels.name }} is not Ready: Karpenter launches no node for its pools.",
				"description": "Karpenter resolves an EC2NodeClass's subnets, security groups, AMI and instance profile before it launches anything for it. " +
					"Check: kubectl describe ec2nodeclass {{ .Labels.name }} (its status conditions name what failed: SubnetsReady, SecurityGroupsReady, AMIsReady, InstanceProfileReady). " +
					"Then: fix the selector tags on the subnets or groups, the pinned AMI alias, or the instance profile; the claim's AccessCheckReady condition proves them from the controller's role.",
			},
		},
		{
			Alert:  AlertNodePoolNotReady,
			Expr:   fmt.Sprintf(`max by (name) (%s{type="Ready", status!="True"}) > 0`, NodePoolCondition),
			For:    "10m",
			Labels: warning,
			Annotations: map[string]string{
				"summary": "NodePool {{ .Labels.name }} is not Ready: Karpenter provisions no node for it.",
				"description": "A NodePool is Ready once its EC2NodeClass is and its spec validates. " +
					"Check: kubectl describe nodepool {{ .Labels.name }} (NodeClassReady, ValidationSucceeded). " +
					"Then: fix the EC2NodeClass it names (see KarpenterEC2NodeClassNotReady), or the pool's requirements.",
			},
		},
		{
			Alert: AlertNodePoolNearLimits,
			Expr: fmt.Sprintf(`%s{resource_type=~"cpu|memory"} / on (nodepool, resource_type) %s{resource_type=~"cpu|memory"} >= %s`,
				NodePoolUsage, NodePoolLimit, ratio),
			For:    "15m",
			Labels: warning,
			Annotations: map[string]string{
				"summary": "NodePool {{ .Labels.nodepool }} uses {{ .Value | humanizePercentage }} of its {{ .Labels.resource_type }} limit.",
				"description": "Karpenter stops launching nodes for a pool once its nodes reach its limits: pods that need more stay Pending. " +
					"Check: kubectl get nodepool {{ .Labels.nodepool }} -o jsonpath='{.status.resources}' against spec.limits, and the claim's status.pools. " +
					"Then: raise the pool's limits in the claim (within the platform's ceiling), or move workloads to another pool.",
			},
		},
		{
			Alert: AlertEC2APIErrors,
			Expr: fmt.Sprintf(`sum by (action) (rate(%[1]s{service="EC2", code=~"4..|5.."}[10m])) / sum by (action) (rate(%[1]s{service="EC2"}[10m])) > 0.05`,
				AWSRequests),
			For:    "15m",
			Labels: warning,
			Annotations: map[string]string{
				"summary": "{{ .Value | humanizePercentage }} of Karpenter's EC2 {{ .Labels.action }} calls fail.",
				"description": "Karpenter's calls to EC2 return errors: an UnauthorizedOperation from a permissions boundary or an SCP, throttling, or capacity errors on launch. " +
					"Check: kubectl logs -n <karpenter namespace> deploy/karpenter | grep -i error, and karpenter_cloudprovider_instance_launch_failures_total by reason. " +
					"Then: for UnauthorizedOperation, compare the controller role's policy and boundary with what the call needs (re-run the access check from the claim); for capacity errors, widen the pool's instance categories or zones.",
			},
		},
		{
			Alert: AlertUnschedulablePods,
			// The gauge keeps its last value once no pod is pending
			// (Karpenter then skips the simulation): only pending pods
			// make it news.
			Expr:   fmt.Sprintf(`max(%s) > 0 and on () count(%s{phase="Pending"}) > 0`, UnschedulablePods, PodState),
			For:    "15m",
			Labels: warning,
			Annotations: map[string]string{
				"summary": "{{ .Value }} pods fit on no NodePool.",
				"description": "Karpenter's scheduling simulation found pods no NodePool can place: their requirements, tolerations or requests match no pool, or every matching pool is at its limits. " +
					"Check: kubectl get events -A --field-selector reason=FailedScheduling, and the events Karpenter writes on the pods (kubectl describe pod). " +
					"Then: give the pods a pool's tolerations and requirements, or raise the pool's limits.",
			},
		},
	}}}
	return r
}
