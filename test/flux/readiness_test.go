package flux

import (
	"encoding/json"
	"reflect"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/google/cel-go/cel"
	celtypes "github.com/google/cel-go/common/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/do-now/function-karpenter/internal/cluster"
)

// celReady evaluates an Object's readiness query on the object it observed, as
// provider-kubernetes v1.3.1 does (internal/controller/cluster/object/object.go,
// checkDeriveFromCelQuery): the observed object through a JSON round trip (numbers
// become float64), one variable, object, of any type; a query that is not boolean
// refused; Ready when the value is CEL's true; an evaluation error is the Object
// unready, with the error as its message.
func celReady(t *testing.T, query string, observed *unstructured.Unstructured) (bool, error) {
	t.Helper()
	raw, err := json.Marshal(observed.Object)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	env, err := cel.NewEnv(cel.Variable("object", cel.AnyType))
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(query)
	if iss.Err() != nil {
		t.Fatalf("the query does not compile: %v", iss.Err())
	}
	if !reflect.DeepEqual(ast.OutputType(), cel.BoolType) {
		t.Fatalf("the query is of type %v, provider-kubernetes refuses all but bool", ast.OutputType())
	}
	program, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	val, _, err := program.Eval(map[string]any{"object": obj})
	if err != nil {
		return false, err
	}
	return val == celtypes.True, nil
}

// A Kustomization's Object is Ready only once kustomize-controller has acted on the
// Kustomization's current generation and found it Ready. The states are what
// kustomize-controller v1.9.3 writes (internal/controller/kustomization_controller.go),
// with its own API types: status.observedGeneration set to the generation when a
// reconciliation ends Ready (finalizeStatus) or stops on a terminal error, and left as it
// was when it fails otherwise; each condition stamped with the generation it was marked at
// (fluxcd/pkg/runtime conditions.Set); a suspended one not reconciled, yet its
// observedGeneration moved on while Ready is True from before.
func TestKustomizationReadiness(t *testing.T) {
	if cluster.Reconciled["policy"] != "DeriveFromCelQuery" || cluster.Reconciled["celQuery"] != cluster.ReconciledQuery {
		t.Fatalf("the Kustomizations' readiness is not the query under test: %v", cluster.Reconciled)
	}
	// kustomization is at generation; its status says it acted on observed and its Ready
	// condition (ready, reason) was marked at generation marked; no status when ready is "".
	kustomization := func(generation, observed, marked int64, ready metav1.ConditionStatus, reason string) *unstructured.Unstructured {
		k := &kustomizev1.Kustomization{
			TypeMeta:   metav1.TypeMeta{APIVersion: kustomizev1.GroupVersion.String(), Kind: kustomizev1.KustomizationKind},
			ObjectMeta: metav1.ObjectMeta{Name: "prod-eu-karpenter-nodes", Namespace: "flux-system", Generation: generation},
		}
		k.Status.ObservedGeneration = observed
		k.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: ready, Reason: reason, ObservedGeneration: marked}}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(k)
		if err != nil {
			t.Fatal(err)
		}
		if ready == "" {
			delete(u, "status") // as the API server returns an object nothing has written a status to
		}
		return &unstructured.Unstructured{Object: u}
	}
	for _, tc := range []struct {
		name     string
		observed *unstructured.Unstructured
		want     bool
	}{
		{"just created, no status yet", kustomization(1, 0, 0, "", ""), false},
		{"applied and healthy", kustomization(1, 1, 1, metav1.ConditionTrue, meta.ReconciliationSucceededReason), true},
		// What provider-kubernetes read right after applying a change: the condition is
		// still the generation before's.
		{"changed, not yet acted on", kustomization(2, 1, 1, metav1.ConditionTrue, meta.ReconciliationSucceededReason), false},
		{"changed, being reconciled", kustomization(2, 1, 2, metav1.ConditionUnknown, meta.ProgressingReason), false},
		{"changed, its health check failing", kustomization(2, 1, 2, metav1.ConditionFalse, meta.HealthCheckFailedReason), false},
		{"changed, stopped on a terminal error", kustomization(2, 2, 2, metav1.ConditionFalse, meta.InvalidCELExpressionReason), false},
		{"changed while suspended", kustomization(2, 2, 1, metav1.ConditionTrue, meta.ReconciliationSucceededReason), false},
		{"changed, acted on and healthy", kustomization(2, 2, 2, metav1.ConditionTrue, meta.ReconciliationSucceededReason), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := celReady(t, cluster.ReconciledQuery, tc.observed)
			if err != nil {
				t.Fatalf("the query fails on %v: %v (provider-kubernetes would show that as the Object's message)", tc.observed.Object["status"], err)
			}
			if got != tc.want {
				t.Errorf("Ready %v, want %v", got, tc.want)
			}
		})
	}
}
