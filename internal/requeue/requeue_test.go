package requeue

import (
	"testing"
	"time"

	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
)

func TestWaiting(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) string { return now.Add(-d).Format(time.RFC3339) }
	obj := func(created string, conds ...map[string]any) resource.ObservedComposed {
		u := composed.New()
		u.Object = map[string]any{"metadata": map[string]any{"name": "x"}, "status": map[string]any{}}
		if created != "" {
			u.Object["metadata"].(map[string]any)["creationTimestamp"] = created
		}
		var cs []any
		for _, c := range conds {
			cs = append(cs, c)
		}
		u.Object["status"].(map[string]any)["conditions"] = cs
		return resource.ObservedComposed{Resource: u}
	}
	managed := func(o resource.ObservedComposed, at ...string) resource.ObservedComposed {
		var fields []any
		for _, t := range at {
			fields = append(fields, map[string]any{"manager": "m", "operation": "Apply", "time": t})
		}
		o.Resource.Object["metadata"].(map[string]any)["managedFields"] = fields
		return o
	}
	cond := func(typ, at string) map[string]any {
		return map[string]any{"type": typ, "status": "False", "lastTransitionTime": at}
	}
	cases := map[string]struct {
		reason   string
		unready  []resource.Name
		observed map[resource.Name]resource.ObservedComposed
		want     time.Duration
	}{
		"JustEmitted": {
			reason:  "A resource not observed yet was emitted by this very call.",
			unready: []resource.Name{"a", "b"},
			observed: map[resource.Name]resource.ObservedComposed{
				"a": obj(ago(time.Hour)),
			},
			want: Shortest,
		},
		"CreatedMomentsAgo": {
			reason:   "Half of one second is below the floor.",
			unready:  []resource.Name{"a"},
			observed: map[resource.Name]resource.ObservedComposed{"a": obj(ago(time.Second))},
			want:     Shortest,
		},
		"WaitedTwentySeconds": {
			reason:   "The next wait is half of the time waited.",
			unready:  []resource.Name{"a"},
			observed: map[resource.Name]resource.ObservedComposed{"a": obj(ago(20 * time.Second))},
			want:     10 * time.Second,
		},
		"WaitedLong": {
			reason:   "A slow provider: the wait is capped.",
			unready:  []resource.Name{"a"},
			observed: map[resource.Name]resource.ObservedComposed{"a": obj(ago(time.Hour))},
			want:     Longest,
		},
		"ChangedSinceCreated": {
			reason:  "An old resource whose Synced condition changed 8s ago: the latest change sets the pace.",
			unready: []resource.Name{"a"},
			observed: map[resource.Name]resource.ObservedComposed{
				"a": obj(ago(time.Hour), cond("Ready", ago(time.Hour)), cond("Synced", ago(8*time.Second))),
			},
			want: 4 * time.Second,
		},
		"OtherConditionsIgnored": {
			reason:  "Only Ready and Synced say the provider moved.",
			unready: []resource.Name{"a"},
			observed: map[resource.Name]resource.ObservedComposed{
				"a": obj(ago(time.Hour), cond("LastAsyncOperation", ago(time.Second))),
			},
			want: Longest,
		},
		"TheLatestOfSeveral": {
			reason:  "Of two unready resources, the one that changed last.",
			unready: []resource.Name{"a", "b"},
			observed: map[resource.Name]resource.ObservedComposed{
				"a": obj(ago(time.Hour)), "b": obj(ago(12 * time.Second)),
			},
			want: 6 * time.Second,
		},
		"WrittenSinceCreated": {
			reason:  "An old resource the function changed 6s ago (a new access check, an upgrade): its manager's write sets the pace.",
			unready: []resource.Name{"a"},
			observed: map[resource.Name]resource.ObservedComposed{
				"a": managed(obj(ago(time.Hour), cond("Ready", ago(time.Hour))), ago(time.Hour), ago(6*time.Second)),
			},
			want: 3 * time.Second,
		},
		"NothingNamed": {
			reason:   "Held back with nothing unready to pace by.",
			observed: map[resource.Name]resource.ObservedComposed{"a": obj(ago(time.Hour))},
			want:     Unnamed,
		},
		"NoTimestamps": {
			reason:   "Nothing says when: as if just changed.",
			unready:  []resource.Name{"a"},
			observed: map[resource.Name]resource.ObservedComposed{"a": obj("")},
			want:     Shortest,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Waiting(now, tc.unready, tc.observed); got != tc.want {
				t.Errorf("%s\nWaiting() = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}
