package flux

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestAdmissionRefusesWhatTheAPIServerWould proves the in-process admission
// the other tests rely on is not vacuous: each of its checks (unknown
// fields, the OpenAPI schema, the CEL rules of Karpenter's CRDs) refuses a
// broken copy of the default pools.
func TestAdmissionRefusesWhatTheAPIServerWould(t *testing.T) {
	c := load(t, nil, nil)
	schemas := karpenterSchemas(t, version(t, c))
	built := byKindName(fluxBuild(t, nodesKustomization(t, c)))

	cases := map[string]struct {
		reason string
		object string
		path   []string
		value  any
		want   string
	}{
		"UnknownField": {
			reason: "A misspelt field is refused, as a strict server-side apply refuses it, not silently pruned.",
			object: "EC2NodeClass/private",
			path:   []string{"spec", "instanceProfiles"},
			value:  "x",
			want:   "unknown field",
		},
		"SchemaMinimum": {
			reason: "The OpenAPI schema's bounds are checked: a hop limit is at least 1.",
			object: "EC2NodeClass/private",
			path:   []string{"spec", "metadataOptions", "httpPutResponseHopLimit"},
			value:  int64(0),
			want:   "should be greater than or equal to 1",
		},
		"SchemaType": {
			reason: "A volume size that substitution turned into a number is not the string the schema wants.",
			object: "EC2NodeClass/private",
			path:   []string{"spec", "blockDeviceMappings"},
			value:  []any{map[string]any{"deviceName": "/dev/xvda", "ebs": map[string]any{"volumeSize": int64(50)}}},
			want:   "must be of type string",
		},
		"CELAMIAlias": {
			reason: "EC2NodeClass's CEL rule on the alias format is evaluated.",
			object: "EC2NodeClass/private",
			path:   []string{"spec", "amiSelectorTerms"},
			value:  []any{map[string]any{"alias": "al2023"}},
			want:   "'alias' is improperly formatted",
		},
		"CELRestrictedTag": {
			reason: "EC2NodeClass's CEL rule on restricted tags is evaluated.",
			object: "EC2NodeClass/public",
			path:   []string{"spec", "tags"},
			value:  map[string]any{"karpenter.sh/nodepool": "public"},
			want:   "karpenter.sh/nodepool",
		},
		"CELGtNegative": {
			reason: "NodePool's CEL rule on Gt values is evaluated.",
			object: "NodePool/private",
			path:   []string{"spec", "template", "spec", "requirements"},
			value:  []any{map[string]any{"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": []any{"-1"}}},
			want:   "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
		},
		"CELEmptyIn": {
			reason: "NodePool's CEL rule refuses an In requirement without values.",
			object: "NodePool/public",
			path:   []string{"spec", "template", "spec", "requirements"},
			value:  []any{map[string]any{"key": "kubernetes.io/arch", "operator": "In", "values": []any{}}},
			want:   "requirements with operator 'In' must have a value defined",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o, ok := built[tc.object]
			if !ok {
				t.Fatalf("no %s among the built objects", tc.object)
			}
			broken := o.DeepCopy()
			if err := unstructured.SetNestedField(broken.Object, tc.value, tc.path...); err != nil {
				t.Fatal(err)
			}
			_, errs := schemas.admit(broken)
			if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.want) {
				t.Errorf("\n%s\nadmit(%s): want an error containing %q, got: %v", tc.reason, tc.object, tc.want, errs)
			}
		})
	}
}
