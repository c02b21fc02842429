package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/do-now/function-karpenter/internal/cluster"
	"github.com/do-now/function-karpenter/internal/config"
)

// TestDefaultsAreTheCodes: the defaults the reference writes are the values
// the function's code holds, a field the platform leaves unset without one
// says so, and a required pin has none.
func TestDefaultsAreTheCodes(t *testing.T) {
	var b bytes.Buffer
	defaults(&b, schema("../../package/input/karpenter.fn.socle.do-now.io_inputs.yaml"), schema("../../apis/definition.yaml"))
	got := b.String()
	r := config.DefaultControllerResources()
	check := cluster.AccessCheckResources()
	for _, row := range []string{
		fmt.Sprintf("| `controller.replicas` | `%d` |", config.DefaultControllerReplicas),
		fmt.Sprintf("| `controller.resources.requests` | `cpu: %s`, `memory: %s` |", r.Requests.Cpu(), r.Requests.Memory()),
		fmt.Sprintf("| `controller.resources.limits` | `cpu: %s`, `memory: %s` |", r.Limits.Cpu(), r.Limits.Memory()),
		fmt.Sprintf("| `accessCheck.minRunInterval` | `%s` |", config.DefaultMinRunInterval),
		fmt.Sprintf("| `pools.defaults.consolidateAfter` | `%s` |", config.DefaultConsolidateAfter),
		fmt.Sprintf("| `pools.defaults.expireAfter` | `%s` |", config.DefaultExpireAfter),
		fmt.Sprintf("| `pools.defaults.disruptionBudget` | `%s` |", config.DefaultDisruptionBudget),
		"| `pools.defaults.terminationGracePeriod` | none |",
		fmt.Sprintf("| `spec.pools.private.limits.cpu` | `%s` |", config.DefaultPrivateLimits.CPU),
		fmt.Sprintf("| `spec.pools.public.limits.memory` | `%s` |", config.DefaultPublicLimits.Memory),
		"| `nodes.defaultAmiAlias` | required |",
		"| `versions` | required |",
		fmt.Sprintf("| `final-check` | Deployment | 1 | `cpu: %s`, `memory: %s` | `cpu: %s`, `memory: %s` |",
			check.Requests.Cpu(), check.Requests.Memory(), check.Limits.Cpu(), check.Limits.Memory()),
	} {
		if !strings.Contains(got, row+"\n") {
			t.Errorf("the defaults do not hold the row\n%s\n", row)
		}
	}
	if strings.Contains(got, "| `tenancy.") {
		t.Error("the defaults have rows of the tenancy's fields, which default to the platform-wide ones")
	}
}
