// Package policy builds the IAM policy documents of the product as data:
// typed statements marshalled to JSON, never strings with input inside.
package policy

import (
	"encoding/json"
)

// Version is the IAM policy language version.
const Version = "2012-10-17"

// Effects of a statement.
const (
	Allow = "Allow"
	Deny  = "Deny"
)

// A Document is an IAM policy document.
type Document struct {
	Version   string      `json:"Version"`
	ID        string      `json:"Id,omitempty"`
	Statement []Statement `json:"Statement"`
}

// A Statement is one statement of a policy document.
type Statement struct {
	Sid       string     `json:"Sid,omitempty"`
	Effect    string     `json:"Effect"`
	Principal *Principal `json:"Principal,omitempty"`
	Action    []string   `json:"Action"`
	Resource  []string   `json:"Resource,omitempty"`
	Condition Condition  `json:"Condition,omitempty"`
}

// A Condition maps an operator (StringEquals, ArnEquals, …) to condition keys
// and the values they are compared with.
type Condition map[string]map[string][]string

// A Principal is who a resource or trust policy applies to: either everyone
// or a set of AWS service principals.
type Principal struct {
	Everyone bool
	Service  []string
}

// MarshalJSON writes "*" for everyone, or {"Service": [...]}.
func (p Principal) MarshalJSON() ([]byte, error) {
	if p.Everyone {
		return json.Marshal("*")
	}
	return json.Marshal(struct {
		Service []string `json:"Service"`
	}{p.Service})
}

// JSON returns the document as compact JSON, the form AWS counts for its
// size limits.
func (d Document) JSON() string {
	b, err := json.Marshal(d)
	if err != nil {
		// Every field is a string, a slice or a map of them.
		panic(err)
	}
	return string(b)
}

func one(s string) []string { return []string{s} }
