// Package configtest gives tests of other packages a function input with
// the pins config.Load requires (input.versions, input.nodes.defaultAmiAlias
// and .startupTaints),
// so each test writes only what it tests.
package configtest

import (
	"github.com/do-now/function-karpenter/internal/ami"
	"github.com/do-now/function-karpenter/internal/versions"
)

// Pinned returns in (a function input as JSON decodes it) with the
// platform's pins added where it sets none: every known version allowed, the
// newest the default, the newest known AMI release the pin, and no startup
// taint. in is changed
// in place and returned; nil gives an input of the pins alone.
func Pinned(in map[string]any) map[string]any {
	if in == nil {
		in = map[string]any{}
	}
	v, _ := in["versions"].(map[string]any)
	if v == nil {
		v = map[string]any{}
		in["versions"] = v
	}
	known := versions.Known()
	if _, ok := v["allowed"]; !ok {
		allowed := make([]any, len(known))
		for i, k := range known {
			allowed[i] = k
		}
		v["allowed"] = allowed
	}
	if _, ok := v["default"]; !ok {
		v["default"] = known[len(known)-1]
	}
	n, _ := in["nodes"].(map[string]any)
	if n == nil {
		n = map[string]any{}
		in["nodes"] = n
	}
	if _, ok := n["defaultAmiAlias"]; !ok {
		n["defaultAmiAlias"] = NewestAMI()
	}
	if _, ok := n["startupTaints"]; !ok {
		n["startupTaints"] = []any{}
	}
	return in
}

// NewestAMI is the alias of the newest release internal/ami knows.
func NewestAMI() string {
	return ami.Prefix + ami.Releases[len(ami.Releases)-1].Name
}
