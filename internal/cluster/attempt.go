package cluster

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/crossplane/function-sdk-go/resource"
	corev1 "k8s.io/api/core/v1"

	"github.com/do-now/function-karpenter/internal/config"
)

// AttemptAnnotation on the access check's Pod says which attempt of its run
// it is.
const AttemptAnnotation = "socle.do-now.io/access-check-attempt"

// FirstBackoff is how long after a passing failure the next attempt
// starts; it doubles with each attempt.
const FirstBackoff = 15 * time.Second

// passingReasons are the reasons the kubelet gives a Pod it stopped for
// what passes: its activeDeadlineSeconds (k8s.io/kubernetes v1.35.4
// pkg/kubelet/active_deadline.go) and an eviction
// (pkg/kubelet/eviction/helpers.go).
var passingReasons = []string{"DeadlineExceeded", "Evicted"}

// Attempt is which attempt of its run the access check's Pod is at now,
// from what the composed Object observed: the attempt its Pod is, or the
// next one once that Pod failed for a passing cause, its backoff is over
// and the platform's attempts are not spent. A Pod of another spec or run
// starts again at 1. wait is how long until the next attempt is due; zero
// when none is.
func Attempt(c *config.Config, ocd resource.ObservedComposed, now time.Time) (n int, wait time.Duration) {
	s, ok := readCheck(ocd)
	if !ok {
		return 1, 0
	}
	n, err := strconv.Atoi(s.Annotations[AttemptAnnotation])
	if err != nil || n < 1 || s.Name != podName(builtPod(c), c.AccessCheckRun, n) {
		return 1, 0 // what the check checks, or the run asked for, changed
	}
	if s.Observed != s.Name || s.Status.Phase != string(corev1.PodFailed) || n >= int(*c.Input.AccessCheck.Attempts) {
		return n, 0
	}
	transient := slices.Contains(passingReasons, s.Status.Reason)
	for _, cs := range s.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			transient = transient || t.ExitCode == CheckCredentials.ExitCode || throttled(t.Message)
		}
	}
	if !transient {
		return n, 0 // AWS said no: a person fixes the cause and asks for a run
	}
	due := s.finished().Add(FirstBackoff << (n - 1))
	if now.Before(due) {
		return n, due.Sub(now)
	}
	return n + 1, 0
}

// throttled tells whether AWS's words, as the CLI prints them ("An error
// occurred (CODE) when calling ..."), carry an error code the AWS SDK
// counts as throttling (aws-sdk-go-v2 aws/retry DefaultThrottleErrorCodes):
// "not now" rather than "no".
func throttled(msg string) bool {
	for code := range retry.DefaultThrottleErrorCodes {
		if strings.Contains(msg, "("+code+")") {
			return true
		}
	}
	return false
}
