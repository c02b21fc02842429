//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/do-now/function-karpenter/internal/cluster"
)

// An accessCheckRun is one access check Pod's container, run by accessCheckKubelet.
type accessCheckRun struct {
	*proc
	dir      string
	started  metav1.Time
	reported bool // its end is written in the Pod's status
}

// accessCheckKubelet plays, for the access check's Pods, the part of a kubelet kwok cannot:
// running their container and reporting how it ended. kwok reports a Pod Running (its
// pod-ready Stage, which selects Pending Pods only, so it leaves a finished Pod alone); this
// runs the container's command (the preflight's script, under /bin/sh) on this machine with the
// container's environment, and with, for the AWS CLI, internal/cluster's test binary
// (E2E_FAKE_AWS, its fakeaws_test.go): a stand-in for AWS, answering as the claimed
// cluster's account does (awsAccountEnv) and with the identity the Pod Identity stand-in gives
// the Pod (podIdentityEnv). Its one change to the script's environment: the termination
// message's path (TERMINATION_LOG), a file of the Pod's own where the kubelet mounts one.
// When the script exits, the Pod's status is written as the kubelet writes it (podEnded). A
// Pod deleted, its process is stopped.
func (c *claimedCluster) accessCheckKubelet(ctx context.Context) {
	pods, err := c.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	live := map[types.UID]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !strings.HasPrefix(p.Name, cluster.AccessCheckPod+"-") || p.Spec.RestartPolicy != corev1.RestartPolicyNever {
			continue
		}
		live[p.UID] = true
		run := c.accessChecks[p.UID]
		switch {
		case run == nil && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && !c.checksHeld.Load():
			run, err := c.runAccessCheck(ctx, p)
			if err != nil {
				fmt.Printf("e2e: claimed cluster %s: cannot run the access check's Pod %s: %v\n", c.name, p.Name, err)
				continue
			}
			c.accessChecks[p.UID] = run
		case run != nil && !run.reported:
			if done, err := run.exited(); done {
				// Written again on the next round if the API server did not take it.
				run.reported = c.podEnded(ctx, p, run, err) == nil
			}
		}
	}
	for uid, run := range c.accessChecks {
		if !live[uid] {
			run.stop(time.Second)
			delete(c.accessChecks, uid)
		}
	}
}

func (c *claimedCluster) runAccessCheck(ctx context.Context, p *corev1.Pod) (*accessCheckRun, error) {
	fakeAWS := os.Getenv("E2E_FAKE_AWS")
	if fakeAWS == "" {
		return nil, errors.New("E2E_FAKE_AWS must be set: run the suite with `make e2e-test`")
	}
	dir := filepath.Join(c.dir, "access-check-"+string(p.UID))
	bin, state := filepath.Join(dir, "bin"), filepath.Join(dir, "aws-state")
	for _, d := range []string{bin, state} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	// The test binary is the fake AWS CLI when it is called aws (its TestMain).
	if err := os.Symlink(fakeAWS, filepath.Join(bin, "aws")); err != nil {
		return nil, err
	}
	identity, err := c.podIdentityEnv(ctx, p)
	if err != nil {
		return nil, err
	}
	account, err := c.awsAccountEnv()
	if err != nil {
		return nil, err
	}
	ctr := p.Spec.Containers[0]
	env := []string{"PATH=" + bin + ":/usr/bin:/bin", "TERMINATION_LOG=" + filepath.Join(dir, "termination-log"), "FAKE_AWS_STATE=" + state}
	env = append(append(env, account...), identity...)
	if r := c.refusal.Load(); r != nil {
		env = append(env, "FAIL="+r.call, "ANSWER="+r.answer)
	}
	for _, e := range ctr.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	// The container's HOME is /tmp, its own emptyDir: here, a directory of the Pod's own.
	env = append(env, "HOME="+dir)
	run, err := startProc(c.logDir, "access-check-"+p.Name, env, ctr.Command[0], ctr.Command[1:]...)
	if err != nil {
		return nil, err
	}
	started := metav1.Now()
	if s := p.Status.ContainerStatuses; len(s) == 1 && s[0].State.Running != nil {
		started = s[0].State.Running.StartedAt
	}
	return &accessCheckRun{proc: run, dir: dir, started: started}, nil
}

// podEnded writes p's status as the kubelet does once its one container, which never restarts,
// exited with err: the phase Succeeded or Failed; the container terminated with its exit code,
// the reason containerd gives (Completed for 0, else Error: containerd v2.4.2
// internal/cri/server/helpers.go) and the termination message: the file's first 4 KiB, or, when
// it is empty and the container failed under FallbackToLogsOnError, the log's last 80 lines and
// 2 KiB (k8s.io/kubernetes v1.35.4 pkg/kubelet/kuberuntime/kuberuntime_container.go,
// pkg/kubelet/container/runtime.go); Ready and ContainersReady False with the terminal
// phase's reason (pkg/kubelet/status/generate.go).
func (c *claimedCluster) podEnded(ctx context.Context, p *corev1.Pod, run *accessCheckRun, err error) error {
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		return err
	}
	phase, reason, ready := corev1.PodSucceeded, "Completed", "PodCompleted"
	if code != 0 {
		phase, reason, ready = corev1.PodFailed, "Error", "PodFailed"
	}
	message, _ := os.ReadFile(filepath.Join(run.dir, "termination-log"))
	message = message[:min(len(message), 4096)]
	ctr := p.Spec.Containers[0]
	if len(message) == 0 && code != 0 && ctr.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
		message = []byte(containerLogTail(run.log, 80, 2048))
	}
	now := metav1.Now()
	p = p.DeepCopy()
	p.Status.Phase = phase
	for i, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady || cond.Type == corev1.ContainersReady {
			p.Status.Conditions[i] = corev1.PodCondition{Type: cond.Type, Status: corev1.ConditionFalse, Reason: ready, LastTransitionTime: now}
		}
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: ctr.Name, Image: ctr.Image,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: int32(code), Reason: reason, Message: string(message), StartedAt: run.started, FinishedAt: now,
		}},
	}}
	_, err = c.kube.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return err
}

// containerLogTail is the container's output in a proc's log (after startProc's first line,
// the command) as the kubelet reads it back: its last lines lines, at most size bytes.
func containerLogTail(log string, lines, size int) string {
	b, _ := os.ReadFile(log)
	_, out, _ := strings.Cut(string(b), "\n")
	l := strings.SplitAfter(out, "\n")
	out = strings.Join(l[max(0, len(l)-lines):], "")
	return out[max(0, len(out)-size):]
}

// podIdentityEnv is a stand-in for EKS Pod Identity: the identity the fake AWS CLI answers a
// Pod with (FAKE_IDENTITY). A Pod gets credentials only if an association in AWS (one the
// e2e's provider-aws reports Ready on the hub) names its cluster, namespace and service
// account, and only if that association had propagated when the Pod was admitted: EKS's
// webhook injects the credentials' endpoint at admission, so a Pod admitted before never gets
// any (seed 000's race; c.admittedEarly says which Pods were). Without credentials the CLI
// finds none (FAKE_NO_CREDENTIALS, every call). With them it is the association's role's
// session: arn:aws:sts::ACCOUNT:assumed-role/ROLE-NAME/eks-CLUSTER-POD-UUID, the role's path
// left out of an assumed-role ARN (hashicorp/terraform-provider-aws#19957) and the session
// named as the EKS Auth API says (AssumedRoleUser.assumeRoleId: eks-clustername-podname-random
// UUID).
func (c *claimedCluster) podIdentityEnv(ctx context.Context, p *corev1.Pod) ([]string, error) {
	none := []string{"FAKE_NO_CREDENTIALS=1000"}
	if c.admittedEarly != nil && c.admittedEarly(p) {
		fmt.Printf("e2e: claimed cluster %s: Pod %s admitted before its Pod Identity association propagated: no credentials\n", c.name, p.Name)
		return none, nil
	}
	session, err := c.podIdentity(ctx, p)
	if err != nil || session == "" {
		return none, err
	}
	return []string{"FAKE_IDENTITY=" + session}, nil
}

// podIdentity is the session EKS Pod Identity gives Pod p (see podIdentityEnv), or "" when no
// Ready association names its cluster, namespace and ServiceAccount.
func (c *claimedCluster) podIdentity(ctx context.Context, p *corev1.Pod) (string, error) {
	roleARN, err := c.podIdentityRole(ctx, p)
	if err != nil || roleARN == "" {
		return "", err
	}
	// arn:aws:iam::ACCOUNT:role/PATH/NAME
	parts := strings.Split(roleARN, ":")
	role := parts[5][strings.LastIndex(parts[5], "/")+1:]
	return fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/eks-%s-%s-%s", parts[4], role, c.name, p.Name, p.UID), nil
}

// podIdentityRole is the ARN of the role a Ready Pod Identity association names for Pod p's
// cluster, namespace and ServiceAccount, or "" when none does.
func (c *claimedCluster) podIdentityRole(ctx context.Context, p *corev1.Pod) (string, error) {
	for _, k := range composedKinds {
		if k.kind != "PodIdentityAssociation" {
			continue
		}
		l, err := cp.dyn.Resource(k.gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		for _, a := range l.Items {
			fp := map[string]string{}
			for _, f := range []string{"clusterName", "namespace", "serviceAccount", "roleArn"} {
				fp[f], _, _ = unstructured.NestedString(a.Object, "spec", "forProvider", f)
			}
			if fp["clusterName"] != c.name || fp["namespace"] != p.Namespace || fp["serviceAccount"] != p.Spec.ServiceAccountName ||
				conditionStatus(&a, "Ready") != "True" {
				continue
			}
			if parts := strings.Split(fp["roleArn"], ":"); len(parts) != 6 {
				return "", fmt.Errorf("association %s: roleArn %q is no role ARN", a.GetName(), fp["roleArn"])
			}
			return fp["roleArn"], nil
		}
	}
	fmt.Printf("e2e: claimed cluster %s: no Pod Identity association Ready for %s/%s: Pod %s gets no credentials\n", c.name, p.Namespace, p.Spec.ServiceAccountName, p.Name)
	return "", nil
}

// awsAccountEnv is the claimed cluster's AWS account as the fake AWS CLI answers for it: the
// cluster's VPC as the e2e's provider-aws reports it (atProvider), one subnet in each of the
// region's first three zones and a security group in that VPC, and the instance profile
// carrying the node role the platform's tenancy declares for the cluster: a healthy account.
func (c *claimedCluster) awsAccountEnv() ([]string, error) {
	declared, err := c.declared()
	if err != nil {
		return nil, err
	}
	role, _, _ := unstructured.NestedString(declared, "nodeIdentity", "roleArn")
	return []string{"FAKE_VPC=" + testVPC, "FAKE_PROFILE_ROLE=" + role}, nil
}

// refuse has the cluster's AWS refuse as r says, for the access check Pods started from now on
// (nil: a healthy account again). A Pod already started keeps the AWS it started with.
func (c *claimedCluster) refuse(r *awsRefusal) { c.refusal.Store(r) }

// firstPodOnly is an admittedEarly that says so of the first Pod it is asked about only.
func firstPodOnly() func(*corev1.Pod) bool {
	var first types.UID
	return func(p *corev1.Pod) bool {
		if first == "" {
			first = p.UID
		}
		return p.UID == first
	}
}

// noCredentials is what the AWS CLI says when it finds no credentials (its wording since
// aws/aws-cli#475), as the fake AWS CLI says it too.
const noCredentials = `Unable to locate credentials. You can configure credentials by running "aws configure".`

// accessCheckRetried is seed 000's race against the real parts: c's first access check Pod,
// admitted before the Pod Identity association propagated, finds no credentials, and its
// script fails the credentials check after its retries. provider-kubernetes observes the
// failed Pod, and nobody asks for a run: the function reads the exit code of the credentials
// check from what provider-kubernetes observed (cluster.Attempt) and, once its 15-second
// backoff is over, puts a new Pod, attempt 2, in an Object of its own; Crossplane deletes the
// Object of the Pod it supersedes, and provider-kubernetes that Pod. Whether the request shows
// the failure meanwhile depends on a reconcile landing within the backoff (with the XR's watch
// circuit breaker open, none may); when it does, it must be word for word. It returns the Pod
// that failed and, when the test saw it, that Pod as the first Object observed it Failed, which
// testRealProviderKubernetes checks as the kubelet reported it.
func accessCheckRetried(t *testing.T, c *karpenter, claimed *claimedCluster) (string, *corev1.Pod) {
	t.Helper()
	start := time.Now()
	message := accessCheckMessage(checkCredentials, noCredentials)
	resources, _ := c.composed()
	object := resources[accessCheck]
	first := podOf(object)
	var failed *corev1.Pod
	shown := false
	c.wait(3*time.Minute, "the function to retry the access check in a new Pod, unasked", func() (bool, error) {
		m, _ := c.condition(steps[2].condition)["message"].(string)
		if strings.Contains(m, "Pod failed") {
			if !strings.Contains(m, message) {
				return false, fmt.Errorf("%s says %q, want %q", steps[2].condition, m, message)
			}
			if !shown {
				t.Logf("%s: %s, %.0fs after the wiring was Ready", steps[2].condition, m, time.Since(start).Seconds())
			}
			shown = true
		}
		resources, _ := c.composed()
		o := resources[accessCheck]
		if o == nil {
			return false, nil // between the Object of the Pod superseded and the new one's
		}
		if o.GetUID() == object.GetUID() {
			if name, phase := observedPodOf(o); name == first && phase == string(corev1.PodFailed) && failed == nil {
				m, _, _ := unstructured.NestedMap(o.Object, "status", "atProvider", "manifest")
				failed = &corev1.Pod{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, failed); err != nil {
					return false, err
				}
			}
			return false, nil
		}
		annotations, _, _ := unstructured.NestedStringMap(o.Object, "spec", "forProvider", "manifest", "metadata", "annotations")
		return annotations[cluster.AttemptAnnotation] == "2", nil
	})
	// The first Pod, the one that failed, goes with its Object.
	ns, _, _ := unstructured.NestedString(object.Object, "spec", "forProvider", "manifest", "metadata", "namespace")
	c.wait(2*time.Minute, "the claimed cluster to delete the first access check Pod "+first, func() (bool, error) {
		_, err := claimed.kube.CoreV1().Pods(ns).Get(t.Context(), first, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if v := c.getXR().GetAnnotations()[runAnnotation]; v != "" {
		t.Errorf("the retry was asked for (%s=%s): it must come by itself", runAnnotation, v)
	}
	if !shown {
		t.Logf("no reconcile of the %s landed within the backoff: the failure was not shown before the retry", c.api.kind)
	}
	t.Logf("the access check retried in a new Pod, attempt 2, unasked, %.0fs after the wiring was Ready (the first Pod, gone with its Object: %s)", time.Since(start).Seconds(), first)
	return first, failed
}

// assertFailedWithoutCredentials checks the access check's Pod p ended as the kubelet reports
// the credentials check failing: its container terminated with the check's exit code, Error,
// and the script's termination message: the check's name and the CLI's words.
func assertFailedWithoutCredentials(t *testing.T, p *corev1.Pod) {
	t.Helper()
	want := checkCredentials.name + ": " + noCredentials
	s := p.Status.ContainerStatuses
	if len(s) != 1 || s[0].State.Terminated == nil {
		t.Errorf("%s: want one container terminated, got %+v", p.Name, s)
		return
	}
	if tm := s[0].State.Terminated; tm.ExitCode != int32(checkCredentials.exitCode) || tm.Reason != "Error" || strings.TrimSpace(tm.Message) != want {
		t.Errorf("%s: terminated with exit %d, %s, %q; want exit %d, Error, %q", p.Name, tm.ExitCode, tm.Reason, tm.Message, checkCredentials.exitCode, want)
	}
}
