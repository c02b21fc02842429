package nodepools

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	sigsyaml "sigs.k8s.io/yaml"
)

// TestToYAMLIsSigsYAML holds toYAML to what it replaces, sigs.k8s.io/yaml's
// Marshal, over the scalars YAML resolves by their look (booleans, nulls,
// numbers spelt as strings), every width of number, and nesting.
func TestToYAMLIsSigsYAML(t *testing.T) {
	type tagged struct {
		Name    string            `json:"name"`
		Omitted string            `json:"omitted,omitempty"`
		Labels  map[string]string `json:"labels,omitempty"`
		Limit   *int64            `json:"limit,omitempty"`
	}
	limit := int64(-42)
	for name, v := range map[string]any{
		"strings that read as other types": map[string]any{
			"yes": "yes", "no": "no", "on": "on", "true": "true", "null": "null", "tilde": "~", "empty": "",
			"int": "1", "float": "1.0", "exp": "1e3", "hex": "0x10", "octal": "010", "date": "2026-12-02", "colon": "a: b",
			"multiline": "line one\nline two\n", "unicode": "é ✓", "leading space": " x", "dash": "- x", "hash": "# x",
		},
		"numbers": map[string]any{
			"zero": 0, "int": 110, "negative": -1, "max int64": int64(math.MaxInt64), "min int64": int64(math.MinInt64),
			"beyond int64": uint64(math.MaxUint64), "float": 1.5, "integral float": 2.0, "big float": 1e21, "small float": 1e-7,
			"float32": float32(0.1),
		},
		"nesting": map[string]any{
			"empty map": map[string]any{}, "empty list": []any{}, "nil": nil, "bool": true,
			"list": []any{"a", 1, 2.5, false, nil, map[string]any{"k": []any{}}}, "deep": map[string]any{"a": map[string]any{"b": []any{[]any{"c"}}}},
		},
		"struct":        tagged{Name: "x", Labels: map[string]string{"b": "2", "a": "1"}, Limit: &limit},
		"empty struct":  tagged{},
		"list at top":   []tagged{{Name: "a"}, {Name: "b"}},
		"string at top": "true",
		"user data":     publicUserData(),
	} {
		want, err := sigsyaml.Marshal(v)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := toYAML(v)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("%s: -sigs.k8s.io/yaml +toYAML:\n%s", name, diff)
		}
	}
}
