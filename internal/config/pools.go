package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/do-now/function-karpenter/apis/v1alpha1"
	"github.com/do-now/function-karpenter/internal/ami"
)

// Limits of pools that set none, each cut to the platform's ceiling.
var (
	DefaultPrivateLimits = v1alpha1.PoolLimits{CPU: "100", Memory: "400Gi"}
	DefaultPublicLimits  = v1alpha1.PoolLimits{CPU: "32", Memory: "128Gi"}
)

// AMI aliases.
const (
	// LatestAMIAlias floats; refused unless the platform allows it.
	LatestAMIAlias = ami.Latest
)

var (
	capacityTypes = []string{"spot", "on-demand", Reserved}
	architectures = []string{"arm64", "amd64"}
	category      = regexp.MustCompile(`^[a-z]{1,8}$`)
	amiAlias      = regexp.MustCompile(`^al2023@(v[0-9]{8}|latest)$`)
	duration      = regexp.MustCompile(`^([0-9]+(s|m|h))+$`)
)

// PublicEnabled tells whether the claim has a public pool.
func (c *Config) PublicEnabled() bool {
	return c.Spec.Pools.Public.Enabled == nil || *c.Spec.Pools.Public.Enabled
}

func defaultPools(c *Config) {
	defaultPool(&c.Spec.Pools.Private, DefaultPrivateLimits, c)
	defaultPool(&c.Spec.Pools.Public.Pool, DefaultPublicLimits, c)
}

// defaultPool fills what the tenant left unset from the platform's policy.
// Only absent lists take defaults: an explicitly empty list is an error.
func defaultPool(p *v1alpha1.Pool, limits v1alpha1.PoolLimits, c *Config) {
	allowed := c.Pools.Allowed
	if p.CapacityTypes == nil {
		p.CapacityTypes = typed[v1alpha1.CapacityType](allowed.CapacityTypes)
	}
	if p.Architectures == nil {
		p.Architectures = typed[v1alpha1.Architecture](allowed.Architectures)
	}
	if p.InstanceCategories == nil {
		p.InstanceCategories = slices.Clone(allowed.InstanceCategories)
	}
	if p.Zones == nil && len(allowed.Zones) > 0 {
		p.Zones = slices.Clone(allowed.Zones)
	}
	if p.MinGeneration == nil {
		g := *c.Pools.MinGeneration
		p.MinGeneration = &g
	}
	if p.Limits == nil {
		l := v1alpha1.PoolLimits{
			CPU:    atMost(limits.CPU, c.Pools.MaxLimits.CPU),
			Memory: atMost(limits.Memory, c.Pools.MaxLimits.Memory),
		}
		p.Limits = &l
	}
	if p.ConsolidateAfter == "" {
		p.ConsolidateAfter = c.Pools.Defaults.ConsolidateAfter
	}
	if p.AMIAlias == "" {
		p.AMIAlias = c.DefaultAMIAlias()
	}
}

// atMost returns the lesser of two quantities, as written.
func atMost(v, ceiling string) string {
	q, err1 := resource.ParseQuantity(v)
	c, err2 := resource.ParseQuantity(ceiling)
	if err1 == nil && err2 == nil && q.Cmp(c) > 0 {
		return ceiling
	}
	return v
}

func typed[T ~string](items []string) []T {
	out := make([]T, len(items))
	for i, v := range items {
		out[i] = T(v)
	}
	return out
}

func untyped[T ~string](items []T) []string {
	out := make([]string, len(items))
	for i, v := range items {
		out[i] = string(v)
	}
	return out
}

func validatePools(c *Config) field.ErrorList {
	p := field.NewPath("spec", "pools")
	errs := validatePool(p.Child("private"), c.Spec.Pools.Private, c)
	pools := []v1alpha1.Pool{c.Spec.Pools.Private}
	if c.PublicEnabled() {
		errs = append(errs, validatePool(p.Child("public"), c.Spec.Pools.Public.Pool, c)...)
		if *c.Input.Nodes.PublicSecurityGroupSuffix == "" {
			errs = append(errs, field.Required(field.NewPath("input", "nodes", "publicSecurityGroupSuffix"),
				"the platform has no public security group, so spec.pools.public.enabled must be false"))
		}
		pools = append(pools, c.Spec.Pools.Public.Pool)
	}
	if len(errs) == 0 {
		errs = append(errs, validateClusterLimits(p, pools, c)...)
	}
	return errs
}

// validateClusterLimits checks that the enabled pools' limits together stay
// within the platform's ceiling for the cluster: the limits are each pool's
// own (Karpenter's NodePool spec.limits), so the cluster's is their sum.
func validateClusterLimits(p *field.Path, pools []v1alpha1.Pool, c *Config) field.ErrorList {
	var errs field.ErrorList
	for _, r := range []struct {
		name    string
		limit   func(v1alpha1.Pool) string
		ceiling string
	}{
		{"cpu", func(p v1alpha1.Pool) string { return p.Limits.CPU }, c.Pools.MaxClusterLimits.CPU},
		{"memory", func(p v1alpha1.Pool) string { return p.Limits.Memory }, c.Pools.MaxClusterLimits.Memory},
	} {
		var sum resource.Quantity
		var terms []string
		for _, pool := range pools {
			// Each limit was validated as a quantity by validatePool.
			q := resource.MustParse(r.limit(pool))
			sum.Add(q)
			terms = append(terms, r.limit(pool))
		}
		if ceiling := resource.MustParse(r.ceiling); sum.Cmp(ceiling) > 0 {
			errs = append(errs, field.Invalid(p, fmt.Sprintf("%s %s", r.name, sum.String()),
				fmt.Sprintf("the pools' %s limits add up to %s (%s), above the platform's ceiling %s for cluster %q (pools.maxClusterLimits.%s)",
					r.name, sum.String(), strings.Join(terms, " + "), r.ceiling, c.Spec.Cluster.Name, r.name)))
		}
	}
	return errs
}

// validatePool checks a defaulted pool against the platform's policy for
// the claimed cluster; every error names the bound it breaks.
func validatePool(p *field.Path, pool v1alpha1.Pool, c *Config) field.ErrorList {
	var errs field.ErrorList
	bounds := c.Pools
	cluster := c.Spec.Cluster.Name
	errs = append(errs, validateSubset(p.Child("capacityTypes"), untyped(pool.CapacityTypes), capacityTypes, bounds.Allowed.CapacityTypes, func(ip *field.Path, v string) *field.Error {
		if v == Reserved && len(bounds.CapacityReservationSelectorTerms) == 0 {
			return notAllowed(ip, v, fmt.Sprintf("the platform offers no capacity reservations for cluster %q", cluster))
		}
		return nil
	})...)
	errs = append(errs, validateSubset(p.Child("architectures"), untyped(pool.Architectures), architectures, bounds.Allowed.Architectures, nil)...)
	errs = append(errs, validateSubset(p.Child("instanceCategories"), pool.InstanceCategories, nil, bounds.Allowed.InstanceCategories, func(ip *field.Path, v string) *field.Error {
		if !category.MatchString(v) {
			return field.Invalid(ip, v, "must be an instance category such as c, m or r")
		}
		return nil
	})...)
	if pool.Zones != nil {
		if len(bounds.Allowed.Zones) > 0 {
			errs = append(errs, validateSubset(p.Child("zones"), pool.Zones, nil, bounds.Allowed.Zones, nil)...)
		} else {
			errs = append(errs, validateSet(p.Child("zones"), pool.Zones, func(i int, v string) *field.Error {
				// No region: the cluster is not declared, and the
				// claim is refused for it.
				if r := c.Spec.Cluster.Region; r != "" && !zoneOf(v, r) {
					return field.Invalid(p.Child("zones").Index(i), v, fmt.Sprintf("is not a zone of the cluster's region %s", c.Spec.Cluster.Region))
				}
				return nil
			})...)
		}
	}
	if g := *pool.MinGeneration; g < 1 || g > 20 {
		errs = append(errs, field.Invalid(p.Child("minGeneration"), g, "must be between 1 and 20"))
	} else if g < *bounds.MinGeneration {
		errs = append(errs, field.Invalid(p.Child("minGeneration"), g, fmt.Sprintf("is below the platform's minimum generation %d for cluster %q", *bounds.MinGeneration, cluster)))
	}
	errs = append(errs, validateLimit(p.Child("limits", "cpu"), pool.Limits.CPU, MaxPoolCPU, bounds.MaxLimits.CPU, cluster)...)
	errs = append(errs, validateLimit(p.Child("limits", "memory"), pool.Limits.Memory, MaxPoolMemory, bounds.MaxLimits.Memory, cluster)...)
	if d, ok := parseDuration(pool.ConsolidateAfter); !ok {
		errs = append(errs, field.Invalid(p.Child("consolidateAfter"), pool.ConsolidateAfter, "must be a positive duration such as 15m or 1h30m"))
	} else if minimum, _ := parseDuration(bounds.MinConsolidateAfter); d < minimum {
		errs = append(errs, field.Invalid(p.Child("consolidateAfter"), pool.ConsolidateAfter,
			fmt.Sprintf("is below the platform's minimum %s for cluster %q: a new node waits for its CNI before it takes pods", bounds.MinConsolidateAfter, cluster)))
	}
	platform := c.Input.Nodes
	switch {
	case pool.AMIAlias == c.DefaultAMIAlias():
		// The platform's own pin, validated as input.
	case !amiAlias.MatchString(pool.AMIAlias):
		errs = append(errs, field.Invalid(p.Child("amiAlias"), pool.AMIAlias, "must be an AL2023 alias pinned as al2023@vYYYYMMDD"))
	case pool.AMIAlias == LatestAMIAlias && !platform.AllowLatestAMI:
		errs = append(errs, field.Forbidden(p.Child("amiAlias"), "al2023@latest floats to new AMIs without review; pin al2023@vYYYYMMDD (the platform has not allowed latest)"))
	default:
		if err := ami.Check(pool.AMIAlias, "", nil); err != nil {
			errs = append(errs, field.Invalid(p.Child("amiAlias"), pool.AMIAlias, err.Error()))
		} else if minimum := c.MinAMIAlias(); ami.Older(pool.AMIAlias, minimum) {
			// Refused, so nothing is updated and nothing is dropped: the
			// nodes run on until the tenant moves the pin, which this says.
			errs = append(errs, field.Invalid(p.Child("amiAlias"), pool.AMIAlias, fmt.Sprintf(
				"is older than the platform's minimum %s for cluster %q: pin %s or later, or remove the pin to run the platform's %s",
				minimum, cluster, minimum, c.DefaultAMIAlias())))
		}
	}
	return errs
}

// validateSubset checks a tenant's set: not empty, no duplicates, each item
// known (when known is given) and allowed by the platform. check may refuse
// an item for a reason of its own first.
func validateSubset(p *field.Path, items, known, allowed []string, check func(*field.Path, string) *field.Error) field.ErrorList {
	return validateSet(p, items, func(i int, v string) *field.Error {
		ip := p.Index(i)
		if known != nil && !slices.Contains(known, v) {
			return field.NotSupported(ip, v, known)
		}
		if check != nil {
			if err := check(ip, v); err != nil {
				return err
			}
		}
		if !slices.Contains(allowed, v) {
			return notAllowed(ip, v, "the platform allows "+strings.Join(allowed, ", "))
		}
		return nil
	})
}

// notAllowed is an Unsupported value with the platform's reason, rather
// than the list of every value the API knows.
func notAllowed(p *field.Path, v, detail string) *field.Error {
	return &field.Error{Type: field.ErrorTypeNotSupported, Field: p.String(), BadValue: v, Detail: detail}
}

// validateSet refuses an empty list and duplicates, and checks each item.
func validateSet(p *field.Path, items []string, check func(int, string) *field.Error) field.ErrorList {
	if len(items) == 0 {
		return field.ErrorList{field.Required(p, "must not be empty")}
	}
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, v := range items {
		if seen[v] {
			errs = append(errs, field.Duplicate(p.Index(i), v))
		}
		seen[v] = true
		if err := check(i, v); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// validateLimit checks a pool limit against the absolute bound and the
// platform's ceiling for the cluster.
func validateLimit(p *field.Path, v string, max resource.Quantity, ceiling, cluster string) field.ErrorList {
	if errs := validateQuantity(p, v, max); len(errs) > 0 {
		return errs
	}
	q, c := resource.MustParse(v), resource.MustParse(ceiling)
	if q.Cmp(c) > 0 {
		return field.ErrorList{field.Invalid(p, v, fmt.Sprintf("exceeds the platform's ceiling %s for cluster %q", ceiling, cluster))}
	}
	return nil
}

func validateQuantity(p *field.Path, v string, max resource.Quantity) field.ErrorList {
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return field.ErrorList{field.Invalid(p, v, "must be a Kubernetes quantity such as 100 or 400Gi")}
	}
	if q.Sign() <= 0 || q.Cmp(max) > 0 {
		return field.ErrorList{field.Invalid(p, v, fmt.Sprintf("must be above 0 and at most %s", max.String()))}
	}
	return nil
}
