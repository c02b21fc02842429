package spec

import (
	"fmt"
	"regexp"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/do-now/function-karpenter/apis/input/v1beta1"
	"github.com/do-now/function-karpenter/apis/v1alpha1"
)

// Pool defaults: Spot and Graviton first, families c/m/r of generation 6+.
var (
	DefaultCapacityTypes      = []v1alpha1.CapacityType{"spot", "on-demand"}
	DefaultArchitectures      = []v1alpha1.Architecture{"arm64", "amd64"}
	DefaultInstanceCategories = []string{"c", "m", "r"}
	DefaultPrivateLimits      = v1alpha1.PoolLimits{CPU: "100", Memory: "400Gi"}
	DefaultPublicLimits       = v1alpha1.PoolLimits{CPU: "32", Memory: "128Gi"}
)

// More pool defaults.
const (
	DefaultMinGeneration    int32 = 6
	DefaultConsolidateAfter       = "1m"
	// DefaultAMIAlias is the pinned AL2023 release pools use unless the
	// platform or the tenant pins another.
	DefaultAMIAlias = "al2023@v20251117"
	// LatestAMIAlias floats; refused unless the platform allows it.
	LatestAMIAlias = "al2023@latest"
)

// Bounds of the pool limits.
var (
	MaxPoolCPU    = resource.MustParse("10000")
	MaxPoolMemory = resource.MustParse("40Ti")
)

var (
	capacityTypes = []string{"spot", "on-demand", "reserved"}
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
	defaultPool(&c.Spec.Pools.Private, DefaultPrivateLimits, c.Input.Nodes.DefaultAMIAlias)
	defaultPool(&c.Spec.Pools.Public.Pool, DefaultPublicLimits, c.Input.Nodes.DefaultAMIAlias)
}

func defaultPool(p *v1alpha1.Pool, limits v1alpha1.PoolLimits, ami string) {
	// Only absent lists take defaults: an explicitly empty list is an error.
	if p.CapacityTypes == nil {
		p.CapacityTypes = append([]v1alpha1.CapacityType(nil), DefaultCapacityTypes...)
	}
	if p.Architectures == nil {
		p.Architectures = append([]v1alpha1.Architecture(nil), DefaultArchitectures...)
	}
	if p.InstanceCategories == nil {
		p.InstanceCategories = append([]string(nil), DefaultInstanceCategories...)
	}
	if p.MinGeneration == nil {
		g := DefaultMinGeneration
		p.MinGeneration = &g
	}
	if p.Limits == nil {
		l := limits
		p.Limits = &l
	}
	if p.ConsolidateAfter == "" {
		p.ConsolidateAfter = DefaultConsolidateAfter
	}
	if p.AMIAlias == "" {
		p.AMIAlias = ami
	}
}

func validatePools(c *Config) field.ErrorList {
	p := field.NewPath("spec", "pools")
	errs := validatePool(p.Child("private"), c.Spec.Pools.Private, c.Input.Nodes)
	if c.PublicEnabled() {
		errs = append(errs, validatePool(p.Child("public"), c.Spec.Pools.Public.Pool, c.Input.Nodes)...)
		if *c.Input.Nodes.PublicSecurityGroupSuffix == "" {
			errs = append(errs, field.Required(field.NewPath("input", "nodes", "publicSecurityGroupSuffix"),
				"the platform has no public security group, so spec.pools.public.enabled must be false"))
		}
	}
	return errs
}

func validatePool(p *field.Path, pool v1alpha1.Pool, platform v1beta1.Nodes) field.ErrorList {
	var errs field.ErrorList
	ct := make([]string, len(pool.CapacityTypes))
	for i, v := range pool.CapacityTypes {
		ct[i] = string(v)
	}
	errs = append(errs, validateSet(p.Child("capacityTypes"), ct, func(i int, v string) *field.Error {
		if !slices.Contains(capacityTypes, v) {
			return field.NotSupported(p.Child("capacityTypes").Index(i), v, capacityTypes)
		}
		return nil
	})...)
	arch := make([]string, len(pool.Architectures))
	for i, v := range pool.Architectures {
		arch[i] = string(v)
	}
	errs = append(errs, validateSet(p.Child("architectures"), arch, func(i int, v string) *field.Error {
		if !slices.Contains(architectures, v) {
			return field.NotSupported(p.Child("architectures").Index(i), v, architectures)
		}
		return nil
	})...)
	errs = append(errs, validateSet(p.Child("instanceCategories"), pool.InstanceCategories, func(i int, v string) *field.Error {
		if !category.MatchString(v) {
			return field.Invalid(p.Child("instanceCategories").Index(i), v, "must be an instance category such as c, m or r")
		}
		return nil
	})...)
	if g := *pool.MinGeneration; g < 1 || g > 20 {
		errs = append(errs, field.Invalid(p.Child("minGeneration"), g, "must be between 1 and 20"))
	}
	errs = append(errs, validateQuantity(p.Child("limits", "cpu"), pool.Limits.CPU, MaxPoolCPU)...)
	errs = append(errs, validateQuantity(p.Child("limits", "memory"), pool.Limits.Memory, MaxPoolMemory)...)
	if d, err := time.ParseDuration(pool.ConsolidateAfter); err != nil || !duration.MatchString(pool.ConsolidateAfter) || d <= 0 {
		errs = append(errs, field.Invalid(p.Child("consolidateAfter"), pool.ConsolidateAfter, "must be a positive duration such as 30s, 5m or 1h30m"))
	}
	switch {
	case pool.AMIAlias == platform.DefaultAMIAlias:
		// The platform's own default, validated as input.nodes.defaultAmiAlias.
	case !amiAlias.MatchString(pool.AMIAlias):
		errs = append(errs, field.Invalid(p.Child("amiAlias"), pool.AMIAlias, "must be an AL2023 alias pinned as al2023@vYYYYMMDD"))
	case pool.AMIAlias == LatestAMIAlias && !platform.AllowLatestAMI:
		errs = append(errs, field.Forbidden(p.Child("amiAlias"), "al2023@latest floats to new AMIs without review; pin al2023@vYYYYMMDD (the platform has not allowed latest)"))
	}
	return errs
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
