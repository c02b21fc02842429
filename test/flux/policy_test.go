package flux

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/do-now/function-karpenter/internal/awsres"
	"github.com/do-now/function-karpenter/internal/versions"
)

// sdkServices maps the AWS API interfaces of Karpenter's pkg/aws/sdk.go to
// the IAM service prefix of their actions.
var sdkServices = map[string]string{
	"EC2API":             "ec2",
	"IAMAPI":             "iam",
	"EKSAPI":             "eks",
	"PricingAPI":         "pricing",
	"SSMAPI":             "ssm",
	"SQSAPI":             "sqs",
	"ARCZonalShiftAPI":   "arc-zonal-shift",
	"TimestreamWriteAPI": "timestream",
}

// notGranted are the calls of Karpenter's AWS interfaces the controller
// policy leaves out, and why; every other call must be granted.
var notGranted = map[string]string{
	"iam:CreateInstanceProfile":          "the nodes' instance profile exists: the EC2NodeClasses name it, so Karpenter never creates one",
	"iam:DeleteInstanceProfile":          "Karpenter deletes only instance profiles it created, and it creates none",
	"iam:AddRoleToInstanceProfile":       "Karpenter never creates an instance profile to put a role in",
	"iam:TagInstanceProfile":             "Karpenter never creates an instance profile to tag",
	"iam:RemoveRoleFromInstanceProfile":  "Karpenter never creates an instance profile to take a role out of",
	"iam:GetRole":                        "called by Karpenter's own end-to-end tests only",
	"sqs:SendMessage":                    "called by Karpenter's own end-to-end tests only: the controller reads and deletes interruption messages",
	"arc-zonal-shift:GetManagedResource": "the product does not enable ARC zonal shift for Karpenter",
	"timestream:WriteRecords":            "Karpenter's benchmarks write their figures to Timestream; the controller never does",
}

// apiCalls reads the AWS calls a version's controller can make: the methods
// of the interfaces in its module's pkg/aws/sdk.go, as IAM actions.
func apiCalls(t *testing.T, v versions.Version) []string {
	t.Helper()
	src := string(karpenterModule(t, v.Module).file(t, "pkg/aws/sdk.go"))
	iface := regexp.MustCompile(`(?s)type (\w+) interface \{(.*?)\n\}`)
	method := regexp.MustCompile(`(?m)^\s+([A-Z]\w*)\(`)
	var calls []string
	for _, m := range iface.FindAllStringSubmatch(src, -1) {
		service, ok := sdkServices[m[1]]
		if !ok {
			t.Fatalf("Karpenter %s's sdk.go has interface %s, which the test does not map to an IAM service", v.Version, m[1])
		}
		for _, mm := range method.FindAllStringSubmatch(m[2], -1) {
			calls = append(calls, service+":"+mm[1])
		}
	}
	if len(calls) < 30 {
		t.Fatalf("read only %d calls from Karpenter %s's sdk.go: the parse is broken", len(calls), v.Version)
	}
	sort.Strings(calls)
	return calls
}

// granted are the actions a policy document allows.
func granted(t *testing.T, doc string) []string {
	t.Helper()
	var d struct {
		Statement []struct {
			Effect string
			Action []string
		}
	}
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range d.Statement {
		if s.Effect == "Allow" {
			out = append(out, s.Action...)
		}
	}
	return out
}

// TestPolicyCoversWhatEachVersionCalls holds each version's controller
// policy against that version's own source: every AWS call Karpenter can
// make is granted, with every feature gate on, or left out on purpose; and
// what a gate adds is called by that version, granted only with the gate.
// ec2:RebootInstances is the case in point: 1.15.0 calls it (behind
// RebootForRepair), 1.14.1 has no such call and is never granted it.
func TestPolicyCoversWhatEachVersionCalls(t *testing.T) {
	var gates []string
	for _, g := range versions.AllGates() {
		gates = append(gates, string(g))
	}
	for _, v := range versions.All {
		t.Run(v.Version, func(t *testing.T) {
			calls := apiCalls(t, v)
			withGates := load(t, edits{"version": v.Version}, edits{"controller.featureGates": gates})
			without := load(t, edits{"version": v.Version}, nil)
			all, err := awsres.ControllerPolicyOf(withGates, v.Version)
			if err != nil {
				t.Fatal(err)
			}
			base, err := awsres.ControllerPolicyOf(without, v.Version)
			if err != nil {
				t.Fatal(err)
			}
			allowed, baseAllowed := granted(t, all), granted(t, base)

			for _, c := range calls {
				if _, skip := notGranted[c]; !skip && !slices.Contains(allowed, c) {
					t.Errorf("Karpenter %s calls %s, which its controller policy does not grant even with every gate on", v.Version, c)
				}
			}
			for _, a := range allowed {
				if !slices.Contains(calls, a) && !slices.Contains(notCalledButGranted, a) {
					t.Errorf("Karpenter %s's policy grants %s, which its sdk.go never calls", v.Version, a)
				}
			}
			for g, use := range v.Gates {
				if use.ValuesKey == "" {
					t.Errorf("gate %s of %s has no chart values key: enabling it would not reach the controller", g, v.Version)
				}
			}
			for _, a := range allowed {
				gated := !slices.Contains(baseAllowed, a)
				if gated && !slices.Contains(calls, a) {
					t.Errorf("a gate of %s adds %s, which that version never calls", v.Version, a)
				}
			}
		})
	}
}

// notCalledButGranted are actions the reference policy grants that no AWS
// interface method of Karpenter's names: the IAM action of a call whose API
// name differs, or a permission AWS checks on the caller's behalf.
var notCalledButGranted = []string{
	"iam:PassRole", // checked by EC2 when RunInstances/CreateFleet launch with the node role
}

// TestKubernetesRange holds each version's Kubernetes minors against what its
// own module zip's pkg/providers/version/version.go declares (MinK8sVersion,
// MaxK8sVersion): the range the function refuses a cluster outside of.
func TestKubernetesRange(t *testing.T) {
	constant := regexp.MustCompile(`(?m)^\s*(MinK8sVersion|MaxK8sVersion)\s*=\s*"([0-9.]+)"`)
	for _, v := range versions.All {
		src := string(karpenterModule(t, v.Module).file(t, "pkg/providers/version/version.go"))
		got := map[string]string{}
		for _, m := range constant.FindAllStringSubmatch(src, -1) {
			got[m[1]] = m[2]
		}
		if want := (map[string]string{"MinK8sVersion": v.Kubernetes[0], "MaxK8sVersion": v.Kubernetes[1]}); !maps.Equal(got, want) {
			t.Errorf("Karpenter %s: internal/versions says Kubernetes %v, its version.go %v", v.Version, v.Kubernetes, got)
		}
	}
}

// TestCRDDigests holds each version's CRDs digest, which decides whether a
// downgrade within its minor is allowed, against its own module zip's
// pkg/apis/crds: each file's name, length and bytes, in name order.
func TestCRDDigests(t *testing.T) {
	for _, v := range versions.All {
		files := karpenterModule(t, v.Module).files(t, "pkg/apis/crds")
		h := sha256.New()
		for _, name := range slices.Sorted(maps.Keys(files)) {
			if !strings.HasSuffix(name, ".yaml") {
				continue
			}
			fmt.Fprintf(h, "%s\n%d\n", name, len(files[name]))
			h.Write(files[name])
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != v.CRDs {
			t.Errorf("Karpenter %s: internal/versions says CRDs %s, its zip's are %s", v.Version, v.CRDs, got)
		}
	}
}
