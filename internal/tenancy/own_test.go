package tenancy

import (
	"strings"
	"testing"

	utilrand "k8s.io/apimachinery/pkg/util/rand"
)

// TestGeneratedForTheAPIServersNames holds generatedFor against the API
// server's own generator: k8s.io/apiserver's SimpleNameGenerator names an
// object with generateName BASE as BASE (cut to 58 characters) followed by
// utilrand.String(5) (pkg/storage/names/generate.go), and utilrand is
// called here, so a change of its alphabet fails this test. A name the
// generator cannot give is refused.
func TestGeneratedForTheAPIServersNames(t *testing.T) {
	for _, claim := range []string{"karpenter", "k", strings.Repeat("a", 57), strings.Repeat("b", 63)} {
		base := claim + "-"
		if len(base) > 58 {
			base = base[:58]
		}
		for range 200 {
			if name := base + utilrand.String(5); !generatedFor(name, claim) {
				t.Fatalf("claim %q: the API server may generate %q, which generatedFor refuses", claim, name)
			}
		}
	}
	for _, tc := range []struct{ name, claim string }{
		{"karpenter-platform", "karpenter"}, // not five characters
		{"karpenter-aeiou", "karpenter"},    // vowels: never generated
		{"karpenter-x7k2p", "other"},        // another claim's
		{"karpenter-x7k2", "karpenter"},
		{"karpenter-x7k2pq", "karpenter"},
	} {
		if generatedFor(tc.name, tc.claim) {
			t.Errorf("%q counts as generated for claim %q", tc.name, tc.claim)
		}
	}
}
