package upgrade

import (
	"encoding/json"
	"fmt"
)

// statements is a policy document's statements, parsed; nil when it is
// not a policy.
func statements(doc string) (version any, st []map[string]any) {
	var d struct {
		Version   any              `json:"Version"`
		Statement []map[string]any `json:"Statement"`
	}
	if json.Unmarshal([]byte(doc), &d) != nil {
		return nil, nil
	}
	return d.Version, d.Statement
}

// statementKey is a statement as parsed JSON, whatever its Sid (a
// statement kept for a running controller may have lost its own), in one
// canonical spelling: encoding/json writes map keys sorted.
func statementKey(s map[string]any) string {
	b, _ := json.Marshal(stripSid(s)) // parsed from JSON: always marshals
	return string(b)
}

// missing are the statements of want that held lacks.
func missing(held, want []map[string]any) []map[string]any {
	have := make(map[string]bool, len(held))
	for _, h := range held {
		have[statementKey(h)] = true
	}
	var out []map[string]any
	for _, w := range want {
		if !have[statementKey(w)] {
			out = append(out, w)
		}
	}
	return out
}

// union is want's document with the statements of held it drops added
// back, so the controller keeps what it still uses while it moves. A kept
// statement whose Sid want uses loses its Sid: IAM refuses two alike.
func union(held, want string) (string, error) {
	version, ws := statements(want)
	_, hs := statements(held)
	if ws == nil {
		return "", fmt.Errorf("the controller policy is not a policy document: %s", want)
	}
	sids := map[any]bool{}
	for _, w := range ws {
		sids[w["Sid"]] = true
	}
	all := append([]map[string]any{}, ws...)
	for _, h := range missing(ws, hs) {
		if sids[h["Sid"]] {
			h = stripSid(h)
		}
		all = append(all, h)
	}
	b, err := json.Marshal(struct {
		Version   any              `json:"Version"`
		Statement []map[string]any `json:"Statement"`
	}{version, all})
	return string(b), err
}

func stripSid(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k != "Sid" {
			out[k] = v
		}
	}
	return out
}
