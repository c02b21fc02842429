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
)

// The final check: the last thing an uninstall waits on before the
// controller's AWS access goes. Karpenter releases a NodeClaim once its
// instance is no longer listed, and a DescribeInstances that lags may stop
// listing an instance still running; Karpenter leaves that one to its
// garbage collector (karpenter-provider-aws v1.15.0,
// pkg/providers/instance/instance.go, Delete), which an uninstall stops
// with the controller. So, once the controller is gone, a Pod in the
// claimed cluster lists, under the controller's own identity, the instances
// Karpenter would call its own, and lets the uninstall go on only when
// there are none.
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
// gone, and Usages keep the Role, its policy, the Pod Identity association,
// the namespace, the ServiceAccount and the check's RBAC until the Object is
// gone (package usage).
const (
	FinalCheck               fnresource.Name = "final-check"
	FinalCheckRBAC           fnresource.Name = "final-check-rbac"
	FinalCheckRBACBinding    fnresource.Name = "final-check-rbac-binding"
	FinalCheckServiceAccount fnresource.Name = "final-check-service-account"
	FinalCheckToken          fnresource.Name = "final-check-token"
)

// FinalCheckName names the final check's Deployment, its ServiceAccount,
// Role and RoleBinding in the controller's namespace.
const FinalCheckName = "karpenter-final-check"

// FinalCheckTokenName is the Secret holding the API token of the final
// check's ServiceAccount, and FinalCheckTokenDir where its Pod mounts it.
//
// Two identities, because one ServiceAccount cannot carry both: AWS's
// comes through EKS Pod Identity, whose association and the controller
// role's trust name the controller's ServiceAccount (policy.ControllerTrust),
// so the Pod runs as that one; the Kubernetes API's is the final check's
// own ServiceAccount, bound to FinalCheckRBAC alone, through this token,
// as the Pod gets no token of the controller's (the chart binds that one
// to Karpenter's cluster roles). A projected token is only ever the Pod's
// own ServiceAccount's, so the token is a ServiceAccount token Secret,
// which kube-controller-manager fills (its serviceaccount-token
// controller) and keeps while the ServiceAccount exists.
const (
	FinalCheckTokenName = FinalCheckName + "-token"
	FinalCheckTokenDir  = "/var/run/secrets/socle.do-now.io/final-check"
)

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

// FinalCheckScript is what the final check's Pod runs: every
// FINAL_CHECK_SECONDS (30 unless set), read its own Deployment's metadata;
// once that is marked deleted, list the instances; none left: remove the
// finalizer, some: name them (instance IDs only: anything else the CLI
// prints is never written into the patch). It reads and patches that one
// Deployment and nothing else, as its own ServiceAccount's token allows
// (FinalCheckRBAC).
func FinalCheckScript(c *config.Config) string {
	ns := c.Input.PodIdentity.Namespace
	var b strings.Builder
	line := func(s string) { b.WriteString(s + "\n") }
	line(`set -u`)
	line(`sa=${SERVICE_ACCOUNT_DIR:-` + FinalCheckTokenDir + `}`)
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
	line(`    case "$meta" in`)
	line(`    *'"deletionTimestamp":'*)`)
	call := FinalCheckCall(c)
	line(`      if left=$(` + words(call.Args) + ` 2>"$HOME/final-check.err"); then`)
	line(`        left=$(echo $left); [ "$left" != None ] || left=`)
	line(`        case "$left" in`)
	line(`        "")`)
	line(`          patch strategic-merge-patch ` + quote(`{"metadata":{"$deleteFromPrimitiveList/finalizers":["`+FinalCheckFinalizer+`"]}}`) + ` && echo "final check: no instance left, the uninstall goes on" ;;`)
	line(`        *[!0-9a-z\ -]*)`)
	line(`          echo "final check: an answer that lists no instance IDs: $left" >&2`)
	line(`          patch merge-patch ` + quote(`{"metadata":{"annotations":{"`+FinalCheckLeft+`":"unknown: ec2 describe-instances answered no instance IDs, see the Pod log"}}}`) + ` ;;`)
	line(`        *)`)
	line(`          echo "final check: instances left: $left"`)
	line(`          patch merge-patch "{\"metadata\":{\"annotations\":{\"` + FinalCheckLeft + `\":\"$left\"}}}" ;;`)
	line(`        esac`)
	line(`      else`)
	line(`        echo "final check: cannot list the instances: $(cat "$HOME/final-check.err")" >&2`)
	line(`        patch merge-patch ` + quote(`{"metadata":{"annotations":{"`+FinalCheckLeft+`":"unknown: ec2 describe-instances failed, see the Pod log"}}}`))
	line(`      fi ;;`)
	line(`    esac`)
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
	// runs, as its ServiceAccount for AWS, with no token of it, in the
	// same image.
	spec := *builtPod(c).Spec.DeepCopy()
	// A Pod that keeps running: restarted if it ends, and with its own
	// ServiceAccount's API token, which it reads its Deployment with (the
	// access check has none).
	spec.RestartPolicy = corev1.RestartPolicyAlways
	spec.ActiveDeadlineSeconds = nil
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "api-token", VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: FinalCheckTokenName, Items: []corev1.KeyToPath{{Key: "token", Path: "token"}, {Key: "ca.crt", Path: "ca.crt"}}},
	}})
	ctr := &spec.Containers[0]
	ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: "api-token", MountPath: FinalCheckTokenDir, ReadOnly: true})
	ctr.Command = []string{"/bin/sh", "-c", FinalCheckScript(c)}
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
		FinalCheckToken: &corev1.Secret{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: FinalCheckTokenName, Namespace: ns, Labels: labels,
				Annotations: map[string]string{corev1.ServiceAccountNameKey: FinalCheckName}},
			Type: corev1.SecretTypeServiceAccountToken,
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
