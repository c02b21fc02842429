package cluster

import (
	"strings"
	"testing"
	"time"

	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestRun: which run the access check is for when the claim asks for one,
// from the check observed and the clock.
func TestRun(t *testing.T) {
	passed := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	c := load(t, map[string]any{})
	Prepare(c)
	pod := builtPod(c)
	// check is the observed Object of the Pod of run ran (carried in its
	// annotation unless legacy), attempt 1, in phase (none: not observed).
	check := func(ran string, legacy bool, phase string) resource.ObservedComposed {
		annotations := map[string]any{AttemptAnnotation: "1"}
		if !legacy && ran != "" {
			annotations[RunAnnotation] = ran
		}
		name := podName(pod, ran, 1)
		o := map[string]any{"spec": map[string]any{"forProvider": map[string]any{"manifest": map[string]any{
			"metadata": map[string]any{"name": name, "annotations": annotations},
		}}}}
		if phase != "" {
			o["status"] = map[string]any{"atProvider": map[string]any{"manifest": map[string]any{
				"metadata": map[string]any{"name": name},
				"status": map[string]any{"phase": phase, "containerStatuses": []any{map[string]any{"state": map[string]any{
					"terminated": map[string]any{"exitCode": 0, "finishedAt": passed.Format(time.RFC3339)},
				}}}},
			}}}
		}
		return resource.ObservedComposed{Resource: &composed.Unstructured{Unstructured: unstructured.Unstructured{Object: o}}}
	}
	type want struct {
		Run  string
		Wait time.Duration
		Note string // a part of it
	}
	cases := map[string]struct {
		reason string
		asked  string
		check  resource.ObservedComposed
		now    time.Time
		want   want
	}{
		"Nothing": {
			reason: "No check observed: the run asked for.",
			asked:  "b", now: passed, want: want{Run: "b"},
		},
		"Unchanged": {
			reason: "The run asked for is the Pod's: nothing to decide.",
			asked:  "a", check: check("a", false, "Succeeded"), now: passed.Add(time.Minute), want: want{Run: "a"},
		},
		"AfterAFailure": {
			reason: "A failed check runs again at once for a new value.",
			asked:  "b", check: check("a", false, "Failed"), now: passed.Add(time.Second), want: want{Run: "b"},
		},
		"SoonAfterAPass": {
			reason: "A new value within the interval after a pass keeps the Pod that passed, says until when, and is due then.",
			asked:  "b", check: check("a", false, "Succeeded"), now: passed.Add(10 * time.Minute),
			want: want{Run: "a", Wait: 50 * time.Minute, Note: "passed at 2026-12-07T03:00:00Z and runs again from 2026-12-07T04:00:00Z"},
		},
		"LongAfterAPass": {
			reason: "Once the interval is over, the new value runs.",
			asked:  "b", check: check("a", false, "Succeeded"), now: passed.Add(time.Hour), want: want{Run: "b"},
		},
		"WhileItRuns": {
			reason: "A new value while the check runs waits for its end; no clock decides it.",
			asked:  "b", check: check("a", false, "Running"), now: passed, want: want{Run: "a", Note: "the check runs now"},
		},
		"NotObservedYet": {
			reason: "A Pod the Object has not reported yet runs, as far as anyone knows.",
			asked:  "b", check: check("a", false, ""), now: passed, want: want{Run: "a", Note: "the check runs now"},
		},
		"LegacyPodAsked": {
			reason: "A Pod of before runs were carried, of the run asked for: nothing to decide.",
			asked:  "a", check: check("a", true, "Succeeded"), now: passed.Add(time.Minute), want: want{Run: "a"},
		},
		"LegacyPodOfNoRun": {
			reason: "A Pod of before runs were carried, of no run, that passed: a first value is held by the interval too.",
			asked:  "b", check: check("", true, "Succeeded"), now: passed.Add(time.Minute),
			want: want{Run: "", Wait: 59 * time.Minute, Note: "runs again from"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c.AccessCheckRun = tc.asked
			wait, note := Run(c, tc.check, tc.now)
			got := want{Run: c.AccessCheckRun, Wait: wait, Note: tc.want.Note}
			if !strings.Contains(note, tc.want.Note) || (tc.want.Note == "") != (note == "") {
				got.Note = note
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nRun(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestPlace: the check's current Pod keeps the Object that carries it;
// a new Pod never takes the name of the Object it supersedes.
func TestPlace(t *testing.T) {
	c := load(t, map[string]any{})
	c.ClusterVersion, c.ClusterVPC = "1.34", "vpc-0fa4e"
	Prepare(c)
	object := func(pod string) resource.ObservedComposed {
		return resource.ObservedComposed{Resource: &composed.Unstructured{Unstructured: unstructured.Unstructured{Object: map[string]any{
			"spec": map[string]any{"forProvider": map[string]any{"manifest": map[string]any{"metadata": map[string]any{"name": pod}}}},
		}}}}
	}
	c.AccessCheckRun, c.AccessCheckAttempt = "", 1
	current := PodName(c)
	digest := strings.TrimPrefix(current, AccessCheckPod+"-")
	cases := map[string]struct {
		reason   string
		observed map[resource.Name]resource.ObservedComposed
		want     resource.Name
	}{
		"First":             {reason: "No check yet: access-check.", want: AccessCheck},
		"Current":           {reason: "access-check carries the current Pod: it keeps it (a release starts no Pod).", observed: map[resource.Name]resource.ObservedComposed{AccessCheck: object(current)}, want: AccessCheck},
		"SupersedesFirst":   {reason: "access-check carries another Pod: the new one goes under its digest.", observed: map[resource.Name]resource.ObservedComposed{AccessCheck: object("karpenter-access-check-0000000000")}, want: AccessCheck + resource.Name("-"+digest)},
		"CurrentUnderOther": {reason: "The Object under a digest carries the current Pod: it keeps it.", observed: map[resource.Name]resource.ObservedComposed{AccessCheck + "-" + resource.Name(digest): object(current)}, want: AccessCheck + resource.Name("-"+digest)},
		"SupersedesSecond":  {reason: "The Object under a digest carries another Pod: the new one goes back to access-check.", observed: map[resource.Name]resource.ObservedComposed{AccessCheck + "-0000000000": object("karpenter-access-check-0000000000")}, want: AccessCheck},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			Place(c, tc.observed)
			if got := CheckName(c); got != tc.want {
				t.Errorf("\n%s\nPlace(...): %s, want %s", tc.reason, got, tc.want)
			}
		})
	}
	t.Run("ClusterUnobserved", func(t *testing.T) {
		// The cluster unobserved a moment: what the check checks is not
		// known, nothing is superseded.
		u := *c
		u.ClusterVersion, u.ClusterVPC = "", ""
		Place(&u, map[resource.Name]resource.ObservedComposed{AccessCheck: object("karpenter-access-check-0000000000")})
		if got := CheckName(&u); got != AccessCheck {
			t.Errorf("Place(...): %s, want the observed %s", got, AccessCheck)
		}
	})
}
