package flux

import (
	"reflect"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/google/cel-go/cel"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/do-now/function-karpenter/internal/cluster"
)

// celReady evaluates an Object's readiness query on the object it observed, as
// provider-kubernetes v1.3.1 does (internal/controller/cluster/object/object.go,
// checkDeriveFromCelQuery): one variable, object, of any type; a query that is not
// boolean refused; an evaluation error is the Object unready, with the error as its
// message.
func celReady(t *testing.T, query string, observed *unstructured.Unstructured) (bool, error) {
	t.Helper()
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
	val, _, err := program.Eval(map[string]any{"object": observed.Object})
	if err != nil {
		return false, err
	}
	ready, _ := val.Value().(bool)
	return ready, nil
}

// A Kustomization's Object is Ready only once kustomize-controller has acted on the
// Kustomization's current generation and found it Ready. The states are what
// kustomize-controller writes (v1.9.3 internal/controller/kustomization_controller.go:
// ObservedGeneration set to Generation when a reconciliation ends, the Ready condition
// Unknown while it runs), written with its own API types.
func TestKustomizationReadiness(t *testing.T) {
	if cluster.Reconciled["policy"] != "DeriveFromCelQuery" || cluster.Reconciled["celQuery"] != cluster.ReconciledQuery {
		t.Fatalf("the Kustomizations' readiness is not the query under test: %v", cluster.Reconciled)
	}
	kustomization := func(generation, observed int64, ready metav1.ConditionStatus, reason string) *unstructured.Unstructured {
		k := &kustomizev1.Kustomization{
			TypeMeta:   metav1.TypeMeta{APIVersion: kustomizev1.GroupVersion.String(), Kind: kustomizev1.KustomizationKind},
			ObjectMeta: metav1.ObjectMeta{Name: "prod-eu-karpenter-nodes", Namespace: "flux-system", Generation: generation},
		}
		if ready != "" {
			k.Status.ObservedGeneration = observed
			k.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: ready, Reason: reason, ObservedGeneration: observed}}
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(k)
		if err != nil {
			t.Fatal(err)
		}
		return &unstructured.Unstructured{Object: u}
	}
	for _, tc := range []struct {
		name     string
		observed *unstructured.Unstructured
		want     bool
	}{
		{"just created, no status yet", kustomization(1, 0, "", ""), false},
		{"applied and healthy", kustomization(1, 1, metav1.ConditionTrue, meta.ReconciliationSucceededReason), true},
		// What provider-kubernetes read right after applying a change: the condition is
		// still the generation before's.
		{"changed, not yet acted on", kustomization(2, 1, metav1.ConditionTrue, meta.ReconciliationSucceededReason), false},
		{"changed, being reconciled", kustomization(2, 1, metav1.ConditionUnknown, meta.ProgressingReason), false},
		{"changed, failed", kustomization(2, 2, metav1.ConditionFalse, meta.HealthCheckFailedReason), false},
		{"changed, acted on and healthy", kustomization(2, 2, metav1.ConditionTrue, meta.ReconciliationSucceededReason), true},
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
