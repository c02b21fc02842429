// Package monitoring is what ships with the controller so a platform sees
// Karpenter at work: its alert rules, the PodMonitor that scrapes the
// controller, and the capacity and performance dashboards, all built here
// from the metrics Karpenter exports and written into the GitOps base
// examples/gitops/monitoring by hack/monitoringgen. The composed monitoring
// Kustomization (internal/flux) sets their namespace, labels and the
// near-limits ratio.
package monitoring

// The metrics the rules and dashboards read, as Karpenter 1.15.0 and the
// libraries it exports metrics from name them (test/flux reads every name
// out of their sources, so a renamed metric fails the build).
const (
	// sigs.k8s.io/karpenter pkg/controllers/metrics/nodepool: what a
	// pool's nodes use and its spec.limits, by nodepool and resource_type
	// (cpu in cores, memory in bytes).
	NodePoolUsage = "karpenter_nodepools_usage"
	NodePoolLimit = "karpenter_nodepools_limit"
	// github.com/awslabs/operatorpkg status: one series per condition
	// type and status of each object, by name.
	NodePoolCondition     = "operator_nodepool_status_condition_count"
	EC2NodeClassCondition = "operator_ec2nodeclass_status_condition_count"
	// sigs.k8s.io/karpenter pkg/controllers/provisioning/scheduling: pods
	// the last scheduling simulation could place on no NodePool.
	UnschedulablePods = "karpenter_scheduler_unschedulable_pods_count"
	// sigs.k8s.io/karpenter pkg/controllers/metrics/pod: one series per
	// pod, by phase.
	PodState           = "karpenter_pods_state"
	SchedulingDuration = "karpenter_scheduler_scheduling_duration_seconds"
	// github.com/jonathan-innis/aws-sdk-go-prometheus: every AWS API
	// request, by service, action and HTTP status code.
	AWSRequests        = "aws_sdk_go_request_total"
	AWSRequestDuration = "aws_sdk_go_request_duration_seconds"
	// sigs.k8s.io/karpenter: nodes and node claims.
	NodeAllocatable     = "karpenter_nodes_allocatable"
	NodePodRequests     = "karpenter_nodes_total_pod_requests"
	NodeClaimsCreated   = "karpenter_nodeclaims_created_total"
	NodeClaimsDisrupted = "karpenter_nodeclaims_disrupted_total"
	// karpenter-provider-aws: launches EC2 refused, and interruption
	// messages read from the queue.
	LaunchFailures        = "karpenter_cloudprovider_instance_launch_failures_total"
	InterruptionMessages  = "karpenter_interruption_received_messages_total"
	CloudProviderDuration = "karpenter_cloudprovider_duration_seconds"
	// sigs.k8s.io/karpenter pkg/cloudprovider/metrics: errors of the
	// cloud provider's methods, by method, error and nodepool.
	CloudProviderErrors = "karpenter_cloudprovider_errors_total"
	// github.com/awslabs/operatorpkg status: how long each NodeClaim's
	// condition has held its status, and how long it has been terminating.
	NodeClaimConditionSeconds   = "operator_nodeclaim_status_condition_current_status_seconds"
	NodeClaimTerminatingSeconds = "operator_nodeclaim_termination_current_time_seconds"
	// sigs.k8s.io/karpenter pkg/controllers/metrics/pod: how long a pending,
	// unscheduled pod has waited, by name and namespace.
	PodUnboundSeconds = "karpenter_pods_unbound_time_seconds"
	// sigs.k8s.io/controller-runtime pkg/metrics: 1 on the replica that
	// holds the leader lease.
	LeaderStatus = "leader_election_master_status"
	// sigs.k8s.io/controller-runtime: reconciles and work queues.
	ReconcileErrors = "controller_runtime_reconcile_errors_total"
	WorkQueueDepth  = "workqueue_depth"
)

// Histograms are exposed as <name>_bucket, _sum and _count.
const bucket = "_bucket"

// NearLimitsVar is the Flux substitution the monitoring Kustomization sets
// to the platform's near-limits ratio.
const NearLimitsVar = "NEAR_LIMITS_RATIO"

// KarpenterNamespaceVar is the Flux substitution naming the controller's
// namespace, where the PodMonitor finds its pods.
const KarpenterNamespaceVar = "KARPENTER_NAMESPACE"
