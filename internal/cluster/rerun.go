package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/crossplane/function-sdk-go/resource"
	corev1 "k8s.io/api/core/v1"

	"github.com/do-now/function-karpenter/internal/config"
)

// maxRunKey is the longest run value a Pod carries as it is: a label
// value's length, ample for a date or a ticket. A longer one is digested,
// so that a tenant's annotation cannot swell every request that carries
// the check's Pod.
const maxRunKey = 63

// RunKey is the run an annotation value asks for, as the Pod's name
// digests it and its RunAnnotation carries it.
func RunKey(v string) string {
	if len(v) <= maxRunKey {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "sha256-" + hex.EncodeToString(sum[:])
}

// CheckName is the composed resource name of the access check's current
// Pod: access-check, or access-check-<digest> while access-check is the
// Pod it supersedes (Place).
func CheckName(c *config.Config) resource.Name {
	if c.AccessCheckName != "" {
		return resource.Name(c.AccessCheckName)
	}
	return AccessCheck
}

// IsCheckName tells whether name is one an access check's Pod is composed
// under.
func IsCheckName(name resource.Name) bool {
	return name == AccessCheck || strings.HasPrefix(string(name), string(AccessCheck)+"-")
}

// ObservedCheck is the access check as observed: the Object under a name
// IsCheckName, access-check first. Crossplane observes only what the last
// call composed, which is one check.
func ObservedCheck(observed map[resource.Name]resource.ObservedComposed) (resource.Name, resource.ObservedComposed) {
	var names []resource.Name
	for name := range observed {
		if IsCheckName(name) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "", resource.ObservedComposed{}
	}
	slices.Sort(names) // access-check sorts first
	return names[0], observed[names[0]]
}

// Place names the composed resource the check's current Pod goes by, once
// c's run and attempt are decided: the name of the observed Object that
// carries that Pod, else access-check, unless access-check carries a Pod it
// supersedes, then access-check-<the Pod's digest>. A superseded Pod's
// Object is then no longer desired: Crossplane deletes it
// (GarbageCollectComposedResources, v2.4.2 composition_functions.go), and
// provider-kubernetes its Pod, so no finished Pod is left behind and only
// the current attempt runs. The current Pod is never dropped.
func Place(c *config.Config, observed map[resource.Name]resource.ObservedComposed) {
	// While the claimed cluster is not observed, part of what the check
	// checks (its Kubernetes version, its VPC) is not known: nothing is
	// superseded, the observed check keeps its place.
	if c.ClusterVersion == "" || c.ClusterVPC == "" {
		if name, _ := ObservedCheck(observed); name != "" {
			c.AccessCheckName = string(name)
			return
		}
	}
	want := PodName(c)
	c.AccessCheckName = ""
	superseded := false
	// In order, so that the answer is a function of the request.
	for _, name := range slices.Sorted(maps.Keys(observed)) {
		if !IsCheckName(name) {
			continue
		}
		if s, ok := readCheck(observed[name]); ok && s.Name == want {
			c.AccessCheckName = string(name)
			return
		}
		superseded = superseded || name == AccessCheck
	}
	if superseded {
		c.AccessCheckName = string(AccessCheck) + "-" + strings.TrimPrefix(want, AccessCheckPod+"-")
	}
}

// Run decides which run the access check is for, from the check observed
// (ObservedCheck) and c.AccessCheckRun, the run the XR asks for (RunKey of
// its RunAnnotation). A new run is one, only, when what the check checks
// is unchanged (otherwise a new Pod runs anyway, for the run asked for),
// and it is started when the check failed, or passed at least
// input.accessCheck.minRunInterval ago. Otherwise the check stays the Pod
// it is: c.AccessCheckRun is set back to that Pod's run, and note says why,
// for the claim; wait is how long until the new run is due, zero when no
// time will start it (the check still runs: its end does). So a flood of
// new values starts at most one Pod per interval after a pass, and one
// after a failure.
func Run(c *config.Config, ocd resource.ObservedComposed, now time.Time) (wait time.Duration, note string) {
	asked := c.AccessCheckRun
	s, ok := readCheck(ocd)
	if !ok {
		return 0, ""
	}
	n, err := strconv.Atoi(s.Annotations[AttemptAnnotation])
	if err != nil || n < 1 {
		return 0, ""
	}
	// The run the Pod is for: the one it carries, or for a Pod of before
	// runs were carried, the one asked for or none, whichever its name
	// digests with this spec. None: what the check checks changed.
	ran, found := "", false
	candidates := []string{asked, ""}
	if r, ok := s.Annotations[RunAnnotation]; ok {
		candidates = []string{r}
	}
	pod := builtPod(c)
	for _, r := range candidates {
		if s.Name == podName(pod, r, n) {
			ran, found = r, true
			break
		}
	}
	if !found || ran == asked {
		return 0, ""
	}
	asking := fmt.Sprintf("the new run asked for (%s) waits", RunAnnotation)
	switch {
	case s.Observed != s.Name || s.Status.Phase == string(corev1.PodPending) || s.Status.Phase == string(corev1.PodRunning) || s.Status.Phase == "":
		c.AccessCheckRun = ran
		return 0, asking + ": the check runs now; it starts once that run failed, or input.accessCheck.minRunInterval after it passed"
	case s.Status.Phase == string(corev1.PodSucceeded):
		due := s.finished().Add(c.MinRunInterval())
		if !now.Before(due) {
			return 0, ""
		}
		c.AccessCheckRun = ran
		return due.Sub(now), fmt.Sprintf("%s: the check passed at %s and runs again from %s (input.accessCheck.minRunInterval %s)",
			asking, s.finished().UTC().Format(time.RFC3339), due.UTC().Format(time.RFC3339), c.MinRunInterval())
	}
	return 0, "" // failed: the run starts
}

// check is what the function reads of an access check's Object: the Pod
// it applies (name, annotations) and the Pod it observes (name, status).
// Read part by part: the manifests' specs hold the preflight's script,
// which GetValueInto would encode and decode for nothing.
type check struct {
	Name        string
	Annotations map[string]string
	Observed    string
	Status      podStatus
}

type podStatus struct {
	Phase             string `json:"phase"`
	Reason            string `json:"reason"`
	ContainerStatuses []struct {
		State struct {
			Terminated *struct {
				ExitCode   int       `json:"exitCode"`
				Message    string    `json:"message"`
				FinishedAt time.Time `json:"finishedAt"`
			} `json:"terminated"`
		} `json:"state"`
	} `json:"containerStatuses"`
}

func readCheck(ocd resource.ObservedComposed) (check, bool) {
	r := ocd.Resource
	if r == nil {
		return check{}, false
	}
	var desired, observed struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations"`
	}
	if r.GetValueInto("spec.forProvider.manifest.metadata", &desired) != nil {
		return check{}, false
	}
	s := check{Name: desired.Name, Annotations: desired.Annotations}
	if r.GetValueInto("status.atProvider.manifest.metadata", &observed) == nil {
		s.Observed = observed.Name
	}
	if s.Observed == s.Name {
		_ = r.GetValueInto("status.atProvider.manifest.status", &s.Status) // none yet: no phase
	}
	return s, true
}

// finished is when the Pod's container ended; zero when it has not.
func (s check) finished() time.Time {
	var t time.Time
	for _, cs := range s.Status.ContainerStatuses {
		if term := cs.State.Terminated; term != nil && term.FinishedAt.After(t) {
			t = term.FinishedAt
		}
	}
	return t
}
