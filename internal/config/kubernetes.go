package config

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/do-now/function-karpenter/apis/v1alpha1"
	"github.com/do-now/function-karpenter/internal/ami"
	"github.com/do-now/function-karpenter/internal/versions"
)

// What the claimed cluster's Kubernetes version (as AWS reports it, on the
// observe-only eks-cluster) asks of the claim's Karpenter version and AMI
// pins, now and at the next minor.

// clusterMinor is the claimed cluster's Kubernetes minor (1.N); false until
// AWS has reported it.
func (c *Config) clusterMinor() (string, bool) {
	parts := strings.SplitN(c.ClusterVersion, ".", 3)
	if len(parts) < 2 {
		return "", false
	}
	return parts[0] + "." + parts[1], true
}

// nextMinor is the minor after minor (1.N+1).
func nextMinor(minor string) (string, bool) {
	major, m, ok := strings.Cut(minor, ".")
	n, err := strconv.Atoi(m)
	if !ok || err != nil {
		return "", false
	}
	return fmt.Sprintf("%s.%d", major, n+1), true
}

// enabledPools are the claim's pools, by name, in order.
func (c *Config) enabledPools() ([]string, map[string]v1alpha1.Pool) {
	if c.PublicEnabled() {
		return []string{"private", "public"}, map[string]v1alpha1.Pool{"private": c.Spec.Pools.Private, "public": c.Spec.Pools.Public.Pool}
	}
	return []string{"private"}, map[string]v1alpha1.Pool{"private": c.Spec.Pools.Private}
}

// CheckAMIsServe refuses a pool pinned to an AMI release the function
// knows serves no AMI for the cluster's Kubernetes version (once observed):
// Karpenter would resolve no image, and no node would launch. A release
// newer than the function knows is left to the preflight.
func (c *Config) CheckAMIsServe() field.ErrorList {
	minor, ok := c.clusterMinor()
	if !ok {
		return nil
	}
	var errs field.ErrorList
	names, pools := c.enabledPools()
	for _, name := range names {
		pool := pools[name]
		if err := ami.Check(pool.AMIAlias, minor, untyped(pool.Architectures)); err != nil {
			why := err.Error()
			if pool.AMIAlias == c.DefaultAMIAlias() {
				why += " (the platform's pin for the cluster: tenancy.clusters[].amiAlias or input.nodes.defaultAmiAlias)"
			}
			errs = append(errs, field.Invalid(field.NewPath("spec", "pools", name, "amiAlias"), pool.AMIAlias, fmt.Sprintf("cluster %q runs Kubernetes %s: %s", c.Spec.Cluster.Name, c.ClusterVersion, why)))
		}
	}
	return errs
}

// CheckVersionServes refuses Karpenter version v on a cluster whose
// Kubernetes minor (once observed) v does not run on: its version
// controller would refuse the cluster (internal/versions, Kubernetes).
func (c *Config) CheckVersionServes(v string) field.ErrorList {
	minor, ok := c.clusterMinor()
	if !ok {
		return nil
	}
	info, err := versions.Get(v)
	if err != nil || info.Serves(minor) {
		return nil
	}
	why := fmt.Sprintf("Karpenter %s runs on Kubernetes %s to %s, and cluster %q runs %s", v, info.Kubernetes[0], info.Kubernetes[1], c.Spec.Cluster.Name, c.ClusterVersion)
	if c.VersionDefaulted {
		why += " (the platform's pin for the cluster: tenancy.clusters[].defaultVersion or input.versions.default)"
	}
	return field.ErrorList{field.Invalid(field.NewPath("spec", "version"), v, why)}
}

// NextMinor is whether the claim is ready for its cluster's next
// Kubernetes minor: its Karpenter version runs on it and every pool's AMI
// pin serves it. Known is false until AWS reports the cluster's version.
type NextMinor struct {
	Known    bool
	Minor    string
	Blockers []string
}

// NextMinor reads, for Karpenter version v (the one composed), what stands
// between the claim and the cluster's next minor.
func (c *Config) NextMinor(v string) NextMinor {
	minor, ok := c.clusterMinor()
	if !ok {
		return NextMinor{}
	}
	next, ok := nextMinor(minor)
	if !ok {
		return NextMinor{}
	}
	out := NextMinor{Known: true, Minor: next}
	if info, err := versions.Get(v); err == nil && !info.Serves(next) {
		out.Blockers = append(out.Blockers, fmt.Sprintf("Karpenter %s runs on Kubernetes up to %s: move spec.version (or the platform's pin) to a version that runs on %s", v, info.Kubernetes[1], next))
	}
	names, pools := c.enabledPools()
	for _, name := range names {
		pool := pools[name]
		if err := ami.Check(pool.AMIAlias, next, untyped(pool.Architectures)); err != nil {
			out.Blockers = append(out.Blockers, fmt.Sprintf("the %s pool's AMI %s %s", name, pool.AMIAlias, err.Error()))
		}
	}
	return out
}
