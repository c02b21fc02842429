//go:build e2e

package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// The access check is a Pod in the claimed cluster (a provider-kubernetes Object carries it)
// running the function's preflight script: a series of checks, each proving under the
// controller's ServiceAccount one thing Karpenter will do with its role. A failed check exits
// with its own code and writes its name and AWS's words as the container's termination message.

// A check is one of the preflight's checks: its name and the code its failure exits with.
type check struct {
	name     string
	exitCode int
}

// The checks, in the order the script runs them, as the function's cluster.Checks
// (internal/cluster/preflight.go) defines them. This module cannot import the function's
// internal packages (e2e/go.mod requires no function-karpenter module), so TestAccessCheckFails
// holds this table to the script the function composes: every `fail <check> <code>` in it.
var (
	checkCredentials = check{"credentials", 10}
	checkQueue       = check{"interruption-queue", 11}
	checkProfile     = check{"instance-profile", 12}
	checkSubnets     = check{"subnets", 13}
	checkGroups      = check{"security-groups", 14}
	checkAMI         = check{"ami", 15}
	checkTemplate    = check{"launch-template", 16}
	checkCluster     = check{"cluster", 17}
	checkFleet       = check{"fleet", 18}
	// Sorted by code, as scriptChecks lists them.
	checks = []check{checkCredentials, checkQueue, checkProfile, checkSubnets, checkGroups, checkAMI, checkTemplate, checkCluster, checkFleet}
)

// Where the access check's Pod and its script are in the Object that carries it.
const (
	accessCheck       = "access-check"
	accessCheckPrefix = "karpenter-access-check-"
	// runAnnotation on the claim (or the namespaced XR) runs the access check again when its
	// value changes (the function's cluster.RunAnnotation).
	runAnnotation = "socle.do-now.io/access-check-run"
	// podSucceeded is the Object's readiness query (the function's cluster.PodSucceeded).
	podSucceeded = "object.status.phase == 'Succeeded'"
)

// accessCheckPodName matches the Pod's name: the prefix and a digest of what it checks.
var accessCheckPodName = regexp.MustCompile(`^` + accessCheckPrefix + `[0-9a-f]{10}$`)

// scriptFails matches every failure the script can exit with: fail CHECK CODE.
var scriptFails = regexp.MustCompile(`\bfail ([a-z][a-z-]*) ([0-9]+) `)

// podOf is the name of the Pod an Object carries, as the function desires it.
func podOf(o *unstructured.Unstructured) string {
	name, _, _ := unstructured.NestedString(o.Object, "spec", "forProvider", "manifest", "metadata", "name")
	return name
}

// observedPodOf is the name and phase of the Pod an Object last observed in the claimed
// cluster ("" before it observed any).
func observedPodOf(o *unstructured.Unstructured) (name, phase string) {
	name, _, _ = unstructured.NestedString(o.Object, "status", "atProvider", "manifest", "metadata", "name")
	phase, _, _ = unstructured.NestedString(o.Object, "status", "atProvider", "manifest", "status", "phase")
	return name, phase
}

// scriptChecks lists the checks the preflight script an Object carries can fail, with their
// codes, sorted by code: what it hands `fail`.
func scriptChecks(o *unstructured.Unstructured) ([]check, error) {
	containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "forProvider", "manifest", "spec", "containers")
	if len(containers) != 1 {
		return nil, fmt.Errorf("want one container in the access check's Pod, got %d", len(containers))
	}
	command, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "command")
	if len(command) != 3 || command[0] != "/bin/sh" || command[1] != "-c" {
		return nil, fmt.Errorf("want the access check's command to be /bin/sh -c SCRIPT, got %q", command)
	}
	seen := map[check]bool{}
	for _, m := range scriptFails.FindAllStringSubmatch(command[2], -1) {
		var code int
		_, _ = fmt.Sscan(m[2], &code)
		seen[check{m[1], code}] = true
	}
	out := make([]check, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].exitCode < out[j].exitCode })
	return out, nil
}

// An awsRefusal is how a claimed cluster's AWS makes one check of the access check's script
// fail (claimedCluster.refuse): the fake AWS CLI refuses the call whose arguments contain call
// (its FAIL) with AWS's words answer on stderr, exit 254, or, when answer is "None", answers an
// empty result, which the script itself finds wanting; says is what the check's termination
// message then holds after the check's name. The calls are those the function's unit tests
// fail each check with (internal/cluster TestPreflightScript).
type awsRefusal struct{ call, answer, says string }

// refusalOf is how cluster's AWS, in region, refuses check c.
func refusalOf(c check, cluster, region string) awsRefusal {
	session := fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s-karpenter/eks-%s-karpe-0123", testAccount, cluster, cluster)
	refused := func(call, answer string) awsRefusal { return awsRefusal{call: call, answer: answer, says: answer} }
	switch c {
	case checkQueue:
		return refused("sqs get-queue-url", fmt.Sprintf("An error occurred (AccessDenied) when calling the GetQueueUrl operation: User: %s is not authorized to perform: sqs:getqueueurl on resource: arn:aws:sqs:%s:%s:%s-karpenter because no identity-based policy allows the sqs:getqueueurl action", session, region, testAccount, cluster))
	case checkProfile:
		return refused("iam get-instance-profile", fmt.Sprintf("An error occurred (NoSuchEntity) when calling the GetInstanceProfile operation: Instance Profile %s-bootstrap-nodes cannot be found.", cluster))
	case checkSubnets:
		return awsRefusal{call: "ec2 describe-subnets", answer: "None", says: "pool private: no subnet has the tags"}
	case checkGroups:
		return awsRefusal{call: "Name=group-name", answer: "None", says: "no security group matches Name=group-name"}
	case checkAMI:
		return refused("ssm get-parameter", fmt.Sprintf("An error occurred (AccessDeniedException) when calling the GetParameter operation: User: %s is not authorized to perform: ssm:GetParameter because no identity-based policy allows the ssm:GetParameter action", session))
	case checkCluster:
		return refused("eks describe-cluster", fmt.Sprintf("An error occurred (AccessDeniedException) when calling the DescribeCluster operation: User: %s is not authorized to perform: eks:DescribeCluster on resource: arn:aws:eks:%s:%s:cluster/%s with an explicit deny in a service control policy", session, region, testAccount, cluster))
	case checkTemplate:
		return refused("ec2 create-launch-template --dry-run", fmt.Sprintf("An error occurred (UnauthorizedOperation) when calling the CreateLaunchTemplate operation: You are not authorized to perform this operation. User: %s is not authorized to perform: ec2:CreateLaunchTemplate with an explicit deny in a permissions boundary.", session))
	case checkFleet:
		return refused("ec2 create-fleet", fmt.Sprintf("An error occurred (UnauthorizedOperation) when calling the CreateFleet operation: You are not authorized to perform this operation. User: %s is not authorized to perform: iam:PassRole on resource: arn:aws:iam::%s:role/%s-bootstrap-nodes with an explicit deny in a permissions boundary. Encoded authorization failure message: e2e-0123", session, testAccount, cluster))
	}
	panic("no refusal for the check " + c.name)
}

// accessCheckMessage is what the function must write in AccessCheckReady when check c failed
// with AWS's words aws: the Pod's exit code and reason, its termination message trimmed.
func accessCheckMessage(c check, aws string) string {
	return fmt.Sprintf(": Pod failed (exit %d, Error): %s: %s", c.exitCode, c.name, aws)
}

// A remotePod is an access-check Pod in a claimed cluster the fake plays. It starts Pending and
// runs its checks; once finished it stays as it finished: a Pod is never run again
// (restartPolicy Never), only a Pod of a new name runs the checks again. (The fake's Pods only
// succeed: the tests that fail checks run them in real claimed clusters, TestAccessCheckFails.)
type remotePod struct {
	uid                        types.UID
	created, started, finished time.Time
	phase                      string // Pending, Running or Succeeded
	exitCode                   int
	reason                     string
}

// phases orders a Pod's phases.
var phases = map[string]int{"Pending": 0, "Running": 1, "Succeeded": 2}

// pod turns obj, the access-check Pod as desired, into the Pod the claimed cluster holds under
// its name for the Object o, advanced one phase towards Succeeded when w is ready (and left
// where it is otherwise), one phase per poll of the fake provider: a new Pod is Pending, then
// Running, then Succeeded.
func (f *fakeProvider) pod(o *unstructured.Unstructured, obj *unstructured.Unstructured, w want) {
	f.mu.Lock()
	byName := f.pods[o.GetUID()]
	if byName == nil {
		byName = map[string]*remotePod{}
		f.pods[o.GetUID()] = byName
	}
	p := byName[obj.GetName()]
	now := time.Now().UTC().Truncate(time.Second)
	target := map[state]string{ready: "Succeeded"}[w.state]
	switch {
	case p == nil:
		// Created: the API server accepted it, the scheduler placed it, its container is
		// being created.
		digest := sha256.Sum256([]byte(string(o.GetUID()) + "/" + obj.GetName()))
		p = &remotePod{uid: types.UID("remote-pod-" + hex.EncodeToString(digest[:8])), created: now, phase: "Pending"}
		byName[obj.GetName()] = p
	case target == "" || phases[p.phase] == 2 || phases[p.phase] >= phases[target]:
		// Finished, or as far as w asks.
	case p.phase == "Pending":
		p.phase, p.started = "Running", now
	default:
		p.phase, p.finished, p.exitCode, p.reason = "Succeeded", now, 0, "Completed"
	}
	pod := *p
	f.mu.Unlock()

	obj.SetUID(pod.uid)
	obj.SetCreationTimestamp(metav1.NewTime(pod.created))
	obj.SetResourceVersion(fmt.Sprint(1 + phases[pod.phase]))
	_ = unstructured.SetNestedField(obj.Object, "ip-10-0-12-34."+regionOf(o)+".compute.internal", "spec", "nodeName")
	obj.Object["status"] = podStatus(obj, pod)
}

// podStatus is a Pod's status as the kubelet reports it in each phase.
func podStatus(obj *unstructured.Unstructured, p remotePod) map[string]any {
	ts := func(t time.Time) string { return t.Format(time.RFC3339) }
	cond := func(typ, status, reason, message string, at time.Time) map[string]any {
		c := map[string]any{"type": typ, "status": status, "lastTransitionTime": ts(at)}
		if reason != "" {
			c["reason"] = reason
		}
		if message != "" {
			c["message"] = message
		}
		return c
	}
	image := ""
	if containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "containers"); len(containers) > 0 {
		image, _ = containers[0].(map[string]any)["image"].(string)
	}
	container := map[string]any{"name": "aws", "image": image, "imageID": "", "restartCount": int64(0), "ready": false, "started": false}
	status := map[string]any{"phase": p.phase, "qosClass": "Burstable", "hostIP": "10.0.12.34", "startTime": ts(p.created)}
	unready := "containers with unready status: [aws]"
	switch p.phase {
	case "Pending":
		container["state"] = map[string]any{"waiting": map[string]any{"reason": "ContainerCreating"}}
		status["conditions"] = []any{
			cond("PodReadyToStartContainers", "False", "", "", p.created),
			cond("Initialized", "True", "", "", p.created),
			cond("Ready", "False", "ContainersNotReady", unready, p.created),
			cond("ContainersReady", "False", "ContainersNotReady", unready, p.created),
			cond("PodScheduled", "True", "", "", p.created),
		}
	case "Running":
		container["ready"], container["started"] = true, true
		container["imageID"] = image + "@sha256:0123"
		container["containerID"] = "containerd://" + string(p.uid)
		container["state"] = map[string]any{"running": map[string]any{"startedAt": ts(p.started)}}
		status["podIP"] = "10.0.12.56"
		status["conditions"] = []any{
			cond("PodReadyToStartContainers", "True", "", "", p.started),
			cond("Initialized", "True", "", "", p.created),
			cond("Ready", "True", "", "", p.started),
			cond("ContainersReady", "True", "", "", p.started),
			cond("PodScheduled", "True", "", "", p.created),
		}
	default: // Succeeded
		container["imageID"] = image + "@sha256:0123"
		container["containerID"] = "containerd://" + string(p.uid)
		terminated := map[string]any{"exitCode": int64(p.exitCode), "reason": p.reason,
			"startedAt": ts(p.started), "finishedAt": ts(p.finished), "containerID": container["containerID"]}
		container["state"] = map[string]any{"terminated": terminated}
		status["podIP"] = "10.0.12.56"
		status["conditions"] = []any{
			cond("PodReadyToStartContainers", "False", "", "", p.finished),
			cond("Initialized", "True", "PodCompleted", "", p.created),
			cond("Ready", "False", "PodCompleted", "", p.finished),
			cond("ContainersReady", "False", "PodCompleted", "", p.finished),
			cond("PodScheduled", "True", "", "", p.created),
		}
	}
	status["containerStatuses"] = []any{container}
	return status
}

// regionOf is the region of the claimed cluster an Object's manifest goes to, read from the
// access check's environment (eu-west-3 when it names none).
func regionOf(o *unstructured.Unstructured) string {
	containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "forProvider", "manifest", "spec", "containers")
	for _, c := range containers {
		env, _, _ := unstructured.NestedSlice(c.(map[string]any), "env")
		for _, e := range env {
			if m, _ := e.(map[string]any); m["name"] == "AWS_REGION" {
				if r, _ := m["value"].(string); r != "" {
					return r
				}
			}
		}
	}
	return "eu-west-3"
}

// otherChecksNamed lists the checks other than c whose failure message appears in message.
func otherChecksNamed(message string, c check) []string {
	var out []string
	for _, o := range checks {
		if o != c && strings.Contains(message, fmt.Sprintf("(exit %d, ", o.exitCode)) {
			out = append(out, o.name)
		}
	}
	return out
}
