package nodepools

import (
	"bytes"
	"encoding/json"
	"strconv"

	"go.yaml.in/yaml/v2"
)

// toYAML is sigs.k8s.io/yaml's Marshal, byte for byte
// (TestToYAMLIsSigsYAML), at a fraction of its cost: sigs.k8s.io/yaml
// v1.6.0 (yaml.go, JSONToYAML) encodes v as JSON, parses that JSON as YAML
// with go.yaml.in/yaml/v2, so that numbers take the types go-yaml's
// resolver gives them, and encodes the result with go-yaml. Here the JSON is
// decoded as JSON, and each number typed as that resolver (go.yaml.in/yaml/v2
// v2.4.3 resolve.go) types a plain scalar: an int when it parses as one, a
// uint64 when only that holds it, a float64 otherwise. The patches are
// composed on every changed request, and the YAML parse was a fifth of what
// the function allocated for one.
func toYAML(v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var obj any
	if err := dec.Decode(&obj); err != nil {
		return nil, err
	}
	return yaml.Marshal(yamlTyped(obj))
}

// yamlTyped gives every JSON number in v the type go-yaml's resolver gives
// the same scalar.
func yamlTyped(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = yamlTyped(e)
		}
	case []any:
		for i, e := range v {
			v[i] = yamlTyped(e)
		}
	case json.Number:
		s := string(v)
		if i, err := strconv.ParseInt(s, 0, 64); err == nil {
			return int(i)
		}
		if u, err := strconv.ParseUint(s, 0, 64); err == nil {
			return u
		}
		f, _ := strconv.ParseFloat(s, 64) // JSON's numbers all parse
		return f
	}
	return v
}
