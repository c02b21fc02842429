package convert_test

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"testing"

	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/randfill"

	"github.com/do-now/function-karpenter/internal/convert"
	// The packages whose builders convert through composed.Scheme, each
	// registering the types it builds there.
	_ "github.com/do-now/function-karpenter/internal/awsres"
	_ "github.com/do-now/function-karpenter/internal/cluster"
	_ "github.com/do-now/function-karpenter/internal/flux"
)

// TestComposedIsComposedFrom: for every type registered in the scheme the
// SDK converts through (every kind the function composes, and everything
// their API groups register beside them), randomly filled objects convert
// to what composed.From makes of them, or both fail.
func TestComposedIsComposedFrom(t *testing.T) {
	gvks := composed.Scheme.AllKnownTypes()
	kinds := make([]string, 0, len(gvks))
	for gvk := range gvks {
		kinds = append(kinds, gvk.String())
	}
	sort.Strings(kinds)
	byName := map[string]reflect.Type{}
	for gvk, typ := range gvks {
		byName[gvk.String()] = typ
	}
	if len(kinds) < 50 {
		t.Fatalf("only %d kinds registered: the builders' packages register theirs in init", len(kinds))
	}
	const seeds = 12
	walked, same, failedBoth := 0, 0, 0
	for _, kind := range kinds {
		typ := byName[kind]
		for seed := range seeds {
			f := randfill.NewWithSeed(int64(seed)).NilChance(0.3).NumElements(0, 2).MaxDepth(7).Funcs(
				func(f *float64, c randfill.Continue) { *f = math.Round(c.Float64()*1e6) / 1e3 },
				// Kinds whose Go form holds more than their JSON: made valid.
				func(r *runtime.RawExtension, c randfill.Continue) { r.Raw = fmt.Appendf(nil, `{"n":%d}`, c.Intn(9)) },
				func(o *runtime.Object, c randfill.Continue) {},
				func(q *resource.Quantity, c randfill.Continue) {
					*q = *resource.NewMilliQuantity(c.Int63n(1e9), resource.DecimalSI)
				},
			)
			a := reflect.New(typ).Interface().(runtime.Object)
			if seed > 0 { // seed 0: the zero object
				f.Fill(a)
			}
			b := a.DeepCopyObject()
			want, werr := composed.From(a)
			got, gerr := convert.Composed(b)
			switch {
			case (werr == nil) != (gerr == nil):
				t.Errorf("%s seed %d: composed.From error %v, Composed error %v", kind, seed, werr, gerr)
			case werr != nil:
				failedBoth++
			default:
				if diff := cmp.Diff(want.Object, got.Object); diff != "" {
					t.Errorf("%s seed %d: -composed.From +Composed:\n%s", kind, seed, diff)
				}
				same++
			}
			walked++
		}
	}
	t.Logf("%d kinds, %d objects: %d the same, %d refused by both", len(kinds), walked, same, failedBoth)
	if same < walked*9/10 {
		t.Errorf("only %d of %d objects converted: the random fill makes objects neither converts", same, walked)
	}
}

// TestComposedIsWalked: the kinds the builders make are walked, not left to
// composed.From: a converter that always fell back would pass the test
// above.
func TestComposedIsWalked(t *testing.T) {
	for gvk, typ := range composed.Scheme.AllKnownTypes() {
		switch gvk.Kind {
		case "Pod", "Namespace", "ServiceAccount", "Deployment", "Kustomization", "Role", "RolePolicy", "Queue", "QueuePolicy", "Rule", "Target", "PodIdentityAssociation":
		default:
			continue
		}
		if !convert.Walked(typ) {
			t.Errorf("%s (%s) is left to composed.From", gvk, typ)
		}
	}
}

// odd holds what the kinds registered today do not: omitzero, an IsZero
// method, an interface, a float32, an array, bytes, a map keyed by ints,
// a struct inlined by tag, a pointer to itself.
type odd struct {
	metav1.TypeMeta `json:",inline"`
	Zero            int            `json:"zero,omitzero"`
	When            zeroer         `json:"when,omitzero"`
	WhenP           *zeroer        `json:"whenP,omitzero"`
	Empty           []string       `json:"empty,omitempty"`
	Nil             []string       `json:"nil"`
	NilMap          map[string]int `json:"nilMap"`
	Any             any            `json:"any,omitempty"`
	F32             float32        `json:"f32"`
	Array           [2]int         `json:"array"`
	Bytes           []byte         `json:"bytes,omitempty"`
	ByInt           map[int]string `json:"byInt"`
	Inlined         inlined        `json:",inline"`
	Next            *odd           `json:"next,omitempty"`
	False           bool           `json:"false,omitempty"`
	NoTag           string
	hidden          string
}

type inlined struct {
	Deep string `json:"deep,omitempty"`
}

type zeroer struct{ N int }

func (z zeroer) IsZero() bool { return z.N < 0 }

func (o *odd) DeepCopyObject() runtime.Object { c := *o; return &c }

func TestComposedOddFields(t *testing.T) {
	gv := schema.GroupVersion{Group: "convert.test", Version: "v1"}
	composed.Scheme.AddKnownTypes(gv, &odd{})
	for i, o := range []*odd{
		{},
		{Zero: 1, When: zeroer{-1}, WhenP: &zeroer{-2}, Empty: []string{}, Any: map[string]any{"a": 1}, F32: 0.1,
			Array: [2]int{1, 2}, Bytes: []byte("hi"), ByInt: map[int]string{3: "c"}, Inlined: inlined{"d"},
			Next: &odd{When: zeroer{1}, Any: []int{}, NoTag: "n"}, hidden: "h"},
		{When: zeroer{0}, WhenP: &zeroer{3}, Nil: []string{"x"}, NilMap: map[string]int{"k": 0}, Any: 2.5},
	} {
		want, werr := composed.From(o.DeepCopyObject())
		got, gerr := convert.Composed(o.DeepCopyObject())
		if werr != nil || gerr != nil {
			t.Fatalf("object %d: %v, %v", i, werr, gerr)
		}
		if diff := cmp.Diff(want.Object, got.Object); diff != "" {
			t.Errorf("object %d: -composed.From +Composed:\n%s", i, diff)
		}
	}
	if !convert.Walked(reflect.TypeFor[odd]()) {
		t.Error("odd is left to composed.From")
	}
}
