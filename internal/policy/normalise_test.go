package policy

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"
)

// Helpers of the policy tests: documents compared as parsed data.

// parseJSON decodes a policy document as generic JSON data.
func parseJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(s), &doc); err != nil {
		t.Fatalf("cannot parse policy %s: %v", s, err)
	}
	return doc
}

// normaliseStatements returns a document's statements in a form where two
// equivalent policies are equal: statements sorted by Sid, Action and Resource
// as sorted lists, a Principal's services as sorted lists, and every condition
// value as a list (a single string is a one-element list). The order of
// condition values is kept.
func normaliseStatements(t *testing.T, doc map[string]any) []map[string]any {
	t.Helper()
	raw, ok := doc["Statement"].([]any)
	if !ok {
		t.Fatalf("policy has no Statement list: %v", doc)
	}
	out := make([]map[string]any, 0, len(raw))
	for _, r := range raw {
		s, ok := r.(map[string]any)
		if !ok {
			t.Fatalf("statement is not an object: %v", r)
		}
		out = append(out, normaliseStatement(t, s))
	}
	sort.SliceStable(out, func(i, j int) bool {
		si, _ := out[i]["Sid"].(string)
		sj, _ := out[j]["Sid"].(string)
		return si < sj
	})
	return out
}

func normaliseStatement(t *testing.T, s map[string]any) map[string]any {
	t.Helper()
	out := make(map[string]any, len(s))
	for k, v := range s {
		switch k {
		case "Action", "NotAction", "Resource", "NotResource":
			out[k] = sortedList(t, v)
		case "Principal":
			if m, ok := v.(map[string]any); ok {
				p := make(map[string]any, len(m))
				for kind, ids := range m {
					p[kind] = sortedList(t, ids)
				}
				v = p
			}
			out[k] = v
		case "Condition":
			ops, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("Condition is not an object: %v", v)
			}
			c := make(map[string]any, len(ops))
			for op, keys := range ops {
				km, ok := keys.(map[string]any)
				if !ok {
					t.Fatalf("Condition operator %s is not an object: %v", op, keys)
				}
				n := make(map[string]any, len(km))
				for key, val := range km {
					n[key] = list(t, val)
				}
				c[op] = n
			}
			out[k] = c
		default:
			out[k] = v
		}
	}
	return out
}

// list reads a JSON string or list of strings as a list.
func list(t *testing.T, v any) []any {
	t.Helper()
	switch v := v.(type) {
	case string:
		return []any{v}
	case []any:
		for _, e := range v {
			if _, ok := e.(string); !ok {
				t.Fatalf("list element is not a string: %v", e)
			}
		}
		return append([]any(nil), v...)
	default:
		t.Fatalf("want a string or a list of strings, got %T %v", v, v)
		return nil
	}
}

func sortedList(t *testing.T, v any) []any {
	t.Helper()
	l := list(t, v)
	sort.Slice(l, func(i, j int) bool { return l[i].(string) < l[j].(string) })
	return l
}

// replaceStrings applies r to every string of v, object keys included.
func replaceStrings(v any, r *strings.Replacer) any {
	switch v := v.(type) {
	case string:
		return r.Replace(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = replaceStrings(e, r)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[r.Replace(k)] = replaceStrings(e, r)
		}
		return out
	default:
		return v
	}
}

// strs returns every string of v, object keys included.
func strs(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, strs(e)...)
		}
		return out
	case map[string]any:
		var out []string
		for k, e := range v {
			out = append(out, k)
			out = append(out, strs(e)...)
		}
		return out
	default:
		return nil
	}
}

// arns returns every string of v that is an ARN.
func arns(v any) []string {
	return strsWhere(v, func(s string) bool { return strings.HasPrefix(s, "arn:") })
}

// placeholders returns every string of v that still holds a CloudFormation
// placeholder.
func placeholders(v any) []string {
	return strsWhere(v, func(s string) bool { return strings.Contains(s, "${") })
}

// strsWhere returns the strings of v, object keys included, for which keep
// is true.
func strsWhere(v any, keep func(string) bool) []string {
	var out []string
	for _, s := range strs(v) {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}
