package cluster

import (
	"strings"

	fnresource "github.com/crossplane/function-sdk-go/resource"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/naming"
)

// The final check: the last thing an uninstall waits on before the
// controller's AWS access goes. Karpenter releases a NodeClaim once its
// instance is no longer listed, and a DescribeInstances that lags may stop
// listing an instance still running; Karpenter leaves that one to its
// garbage collector (karpenter-provider-aws v1.15.0,
// pkg/providers/instance/instance.go, Delete), which an uninstall stops
// with the controller. So, once the controller is gone, a Pod in the
// claimed cluster lists, under an AWS identity of its own that may do
// nothing else, the instances Karpenter would call its own, and lets the
// uninstall go on only when there are none.
//
// How it holds the uninstall: its Deployment carries FinalCheckFinalizer.
// Deleting the final-check Object deletes the Deployment with background
// propagation (provider-kubernetes v1.3.1's default deletionPropagationPolicy,
// apis/cluster/object/v1alpha2), which leaves it there, marked deleted,
// while the finalizer stays; the deployment controller then only syncs its
// status (kubernetes v1.35.4 pkg/controller/deployment, syncDeployment) and
// the garbage collector keeps its ReplicaSet and Pod until the Deployment is
// gone, so the Pod keeps running. The Pod reads its own Deployment, sees it
// marked deleted, lists the instances and removes the finalizer once none
// is left; until then it names them on the Deployment (FinalCheckLeft),
// which the Object's status shows. The Object stays until the Deployment is
// gone, and Usages keep its own role, policy and Pod Identity association,
// its ServiceAccount and RBAC, the namespace, and the controller's AWS
// access until the Object is gone (package usage).
const (
	FinalCheck               fnresource.Name = "final-check"
	FinalCheckRBAC           fnresource.Name = "final-check-rbac"
	FinalCheckRBACBinding    fnresource.Name = "final-check-rbac-binding"
	FinalCheckServiceAccount fnresource.Name = "final-check-service-account"
)

// FinalCheckName names the final check's Deployment, its ServiceAccount,
// Role and RoleBinding in the controller's namespace.
const FinalCheckName = naming.FinalCheckServiceAccount

// FinalCheckTokenDir is where the final check's Pod finds the API token of
// its own ServiceAccount, the one Kubernetes mounts in every container that
// asks for it (automountServiceAccountToken; "Configure Service Accounts for
// Pods", kubernetes.io, /var/run/secrets/kubernetes.io/serviceaccount).
//
// One ServiceAccount carries both of the Pod's identities: the Kubernetes
// API's, bound to FinalCheckRBAC alone, and AWS's, which EKS Pod Identity
// serves through the final check's own association and role
// (awsres.FinalCheckRole: ec2:DescribeInstances, and nothing else). The
// controller's ServiceAccount, bound to Karpenter's cluster roles and to
// the controller role, is no longer the Pod's.
const FinalCheckTokenDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// FinalCheckFinalizer holds the final check's Deployment until no instance
// of the cluster's is left.
const FinalCheckFinalizer = "socle.do-now.io/no-instance-left"

// FinalCheckLeft is the annotation where the final check names the
// instances it waits on, or why it cannot list them.
const FinalCheckLeft = "socle.do-now.io/instances-left"

// Available is the final check's readiness: its Pod runs, so an uninstall
// will find it.
var Available = Readiness{"policy": "DeriveFromCelQuery", "celQuery": DeploymentAvailable}

// DeploymentAvailable is Available's query on the observed Deployment.
const DeploymentAvailable = `has(object.status.availableReplicas) && object.status.availableReplicas >= 1`

// InstanceStates are the states in which Karpenter calls an instance its
// own (karpenter-provider-aws v1.15.0 pkg/providers/instance/instance.go,
// instanceStateFilter): everything but terminated.
var InstanceStates = []string{"pending", "running", "stopping", "stopped", "shutting-down"}

// FinalCheckCall is the final check's one AWS call: the instances
// Karpenter would list as its own in this cluster (its List: both its tag
// keys, the cluster's name tag, InstanceStates; same file), as instance IDs.
func FinalCheckCall(c *config.Config) Call {
	return Call{
		Args: []string{"ec2", "describe-instances", "--filters",
			"Name=tag-key,Values=karpenter.sh/nodepool",
			"Name=tag-key,Values=karpenter.k8s.aws/ec2nodeclass",
			"Name=tag:eks:eks-cluster-name,Values=" + c.Spec.Cluster.Name,
			"Name=instance-state-name,Values=" + strings.Join(InstanceStates, ","),
			"--query", "Reservations[].Instances[].InstanceId", "--output", "text"},
		Authorizations: []Authorization{{Action: "ec2:DescribeInstances", Resource: "*",
			Context: map[string][]string{"aws:RequestedRegion": {c.Account.Region}}}},
	}
}

// FinalCheckListed is the file the final check's script writes once it has
// listed the instances under its own AWS identity, which its readiness
// probe waits for: a final check that cannot list is never Ready, so the
// install stops at step three, not the uninstall at its end.
const FinalCheckListed = "/tmp/final-check-listed"

// FinalCheckScript is what the final check's Pod runs: every
// FINAL_CHECK_SECONDS (30 unless set), read its own Deployment's metadata;
// until one listing has worked, list the instances, which proves its AWS
// identity (FinalCheckListed); once the Deployment is marked deleted, list
// them each round: none left: remove the finalizer, some: name them
// (instance IDs only: anything else the CLI prints is never written into the
// patch). It reads and patches that one Deployment and nothing else, as its
// own ServiceAccount's token allows (FinalCheckRBAC).
func FinalCheckScript(c *config.Config) string {
	ns := c.Input.PodIdentity.Namespace
	var b strings.Builder
	line := func(s string) { b.WriteString(s + "\n") }
	line(`set -u`)
	line(`sa=${SERVICE_ACCOUNT_DIR:-` + FinalCheckTokenDir + `}`)
	line(`listed=${LISTED_FILE:-` + FinalCheckListed + `}`)
	line(`self="https://${KUBERNETES_SERVICE_HOST}:${KUBERNETES_SERVICE_PORT}/apis/apps/v1/namespaces/` + ns + `/deployments/` + FinalCheckName + `"`)
	line(`# kube ARGS: one request to the API server, as this Pod's ServiceAccount.`)
	line(`kube() { curl -sS --fail --max-time 30 --cacert "$sa/ca.crt" -H "Authorization: Bearer $(cat "$sa/token")" "$@"; }`)
	line(`# patch TYPE BODY: patch the Deployment this Pod belongs to.`)
	line(`patch() { kube -o /dev/null -X PATCH -H "Content-Type: application/$1+json" --data "$2" "$self"; }`)
	line(`echo "final check: waiting for the uninstall"`)
	line(`while :; do`)
	// The API server pretty-prints JSON for curl ("deletionTimestamp":
	// "...", k8s.io/apiserver v0.35.4 pkg/endpoints/handlers/negotiation,
	// isPrettyPrint): the pattern ends at the colon.
	line(`  # Its metadata only (PartialObjectMetadata): nothing of the spec, this script included, is read.`)
	line(`  if meta=$(kube -H 'Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1' "$self"); then`)
	line(`    case "$meta" in *'"deletionTimestamp":'*) deleting=1 ;; *) deleting= ;; esac`)
	line(`    if [ -n "$deleting" ] || [ ! -e "$listed" ]; then`)
	call := FinalCheckCall(c)
	line(`      if left=$(` + words(call.Args) + ` 2>"$HOME/final-check.err"); then`)
	line(`        [ -e "$listed" ] || { : >"$listed"; echo "final check: its AWS identity lists the instances"; }`)
	line(`        left=$(echo $left); [ "$left" != None ] || left=`)
	line(`        case "$deleting$left" in`)
	line(`        "") ;;`)
	line(`        1)`)
	line(`          patch strategic-merge-patch ` + quote(`{"metadata":{"$deleteFromPrimitiveList/finalizers":["`+FinalCheckFinalizer+`"]}}`) + ` && echo "final check: no instance left, the uninstall goes on" ;;`)
	line(`        1*[!0-9a-z\ -]*)`)
	line(`          echo "final check: an answer that lists no instance IDs: $left" >&2`)
	line(`          patch merge-patch ` + quote(`{"metadata":{"annotations":{"`+FinalCheckLeft+`":"unknown: ec2 describe-instances answered no instance IDs, see the Pod log"}}}`) + ` ;;`)
	line(`        1*)`)
	line(`          echo "final check: instances left: $left"`)
	line(`          patch merge-patch "{\"metadata\":{\"annotations\":{\"` + FinalCheckLeft + `\":\"$left\"}}}" ;;`)
	line(`        esac`)
	line(`      else`)
	line(`        echo "final check: cannot list the instances: $(cat "$HOME/final-check.err")" >&2`)
	line(`        [ -z "$deleting" ] || patch merge-patch ` + quote(`{"metadata":{"annotations":{"`+FinalCheckLeft+`":"unknown: ec2 describe-instances failed, see the Pod log"}}}`))
	line(`      fi`)
	line(`    fi`)
	line(`  fi`)
	line(`  sleep "${FINAL_CHECK_SECONDS:-30}"`)
	line(`done`)
	return b.String()
}

// finalCheck is the final check's Deployment, Role and RoleBinding.
func finalCheck(c *config.Config, labels map[string]string) map[fnresource.Name]runtime.Object {
	ns := c.Input.PodIdentity.Namespace
	meta := metav1.ObjectMeta{Name: FinalCheckName, Namespace: ns, Labels: labels}
	selector := map[string]string{"app.kubernetes.io/name": FinalCheckName}
	podLabels := map[string]string{"app.kubernetes.io/name": FinalCheckName}
	for k, v := range labels {
		podLabels[k] = v
	}
	// The access check's Pod, as Prepare built it: where the controller
	// runs, in the same image.
	spec := *builtPod(c).Spec.DeepCopy()
	// A Pod that keeps running: restarted if it ends, as its own
	// ServiceAccount for AWS and for the API, whose token it reads its
	// Deployment with.
	yes := true
	spec.ServiceAccountName = FinalCheckName
	spec.AutomountServiceAccountToken = &yes
	spec.RestartPolicy = corev1.RestartPolicyAlways
	spec.ActiveDeadlineSeconds = nil
	ctr := &spec.Containers[0]
	ctr.Command = []string{"/bin/sh", "-c", FinalCheckScript(c)}
	// Ready once it has listed the instances under its own identity. Every
	// field the API server would default is written as it defaults it
	// (kubernetes v1.35.4 pkg/apis/core/v1/defaults.go, SetDefaults_Probe),
	// so the Deployment the claimed cluster returns holds the manifest
	// (sequence.Behind) instead of a 3 where the manifest says 0.
	ctr.ReadinessProbe = &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "test -e " + FinalCheckListed}}},
		TimeoutSeconds:   1,
		PeriodSeconds:    10,
		SuccessThreshold: 1,
		FailureThreshold: 3,
	}
	ctr.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	ctr.Env = awsEnv(c) // not the cluster's version: an upgrade of the cluster changes nothing here
	one := int32(1)
	deployment := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: *meta.DeepCopy(),
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels}, Spec: spec},
		},
	}
	deployment.Finalizers = []string{FinalCheckFinalizer}
	return map[fnresource.Name]runtime.Object{
		FinalCheck: deployment,
		FinalCheckServiceAccount: &corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: *meta.DeepCopy(),
		},
		FinalCheckRBAC: &rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: *meta.DeepCopy(),
			Rules: []rbacv1.PolicyRule{{
				APIGroups: []string{"apps"}, Resources: []string{"deployments"},
				ResourceNames: []string{FinalCheckName}, Verbs: []string{"get", "patch"},
			}},
		},
		FinalCheckRBACBinding: &rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: *meta.DeepCopy(),
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: FinalCheckName},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: FinalCheckName, Namespace: ns}},
		},
	}
}
