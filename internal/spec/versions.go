package spec

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/do-now/function-karpenter/apis/input/v1beta1"
	"github.com/do-now/function-karpenter/apis/v1alpha1"
	"github.com/do-now/function-karpenter/internal/versions"
)

// validateVersionsInput checks the platform's choice of versions and
// gates against what internal/versions knows.
func validateVersionsInput(in *v1beta1.Versions) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("input", "versions")
	for i, v := range in.Allowed {
		if _, err := versions.Get(v); err != nil {
			errs = append(errs, field.NotSupported(p.Child("allowed").Index(i), v, versions.Known()))
		}
	}
	if d := in.Default; d != "" {
		switch _, err := versions.Get(d); {
		case err != nil:
			errs = append(errs, field.NotSupported(p.Child("default"), d, versions.Known()))
		case len(in.Allowed) > 0 && !slices.Contains(in.Allowed, d):
			errs = append(errs, field.Invalid(p.Child("default"), d, fmt.Sprintf("is not among the allowed versions %s", strings.Join(in.Allowed, ", "))))
		}
	}
	return errs
}

// validateGates checks the feature gates the platform enables.
func validateGates(gates []string) field.ErrorList {
	var errs field.ErrorList
	known := make([]string, len(versions.Gates))
	for i, g := range versions.Gates {
		known[i] = string(g)
	}
	for i, g := range gates {
		if !slices.Contains(known, g) {
			errs = append(errs, field.NotSupported(field.NewPath("input", "controller", "awsFeatureGates").Index(i), g, known))
		}
	}
	return errs
}

// defaultVersions completes the platform's choice: every known version
// allowed, the newest allowed the default; and a claim that names no
// version gets the default.
func defaultVersions(c *Config) {
	v := &c.Input.Versions
	if len(v.Allowed) == 0 {
		v.Allowed = versions.Known()
	}
	if v.Default == "" {
		v.Default = slices.MaxFunc(v.Allowed, versions.Compare)
	}
	if c.Spec.Version == "" {
		c.Spec.Version = v1alpha1.KarpenterVersion(v.Default)
		c.VersionDefaulted = true
	}
}

// validateVersion checks the claim's version: known, and allowed by the
// platform.
func validateVersion(c *Config) field.ErrorList {
	p := field.NewPath("spec", "version")
	v := string(c.Spec.Version)
	if _, err := versions.Get(v); err != nil {
		return field.ErrorList{field.NotSupported(p, v, versions.Known())}
	}
	if !slices.Contains(c.Input.Versions.Allowed, v) {
		return field.ErrorList{field.NotSupported(p, v, c.Input.Versions.Allowed)}
	}
	return nil
}

// Gates are the feature gates the platform enables.
func (c *Config) Gates() []versions.Gate {
	out := make([]versions.Gate, len(c.Input.Controller.AWSFeatureGates))
	for i, g := range c.Input.Controller.AWSFeatureGates {
		out[i] = versions.Gate(g)
	}
	return out
}
