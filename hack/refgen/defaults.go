package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/do-now/function-karpenter/internal/cluster"
	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/config/configtest"
)

// pins are the input fields the platform must set (config.Load refuses an
// input without them): they have no default, whatever a loaded input holds.
var pins = []string{"versions", "nodes.defaultAmiAlias", "nodes.startupTaints"}

// defaulted is what the function makes of an input that sets only the
// pins and of a claim that names only its cluster: config.Load's own
// defaulting, the code's values rather than a copy of them.
func defaulted() *config.Config {
	in, err := structpb.NewStruct(configtest.Pinned(nil))
	if err != nil {
		fail(err)
	}
	c, errs := config.Load(config.Owner{Name: "platform"}, map[string]any{"cluster": map[string]any{"name": "example"}}, in)
	if len(errs) > 0 {
		fail(fmt.Errorf("an input of the pins alone does not load: %v", errs.ToAggregate()))
	}
	return c
}

// defaults writes the defaults of every field of the function's input
// (input is its schema), of a claim's pools (claim is the claim's schema)
// and the fixed sizes of the Pods step three composes.
func defaults(b *bytes.Buffer, input, claim map[string]any) {
	c := defaulted()
	b.WriteString("## The platform's defaults\n\n")
	b.WriteString("What the function gives each field the platform leaves unset in its input, and a claim in its\n")
	b.WriteString("pools: written from the function's own defaulting (`internal/config` `Load` of an input that\n")
	b.WriteString("sets only the fields it requires) and from the manifests it composes, not copied from them.\n")
	b.WriteString("A field of `tenancy.clusters[]` that overrides a platform-wide one defaults to it, field by field.\n\n")

	b.WriteString("### The function's input\n\n")
	doc := asMap(c.Input)
	// The pool policy is resolved per cluster (input.pools, then the
	// cluster's override, then the function's own defaults): c.Pools.
	doc["pools"] = asMap(c.Pools)
	// The monitoring objects' namespace is decided where it is used.
	doc["monitoring"].(map[string]any)["namespace"] = c.MonitoringNamespace()
	b.WriteString("| field | default |\n|---|---|\n")
	for _, f := range sortedKeys(props(input)) {
		if f != "apiVersion" && f != "kind" && f != "metadata" && f != "tenancy" {
			defaultRows(b, f, props(input)[f].(map[string]any), doc[f], false)
		}
	}
	b.WriteString("\n")

	b.WriteString("### A claim's pools\n\n")
	spec, _ := props(claim)["spec"].(map[string]any)
	pools, ok := props(spec)["pools"].(map[string]any)
	if !ok {
		fail(fmt.Errorf("the claim's schema has no spec.pools"))
	}
	b.WriteString("| field | default |\n|---|---|\n")
	defaultRows(b, "spec.pools", pools, asMap(c.Spec.Pools), true)
	b.WriteString("\nThe limits are each cut to `pools.maxLimits`; `amiAlias` is the cluster's pin\n")
	b.WriteString("(`tenancy.clusters[].amiAlias`, else `nodes.defaultAmiAlias`).\n\n")

	b.WriteString("### The checks' Pods\n\n")
	b.WriteString("Fixed, whatever the input: the access check's Pod and the final check's Deployment, which runs\n")
	b.WriteString("in the access check's Pod spec, on the nodes the controller runs on (step three's manifests).\n\n")
	pods(b, c)
}

// defaultRows writes the row of each leaf field at or below path: the value
// the function gives it (v, from the defaulted document), or why it has
// none. Maps, lists and fields without properties are leaves. In a claim's
// pools, amiAlias is the platform's pin, not a default.
func defaultRows(b *bytes.Buffer, path string, s map[string]any, v any, claim bool) {
	if slices.Contains(pins, path) {
		fmt.Fprintf(b, "| `%s` | required |\n", path)
		return
	}
	if claim && strings.HasSuffix(path, ".amiAlias") {
		fmt.Fprintf(b, "| `%s` | the cluster's pin |\n", path)
		return
	}
	if p := props(s); p != nil && s["type"] == "object" {
		m, _ := v.(map[string]any)
		for _, n := range sortedKeys(p) {
			child := p[n].(map[string]any)
			if slices.Contains(requiredOf(s), n) && m[n] == nil {
				fmt.Fprintf(b, "| `%s.%s` | required when `%s` is set |\n", path, n, path)
				continue
			}
			defaultRows(b, path+"."+n, child, m[n], claim)
		}
		return
	}
	fmt.Fprintf(b, "| `%s` | %s |\n", path, defaultValue(s, v))
}

func requiredOf(s map[string]any) []string {
	var out []string
	r, _ := s["required"].([]any)
	for _, n := range r {
		out = append(out, fmt.Sprint(n))
	}
	return out
}

// defaultValue is a leaf's value as the function sets it; unset, the
// schema's own default, false for a boolean, else none.
func defaultValue(s map[string]any, v any) string {
	switch {
	case v != nil:
		return format(v)
	case s["default"] != nil:
		return format(s["default"])
	case s["type"] == "boolean":
		return "`false`"
	}
	return "none"
}

// format writes a value for a table cell: a scalar as code, a list as its
// items, a map as its key: value pairs.
func format(v any) string {
	switch x := v.(type) {
	case []any:
		if len(x) == 0 {
			return "`[]`"
		}
		var out []string
		for _, i := range x {
			out = append(out, format(i))
		}
		return strings.Join(out, ", ")
	case map[string]any:
		if len(x) == 0 {
			return "`{}`"
		}
		var out []string
		for _, k := range sortedKeys(x) {
			out = append(out, "`"+k+": "+scalar(x[k])+"`")
		}
		return strings.Join(out, ", ")
	}
	return "`" + scalar(v) + "`"
}

func scalar(v any) string {
	if _, ok := v.(map[string]any); ok {
		b, _ := json.Marshal(v)
		return string(b)
	}
	if _, ok := v.([]any); ok {
		b, _ := json.Marshal(v)
		return string(b)
	}
	return strings.ReplaceAll(fmt.Sprint(v), "|", `\|`)
}

// asMap is v as JSON decodes it.
func asMap(v any) map[string]any {
	raw, err := json.Marshal(v)
	if err != nil {
		fail(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		fail(err)
	}
	return m
}

// pods writes the size of each Pod step three composes, by composed
// resource name.
func pods(b *bytes.Buffer, c *config.Config) {
	b.WriteString("| composed resource | kind | replicas | requests | limits |\n|---|---|---|---|---|\n")
	m := cluster.Manifests(c)
	for _, n := range slices.Sorted(maps.Keys(m)) {
		var kind string
		var replicas int32 = 1
		var spec corev1.PodSpec
		switch o := m[n].(type) {
		case *corev1.Pod:
			kind, spec = "Pod", o.Spec
		case *appsv1.Deployment:
			kind, spec = "Deployment", o.Spec.Template.Spec
			if o.Spec.Replicas != nil {
				replicas = *o.Spec.Replicas
			}
		default:
			continue
		}
		for _, ctr := range spec.Containers {
			fmt.Fprintf(b, "| `%s` | %s | %d | %s | %s |\n", n, kind, replicas,
				format(asMap(ctr.Resources.Requests)), format(asMap(ctr.Resources.Limits)))
		}
	}
	b.WriteString("\n")
}
