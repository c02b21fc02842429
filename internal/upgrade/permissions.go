package upgrade

import (
	"encoding/json"
	"fmt"
)

// A document is a policy document as parsed JSON.
type document struct {
	Version   any              `json:"Version"`
	Statement []map[string]any `json:"Statement"`
}

// parsePolicy parses a policy document; false when doc is not one.
func parsePolicy(doc string) (document, bool) {
	var d document
	err := json.Unmarshal([]byte(doc), &d)
	return d, err == nil && d.Statement != nil
}

// statementKey is a statement as parsed JSON, whatever its Sid (a
// statement kept for a running controller may have lost its own), in one
// canonical spelling: encoding/json writes map keys sorted.
func statementKey(s map[string]any) string {
	b, _ := json.Marshal(stripSid(s)) // parsed from JSON: always marshals
	return string(b)
}

// keys are the document's statements by statementKey.
func (d document) keys() map[string]map[string]any {
	out := make(map[string]map[string]any, len(d.Statement))
	for _, s := range d.Statement {
		out[statementKey(s)] = s
	}
	return out
}

// covers tells whether every statement of want is among held's.
func covers(held, want map[string]map[string]any) bool {
	for k := range want {
		if _, ok := held[k]; !ok {
			return false
		}
	}
	return true
}

// union is want's document with the statements of held (the document the
// function wrote last) it drops added back, so the controller keeps what it
// still uses while it moves. A kept
// statement whose Sid want uses loses its Sid: IAM refuses two alike.
func union(held, want string) (string, error) {
	wd, ok := parsePolicy(want)
	if !ok {
		return "", fmt.Errorf("the controller policy is not a policy document: %s", want)
	}
	hd, _ := parsePolicy(held)
	sids := map[any]bool{}
	for _, w := range wd.Statement {
		sids[w["Sid"]] = true
	}
	wk := wd.keys()
	all := append([]map[string]any{}, wd.Statement...)
	for _, h := range hd.Statement {
		if _, kept := wk[statementKey(h)]; kept {
			continue
		}
		if sids[h["Sid"]] {
			h = stripSid(h)
		}
		all = append(all, h)
	}
	b, err := json.Marshal(document{wd.Version, all})
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
