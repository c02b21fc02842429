// Package versions holds, as data, every Karpenter version the function can
// install and everything that depends on it: the controller policy statement
// for statement (with what a feature gate adds), the chart version, where
// the version's CRDs and nearest chart come from for validation, the chart
// values keys that differ, and which versions it may be upgraded from.
// Adding a version is an entry here plus its tests (README "Adding a
// Karpenter version"); nothing else in the code names a version.
package versions

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/do-now/function-karpenter/internal/policy"
)

// A Gate is one of Karpenter's AWS feature gates (the chart's
// settings.awsFeatureGates) the platform may enable.
type Gate string

// The gates a version may know.
const (
	// RebootForRepair lets node repair reboot an unhealthy instance in place
	// before replacing it (Karpenter 1.15).
	RebootForRepair Gate = "RebootForRepair"
)

// Gates are every gate any version knows, for validating the input.
var Gates = []Gate{RebootForRepair}

// A GateUse is what an enabled gate does for a version that knows it.
type GateUse struct {
	// ValuesKey is the gate's key under the chart's
	// settings.awsFeatureGates.
	ValuesKey string
	// Statements are what the gate adds to the controller policy.
	Statements []func(policy.ControllerParams) policy.Statement
}

// A Version is one Karpenter release.
type Version struct {
	// Version is the release, as tenants write it in spec.version.
	Version string
	// Chart is the chart version the controller's HelmRelease installs.
	Chart string
	// Policy is the controller policy with every gate off.
	Policy func(policy.ControllerParams) policy.Document
	// Gates are the feature gates this version knows and what each does
	// when the platform enables it. A gate not listed is not known to the
	// version: enabling it changes nothing for this version.
	Gates map[Gate]GateUse
	// Reference is the upstream policy document Policy is checked against
	// (internal/policy/testdata/), and where it comes from.
	Reference string
	// CRDs is the Go module (path@version) whose zip carries this
	// version's CRDs (pkg/apis/crds), which test/flux admits the node pools
	// against.
	CRDs string
	// NearestChart is the Go module whose zip's charts/karpenter is the
	// nearest chart to this version the module proxy serves, and
	// NearestChartVersion that chart's version: a tag's zip carries the
	// chart of the release before it, so the newest version's own chart is
	// not to be had. test/flux renders this version's values with it.
	NearestChart, NearestChartVersion string
	// UpgradeFrom is the oldest version an installation may be upgraded
	// from to this one in one step; empty when every older known version
	// may.
	UpgradeFrom string
}

// All are the known versions, oldest first.
var All = []Version{
	{
		Version:   "1.14.1",
		Chart:     "1.14.1",
		Policy:    policy.ControllerV1_14,
		Reference: "karpenter-1.14-reference.json",
		CRDs:      "github.com/aws/karpenter-provider-aws@v1.14.1",
		// v1.15.0's zip carries the 1.14.1 chart: this version's own.
		NearestChart:        "github.com/aws/karpenter-provider-aws@v1.15.0",
		NearestChartVersion: "1.14.1",
	},
	{
		Version: "1.15.0",
		Chart:   "1.15.0",
		// No v1.15 reference setup is published where the function is
		// built: the v1.14 one, plus what 1.15.0's own source calls behind
		// a gate (its pkg/aws/sdk.go, checked by test/flux).
		Policy: policy.ControllerV1_14,
		Gates: map[Gate]GateUse{RebootForRepair: {
			ValuesKey:  "rebootForRepair",
			Statements: []func(policy.ControllerParams) policy.Statement{policy.InstanceReboot},
		}},
		Reference:           "karpenter-1.14-reference.json",
		CRDs:                "github.com/aws/karpenter-provider-aws@v1.15.0",
		NearestChart:        "github.com/aws/karpenter-provider-aws@v1.15.0",
		NearestChartVersion: "1.14.1",
	},
}

// Known lists every known version, oldest first.
func Known() []string {
	out := make([]string, len(All))
	for i, v := range All {
		out[i] = v.Version
	}
	return out
}

// Get returns a known version.
func Get(v string) (Version, error) {
	i := slices.IndexFunc(All, func(x Version) bool { return x.Version == v })
	if i < 0 {
		return Version{}, fmt.Errorf("no Karpenter %q is known (known: %s)", v, strings.Join(Known(), ", "))
	}
	return All[i], nil
}

// ControllerPolicy is v's controller policy with the given gates enabled.
func (v Version) ControllerPolicy(p policy.ControllerParams, gates []Gate) policy.Document {
	doc := v.Policy(p)
	for _, g := range Gates { // in a fixed order, so the document is stable
		if !slices.Contains(gates, g) {
			continue
		}
		for _, s := range v.Gates[g].Statements {
			doc.Statement = append(doc.Statement, s(p))
		}
	}
	return doc
}

// Values are the chart's settings.awsFeatureGates for the enabled gates v
// knows; nil when none.
func (v Version) Values(gates []Gate) map[string]any {
	var out map[string]any
	for _, g := range gates {
		if use, ok := v.Gates[g]; ok {
			if out == nil {
				out = map[string]any{}
			}
			out[use.ValuesKey] = true
		}
	}
	return out
}

// Compare orders two versions: negative when a is older than b, zero when
// equal, positive when newer.
func Compare(a, b string) int {
	va, errA := version.ParseSemantic(a)
	vb, errB := version.ParseSemantic(b)
	switch {
	case errA != nil || errB != nil:
		return strings.Compare(a, b)
	case va.LessThan(vb):
		return -1
	case vb.LessThan(va):
		return 1
	}
	return 0
}

// ErrDowngrade is what CheckUpgrade answers for a downgrade.
var ErrDowngrade = errors.New("a downgrade is refused: Karpenter does not support moving its CRDs back")

// CheckUpgrade says why a part last built for from may not move to to, or
// nil when it may: no downgrade (ErrDowngrade), and no jump the newer
// version's upgrade notes forbid.
func CheckUpgrade(from, to string) error {
	if from == to {
		return nil
	}
	if Compare(to, from) < 0 {
		return ErrDowngrade
	}
	t, err := Get(to)
	if err != nil {
		return err
	}
	if t.UpgradeFrom != "" && Compare(from, t.UpgradeFrom) < 0 {
		return fmt.Errorf("Karpenter %s may be upgraded to from %s or later, not from %s: upgrade through %s first", to, t.UpgradeFrom, from, t.UpgradeFrom)
	}
	return nil
}
