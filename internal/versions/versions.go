// Package versions holds, as data, every Karpenter version the function can
// install and everything that depends on it: the controller policy statement
// for statement (with what a feature gate adds), the chart version, the
// release's module (its CRDs, chart and source, for validation), the chart
// values keys that differ, and which versions it may be upgraded from.
// Adding a version is an entry here plus its tests (docs/platform.md,
// "Adding a version"); nothing else in the code names a version.
package versions

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/do-now/function-karpenter/internal/policy"
)

// A Gate is one of Karpenter's feature gates the platform may enable:
// a core gate (the chart's settings.featureGates) or an AWS one
// (settings.awsFeatureGates).
type Gate string

// The gates a version may know.
const (
	// NodeRepair replaces nodes whose health conditions stay bad (core,
	// alpha, off by default: the chart's settings.featureGates.nodeRepair).
	NodeRepair Gate = "NodeRepair"
	// RebootForRepair lets node repair reboot an unhealthy instance in place
	// before replacing it (AWS, Karpenter 1.15). The chart says it "has no
	// effect without the nodeRepair feature gate" (v1.15.0
	// charts/karpenter/values.yaml), so it requires NodeRepair.
	RebootForRepair Gate = "RebootForRepair"
)

// The chart's blocks of gates, under settings.
const (
	CoreGates = "featureGates"
	AWSGates  = "awsFeatureGates"
)

// A GateInfo is what is true of a gate whatever the version.
type GateInfo struct {
	Gate Gate
	// Block is where the chart reads it: CoreGates or AWSGates.
	Block string
	// Requires is a gate without which this one does nothing.
	Requires Gate
}

// Gates are every gate any version knows, for validating the input, in
// the order they are applied.
var Gates = []GateInfo{
	{Gate: NodeRepair, Block: CoreGates},
	{Gate: RebootForRepair, Block: AWSGates, Requires: NodeRepair},
}

// AllGates are every gate's name.
func AllGates() []Gate {
	return project(Gates, func(g GateInfo) Gate { return g.Gate })
}

// Info is what is true of g; false when no version knows it.
func Info(g Gate) (GateInfo, bool) {
	return find(Gates, func(x GateInfo) bool { return x.Gate == g })
}

// A GateUse is what an enabled gate does for a version that knows it.
type GateUse struct {
	// ValuesKey is the gate's key in its block of the chart's settings.
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
	// Module is the Go module (path@version) of this release's tag, whose
	// zip carries its CRDs (pkg/apis/crds), which test/flux admits the node
	// pools against, its source, and its chart (charts/karpenter), which
	// test/flux renders the values with and the e2e installs. The chart's
	// Chart.yaml at a tag still names an earlier version: Karpenter's
	// release runs on the tag (.github/workflows/release.yaml) and stamps
	// the version into Chart.yaml before it packages the chart
	// (hack/release/common.sh, publishHelmChart), so the published chart is
	// the tag's, with that version.
	Module string
	// UpgradeFrom is the oldest version an installation may be upgraded
	// from to this one in one step; empty when every older known version
	// may.
	UpgradeFrom string
	// CRDs is the SHA-256 of the release's CRDs (its module zip's
	// pkg/apis/crds/*.yaml, by name: each name, its length and its
	// bytes), which test/flux holds against the zip. Two releases of one
	// minor with the same CRDs may be moved between either way.
	CRDs string
	// Kubernetes are the oldest and newest Kubernetes minors this version
	// runs on: its pkg/providers/version/version.go's MinK8sVersion and
	// MaxK8sVersion, outside which its version controller refuses the
	// cluster ("karpenter is not compatible with kubernetes version").
	// test/flux holds them against each version's module zip.
	Kubernetes [2]string
	// Dashboards are Karpenter's own Grafana dashboards for this version,
	// by name, at the URLs its documentation publishes them (its Getting
	// Started's grafana-values.yaml); delivered by reference, never
	// copied.
	Dashboards map[string]string
}

// dashboards are the capacity and performance dashboards Karpenter's
// documentation publishes for minor (v1.14, v1.15): the URLs its Getting
// Started's grafana-values.yaml names (aws/karpenter-provider-aws,
// website/content/en/<minor>/getting-started/getting-started-with-karpenter/;
// v1.14 read at main 1d927085, v1.15 at d77d1a3a).
func dashboards(minor string) map[string]string {
	base := "https://karpenter.sh/" + minor + "/getting-started/getting-started-with-karpenter/karpenter-"
	return map[string]string{"capacity": base + "capacity-dashboard.json", "performance": base + "performance-dashboard.json"}
}

// The first release of each minor the function knew, written out; its
// patches are Patch of it.
var (
	v1_14_1 = Version{
		Version:    "1.14.1",
		Chart:      "1.14.1",
		Policy:     policy.ControllerV1_14,
		Gates:      map[Gate]GateUse{NodeRepair: nodeRepair},
		Reference:  "karpenter-1.14-reference.json",
		Module:     karpenterModule + "@v1.14.1",
		CRDs:       "cf5742600cbdd479e0c1410eb98c7b0312c3a9eebeb1caab91c0cb348e43a04f",
		Kubernetes: [2]string{"1.26", "1.36"},
		Dashboards: dashboards("v1.14"),
	}
	v1_15_0 = Version{
		Version: "1.15.0",
		Chart:   "1.15.0",
		// No v1.15 reference setup is published where the function is
		// built: the v1.14 one, plus what 1.15.0's own source calls behind
		// a gate (its pkg/aws/sdk.go, checked by test/flux).
		Policy: policy.ControllerV1_14,
		Gates: map[Gate]GateUse{
			NodeRepair: nodeRepair,
			RebootForRepair: {
				ValuesKey:  "rebootForRepair",
				Statements: []func(policy.ControllerParams) policy.Statement{policy.InstanceReboot},
			},
		},
		Reference:  "karpenter-1.14-reference.json",
		Module:     karpenterModule + "@v1.15.0",
		CRDs:       "3f1715aa1efdd949900068a7a51064ba2979b59eb352694fe206e5b8990ee01b",
		Kubernetes: [2]string{"1.26", "1.37"},
		Dashboards: dashboards("v1.15"),
	}
)

// All are the known versions, oldest first. A patch release is one entry,
// Patch of its minor's: test/flux then holds its policy against the AWS
// calls its own pkg/aws/sdk.go declares, admits the node pools against its
// own CRDs and renders its values with its own chart.
var All = []Version{
	v1_14_1,
	// The latest 1.14 patch the module proxy serves (v1.14.3; v1.14.2 too).
	v1_14_1.Patch("1.14.3"),
	v1_15_0,
	// The latest 1.15 patch the module proxy serves (v1.15.2; v1.15.1 too).
	v1_15_0.Patch("1.15.2"),
}

// karpenterModule is the Go module of Karpenter's AWS provider, whose zip
// at each release tag carries that release's CRDs and source.
const karpenterModule = "github.com/aws/karpenter-provider-aws"

// Patch is v's patch release p: the same policy, gates and CRDs, its own
// chart version and module. A patch that changes what the controller
// calls, or its CRDs, is not a Patch but an entry of its own.
func (v Version) Patch(p string) Version {
	v.Version, v.Chart, v.Module = p, p, karpenterModule+"@v"+p
	return v
}

// nodeRepair is the core gate as every known chart reads it
// (settings.featureGates.nodeRepair); repairing a node deletes its
// NodeClaim, which the base policy already allows.
var nodeRepair = GateUse{ValuesKey: "nodeRepair"}

// Known lists every known version, oldest first.
func Known() []string {
	return project(All, func(v Version) string { return v.Version })
}

// Get returns a known version.
func Get(v string) (Version, error) {
	if x, ok := find(All, func(x Version) bool { return x.Version == v }); ok {
		return x, nil
	}
	return Version{}, fmt.Errorf("no Karpenter %q is known (known: %s)", v, strings.Join(Known(), ", "))
}

// OfChart is the known version whose chart is chart: what a Kustomization
// built for it records (internal/flux, VarKarpenterVersion).
func OfChart(chart string) (Version, bool) {
	return find(All, func(x Version) bool { return x.Chart == chart })
}

// find is the first element of s match is true of; false when there is
// none.
func find[T any](s []T, match func(T) bool) (T, bool) {
	i := slices.IndexFunc(s, match)
	if i < 0 {
		var none T
		return none, false
	}
	return s[i], true
}

// project is f of each element of s, in order.
func project[T, U any](s []T, f func(T) U) []U {
	out := make([]U, len(s))
	for i, x := range s {
		out[i] = f(x)
	}
	return out
}

// ControllerPolicy is v's controller policy with the given gates enabled.
func (v Version) ControllerPolicy(p policy.ControllerParams, gates []Gate) policy.Document {
	doc := v.Policy(p)
	for _, g := range Gates { // in a fixed order, so the document is stable
		if !slices.Contains(gates, g.Gate) {
			continue
		}
		for _, s := range v.Gates[g.Gate].Statements {
			doc.Statement = append(doc.Statement, s(p))
		}
	}
	return doc
}

// Values are the chart's settings for the enabled gates v knows, by
// block (CoreGates, AWSGates); nil when none.
func (v Version) Values(gates []Gate) map[string]map[string]any {
	var out map[string]map[string]any
	for _, g := range gates {
		use, ok := v.Gates[g]
		info, known := Info(g)
		if !ok || !known {
			continue
		}
		if out == nil {
			out = map[string]map[string]any{}
		}
		if out[info.Block] == nil {
			out[info.Block] = map[string]any{}
		}
		out[info.Block][use.ValuesKey] = true
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

// ErrDowngrade is what CheckUpgrade answers for a downgrade it refuses.
var ErrDowngrade = errors.New("a downgrade is refused: Karpenter does not support moving its CRDs back")

// CheckUpgrade says why a part last built for from may not move to to, or
// nil when it may: no downgrade (ErrDowngrade) but to a release of the same
// minor with the same CRDs, and no jump the newer version's upgrade notes
// forbid.
func CheckUpgrade(from, to string) error {
	if from == to {
		return nil
	}
	if Compare(to, from) < 0 {
		f, ferr := Get(from)
		t, terr := Get(to)
		if ferr != nil || terr != nil || minor(f.Version) != minor(t.Version) || f.CRDs != t.CRDs {
			return ErrDowngrade
		}
		return nil
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

// Serves tells whether v runs on Kubernetes minor (1.N).
func (v Version) Serves(minor string) bool {
	m, err := version.ParseGeneric(minor)
	if err != nil {
		return false
	}
	return !m.LessThan(version.MustParseGeneric(v.Kubernetes[0])) && !version.MustParseGeneric(v.Kubernetes[1]).LessThan(m)
}

// minor is a version's major.minor.
func minor(v string) string {
	p, err := version.ParseGeneric(v)
	if err != nil {
		return v
	}
	return fmt.Sprintf("%d.%d", p.Major(), p.Minor())
}
