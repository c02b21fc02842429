// Package poolstatus shows on the claim what Karpenter reports of each
// pool's NodePool in the claimed cluster: its nodes, and the CPU and memory
// they provide against the pool's limits. It reads them through
// observe-only provider-kubernetes Objects (managementPolicies: Observe),
// so nothing there is managed twice, and observing never gates or
// withholds anything: a NodePool not observed yet is unknown, not a
// failure.
package poolstatus

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/crossplane/function-sdk-go/resource"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/do-now/function-karpenter/apis/v1alpha1"
	"github.com/do-now/function-karpenter/internal/cluster"
	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/nodepools"
)

// ConditionType says whether every pool is below the platform's
// near-limits ratio.
const ConditionType = "PoolsWithinLimits"

// Reasons of ConditionType.
const (
	ReasonWithinLimits = "WithinLimits"
	ReasonNearLimits   = "NearLimits"
	ReasonNotObserved  = "NotObservedYet"
)

// Name is the composed resource name of the Object observing pool's
// NodePool. It is API.
func Name(pool string) resource.Name { return resource.Name("observe-nodepool-" + pool) }

// NodeClassName is the composed resource name of the Object observing
// pool's EC2NodeClass. It is API.
func NodeClassName(pool string) resource.Name { return resource.Name("observe-ec2nodeclass-" + pool) }

// Objects are the Objects observing every enabled pool's NodePool and
// EC2NodeClass, and every pool one already observes. Both only observe
// while the claim lives. The EC2NodeClass's also holds the uninstall:
// its managementPolicies are [Observe, Delete] (a set crossplane-runtime
// v2.4.0 supports, pkg/reconciler/managed/policies.go: "Like ObserveOnly,
// but the external resource is deleted when the managed resource is
// deleted"), so deleting the Object deletes the class and the Object stays
// until provider-kubernetes' Get no longer finds it (provider-kubernetes
// v1.4.1, internal/controller/cluster/object/object.go: Observe reports
// ResourceExists until NotFound). Karpenter's finalizer on the class waits
// for every NodeClaim using it, whose finalizer waits for its instance to
// be terminated: the Object outlives every instance of its pool, with no
// timeout, and package usage makes the controller outlive the Object.
func Objects(c *config.Config, observed map[resource.Name]resource.ObservedComposed) (map[resource.Name]runtime.Object, error) {
	out := map[resource.Name]runtime.Object{}
	for _, pool := range nodepools.Pools {
		for _, o := range []struct {
			name             resource.Name
			apiVersion, kind string
			policies         []any
		}{
			{Name(pool), "karpenter.sh/v1", "NodePool", []any{"Observe"}},
			{NodeClassName(pool), "karpenter.k8s.aws/v1", "EC2NodeClass", []any{"Observe", "Delete"}},
		} {
			_, exists := observed[o.name]
			if !exists && pool == nodepools.Public && !c.PublicEnabled() {
				continue
			}
			manifest := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": o.apiVersion,
				"kind":       o.kind,
				"metadata":   map[string]any{"name": pool},
			}}
			wrapped, err := cluster.Object(c, manifest, nil)
			if err != nil {
				return nil, fmt.Errorf("cannot wrap the %s %s: %w", pool, o.kind, err)
			}
			wrapped.Object["spec"].(map[string]any)["managementPolicies"] = o.policies
			out[o.name] = wrapped
		}
	}
	return out, nil
}

// ValidationType is the claim's condition of what Karpenter's own
// validation of each EC2NodeClass says: once the controller runs, it dry
// runs CreateLaunchTemplate, CreateFleet and RunInstances for each class
// (karpenter-provider-aws v1.15.0 pkg/controllers/nodeclass/validation.go)
// and reports the verdict in the class's ValidationSucceeded condition.
const ValidationType = "NodeClassesValidated"

// Reasons of ValidationType.
const (
	ReasonValidated = "Validated"
	ReasonRefused   = "ValidationFailed"
)

// Validated is what Karpenter's validation of the pools' EC2NodeClasses
// says, from the observed classes' ValidationSucceeded conditions.
func Validated(c *config.Config, observed map[resource.Name]resource.ObservedComposed) Condition {
	var failed, unknown []string
	known := false
	for _, pool := range nodepools.Pools {
		if pool == nodepools.Public && !c.PublicEnabled() {
			continue
		}
		var nc struct {
			Status struct {
				Conditions []struct {
					Type    string `json:"type"`
					Status  string `json:"status"`
					Reason  string `json:"reason"`
					Message string `json:"message"`
				} `json:"conditions"`
			} `json:"status"`
		}
		ocd, ok := observed[NodeClassName(pool)]
		if !ok || ocd.Resource.GetValueInto("status.atProvider.manifest", &nc) != nil {
			unknown = append(unknown, pool)
			continue
		}
		verdict := ""
		for _, cond := range nc.Status.Conditions {
			if cond.Type == "ValidationSucceeded" {
				verdict = cond.Status
				if cond.Status == "False" {
					failed = append(failed, fmt.Sprintf("%s: %s: %s", pool, cond.Reason, cond.Message))
				}
			}
		}
		if verdict != "True" && verdict != "False" {
			unknown = append(unknown, pool)
			continue
		}
		known = true
	}
	out := Condition{Known: known, Within: known && len(failed) == 0}
	switch {
	case len(failed) > 0:
		out.Reason, out.Message = ReasonRefused, "Karpenter's own dry runs refuse: "+strings.Join(failed, "; ")
	case !known:
		out.Reason, out.Message = ReasonNotObserved, "no EC2NodeClass validated by Karpenter yet"
	default:
		out.Reason, out.Message = ReasonValidated, "Karpenter's own dry runs (CreateLaunchTemplate, CreateFleet, RunInstances) pass for every EC2NodeClass"
	}
	if known && len(unknown) > 0 {
		out.Message += "; not validated yet: " + strings.Join(unknown, ", ")
	}
	return out
}

// A Condition is the pools' state: Known is false while no pool is
// observed yet.
type Condition struct {
	Known, Within bool
	Reason        string
	Message       string
}

// Read is what the observed NodePools report, by pool, and the pools'
// condition at the platform's near-limits ratio.
func Read(c *config.Config, observed map[resource.Name]resource.ObservedComposed) (map[string]v1alpha1.PoolStatus, Condition) {
	ratio, _ := strconv.ParseFloat(c.Input.Monitoring.NearLimitsRatio, 64) // validated by config.Load
	pools := map[string]v1alpha1.PoolStatus{}
	var near, unknown []string
	for _, pool := range nodepools.Pools {
		if pool == nodepools.Public && !c.PublicEnabled() {
			continue
		}
		ocd, ok := observed[Name(pool)]
		var np struct {
			Spec struct {
				Limits map[string]string `json:"limits"`
			} `json:"spec"`
			Status struct {
				Nodes     *int64            `json:"nodes"`
				Resources map[string]string `json:"resources"`
			} `json:"status"`
		}
		if !ok || ocd.Resource.GetValueInto("status.atProvider.manifest", &np) != nil || np.Status.Resources == nil && np.Status.Nodes == nil {
			unknown = append(unknown, pool)
			continue
		}
		s := v1alpha1.PoolStatus{Nodes: np.Status.Nodes}
		for _, r := range []struct {
			name string
			into **v1alpha1.PoolUsage
		}{{"cpu", &s.CPU}, {"memory", &s.Memory}} {
			u := usage(np.Status.Resources[r.name], np.Spec.Limits[r.name])
			*r.into = u
			if u != nil && u.Percent != nil && ratioOf(np.Status.Resources[r.name], np.Spec.Limits[r.name]) >= ratio {
				near = append(near, fmt.Sprintf("%s: %s %s of %s (%d%%)", pool, r.name, u.Used, u.Limit, *u.Percent))
			}
		}
		pools[pool] = s
	}
	cond := Condition{Known: len(pools) > 0, Within: len(near) == 0}
	switch {
	case len(near) > 0:
		cond.Reason = ReasonNearLimits
		cond.Message = fmt.Sprintf("at or above %s of their limits, Karpenter will soon launch no more nodes: %s", c.Input.Monitoring.NearLimitsRatio, strings.Join(near, "; "))
	case !cond.Known:
		cond.Reason = ReasonNotObserved
		cond.Message = "no NodePool observed in the claimed cluster yet"
	default:
		cond.Reason = ReasonWithinLimits
		cond.Message = fmt.Sprintf("every pool below %s of its limits", c.Input.Monitoring.NearLimitsRatio)
	}
	if cond.Known && len(unknown) > 0 {
		sort.Strings(unknown)
		cond.Message += fmt.Sprintf("; not observed yet: %s", strings.Join(unknown, ", "))
	}
	return pools, cond
}

// usage is one resource against its limit; nil when Karpenter reports
// nothing of it.
func usage(used, limit string) *v1alpha1.PoolUsage {
	if used == "" {
		return nil
	}
	u := &v1alpha1.PoolUsage{Used: used, Limit: limit}
	if r := ratioOf(used, limit); !math.IsNaN(r) {
		p := int64(math.Floor(r * 100))
		u.Percent = &p
	}
	return u
}

// ratioOf is used over limit, NaN when either is not a quantity or the
// limit is zero.
func ratioOf(used, limit string) float64 {
	u, err := apiresource.ParseQuantity(used)
	if err != nil {
		return math.NaN()
	}
	l, err := apiresource.ParseQuantity(limit)
	if err != nil || l.IsZero() {
		return math.NaN()
	}
	return u.AsApproximateFloat64() / l.AsApproximateFloat64()
}
