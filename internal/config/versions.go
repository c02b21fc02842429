package config

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

// validateGates checks the feature gates the platform enables, in
// featureGates and in its former name awsFeatureGates: each known, and
// each with the gate it requires.
func validateGates(in v1beta1.Controller) field.ErrorList {
	var errs field.ErrorList
	known := untyped(versions.AllGates())
	all := append(slices.Clone(in.FeatureGates), in.AWSFeatureGates...)
	p := field.NewPath("input", "controller")
	for _, list := range []struct {
		name  string
		gates []string
	}{{"featureGates", in.FeatureGates}, {"awsFeatureGates", in.AWSFeatureGates}} { // in order: the message is stable
		name := list.name
		for i, g := range list.gates {
			info, ok := versions.Info(versions.Gate(g))
			switch {
			case !ok:
				errs = append(errs, field.NotSupported(p.Child(name).Index(i), g, known))
			case info.Requires != "" && !slices.Contains(all, string(info.Requires)):
				errs = append(errs, field.Invalid(p.Child(name).Index(i), g, fmt.Sprintf("does nothing without %s (Karpenter's chart says so of the gate); enable both", info.Requires)))
			}
		}
	}
	return errs
}

// defaultVersions gives a claim that names no version the platform's pin:
// its cluster's own, else the platform-wide one (validatePins requires it).
func defaultVersions(c *Config) {
	v := &c.Input.Versions
	if c.Spec.Version == "" {
		c.Spec.Version = v1alpha1.KarpenterVersion(v.Default)
		if cl, _ := c.Tenant(); cl.DefaultVersion != "" {
			c.Spec.Version = v1alpha1.KarpenterVersion(cl.DefaultVersion)
		}
		c.VersionDefaulted = true
	}
}

// validateClusterVersions checks each cluster's default version: known,
// and allowed by the platform.
func validateClusterVersions(in v1beta1.Input) field.ErrorList {
	if in.Tenancy == nil {
		return nil
	}
	var errs field.ErrorList
	for i, cl := range in.Tenancy.Clusters {
		if d := cl.DefaultVersion; d != "" && !slices.Contains(in.Versions.Allowed, d) {
			errs = append(errs, field.NotSupported(field.NewPath("input", "tenancy", "clusters").Index(i).Child("defaultVersion"), d, in.Versions.Allowed))
		}
	}
	return errs
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
	var out []versions.Gate
	for _, g := range append(slices.Clone(c.Input.Controller.FeatureGates), c.Input.Controller.AWSFeatureGates...) {
		if !slices.Contains(out, versions.Gate(g)) {
			out = append(out, versions.Gate(g))
		}
	}
	return out
}
