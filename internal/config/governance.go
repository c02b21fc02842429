package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/do-now/function-karpenter/apis/input/v1beta1"
)

// The function's own bounds and defaults of every pool, used where neither
// input.pools nor the cluster's override sets a field. They follow what
// operating Karpenter on EKS taught (PRODUCT.md §5).
const (
	// DefaultMinGeneration: families c/m/r of generation 6 or later.
	DefaultMinGeneration int32 = 6
	// DefaultMinMemory: the DaemonSets on every node take ~3.2GiB; 4GiB
	// instances flapped NotReady.
	DefaultMinMemory = "8Gi"
	// DefaultMinConsolidateAfter and DefaultConsolidateAfter: 1m raced
	// Cilium's startup taint, a fresh node was judged empty and deleted.
	DefaultMinConsolidateAfter = "15m"
	DefaultConsolidateAfter    = "15m"
	DefaultExpireAfter         = "720h"
	DefaultDisruptionBudget    = "20%"
	DefaultMaxCPU              = "200"
	DefaultMaxMemory           = "800Gi"
)

// Capacity types, architectures and categories pools choose from by default.
var (
	DefaultCapacityTypes      = []string{"spot", "on-demand"}
	DefaultArchitectures      = []string{"arm64", "amd64"}
	DefaultInstanceCategories = []string{"c", "m", "r"}
)

// Reserved is the capacity type of capacity reservations: offered only when
// the platform selects reservations.
const Reserved = "reserved"

// Absolute bounds of what the platform may set.
var (
	// MaxPoolCPU and MaxPoolMemory bound any pool's limits, and the
	// platform's ceilings.
	MaxPoolCPU    = resource.MustParse("10000")
	MaxPoolMemory = resource.MustParse("40Ti")
	// MaxTerminationGrace bounds the grace period a platform may set.
	MaxTerminationGrace = 24 * time.Hour
	maxMinMemory        = resource.MustParse("1Ti")
)

const (
	maxKubeletMaxPods = 1000
	mebibyte          = 1 << 20
)

var (
	zoneName      = regexp.MustCompile(`^[a-z]{2}(-[a-z0-9]+)+[a-z]$`)
	budget        = regexp.MustCompile(`^((100|[0-9]{1,2})%|[0-9]+)$`)
	reservationID = regexp.MustCompile(`^cr-[0-9a-z]+$`)
)

// origins says, for the fields of a pool policy that can contradict each
// other across layers, which layer set the value in force: input.pools or a
// cluster's override. A field no layer sets is the function's default,
// which input.pools is where to change.
type origins map[string]*field.Path

func (o origins) of(f string) *field.Path {
	p, ok := o[f]
	if !ok {
		p = field.NewPath("input", "pools")
	}
	for _, name := range strings.Split(f, ".") {
		p = p.Child(name)
	}
	return p
}

// record notes the fields layer sets, at its path.
func (o origins) record(path *field.Path, layer v1beta1.Pools) {
	for f, set := range map[string]bool{
		"allowed.capacityTypes":            layer.Allowed.CapacityTypes != nil,
		"allowed.zones":                    layer.Allowed.Zones != nil,
		"capacityReservationSelectorTerms": layer.CapacityReservationSelectorTerms != nil,
		"minConsolidateAfter":              layer.MinConsolidateAfter != "",
		"defaults.consolidateAfter":        layer.Defaults.ConsolidateAfter != "",
	} {
		if set {
			o[f] = path
		}
	}
}

// resolvePools returns the platform's pool policy for a cluster: the
// function's defaults, overridden by input.pools, overridden field by field
// by the cluster's entry in the tenancy; and where its fields were set.
func resolvePools(in v1beta1.Input, cluster string) (v1beta1.Pools, origins) {
	min := DefaultMinGeneration
	eff := v1beta1.Pools{
		Allowed: v1beta1.AllowedPools{
			InstanceCategories: slices.Clone(DefaultInstanceCategories),
			Architectures:      slices.Clone(DefaultArchitectures),
			Zones:              []string{},
		},
		MinGeneration:       &min,
		MinMemory:           DefaultMinMemory,
		MaxLimits:           v1beta1.MaxLimits{CPU: DefaultMaxCPU, Memory: DefaultMaxMemory},
		MinConsolidateAfter: DefaultMinConsolidateAfter,
		Defaults: v1beta1.PoolDefaults{
			ConsolidateAfter: DefaultConsolidateAfter,
			ExpireAfter:      DefaultExpireAfter,
			DisruptionBudget: DefaultDisruptionBudget,
		},
	}
	from := origins{}
	overlayPools(&eff, in.Pools)
	from.record(field.NewPath("input", "pools"), in.Pools)
	if i := tenantIndex(in, cluster); i >= 0 && in.Tenancy.Clusters[i].Pools != nil {
		override := *in.Tenancy.Clusters[i].Pools
		overlayPools(&eff, override)
		from.record(field.NewPath("input", "tenancy", "clusters").Index(i).Child("pools"), override)
	}
	if eff.Allowed.CapacityTypes == nil {
		eff.Allowed.CapacityTypes = slices.Clone(DefaultCapacityTypes)
		if len(eff.CapacityReservationSelectorTerms) > 0 {
			eff.Allowed.CapacityTypes = append(eff.Allowed.CapacityTypes, Reserved)
		}
	}
	// Unset, the cluster's ceiling is a pool's: all pools together may
	// provision no more than one could.
	if eff.MaxClusterLimits.CPU == "" {
		eff.MaxClusterLimits.CPU = eff.MaxLimits.CPU
	}
	if eff.MaxClusterLimits.Memory == "" {
		eff.MaxClusterLimits.Memory = eff.MaxLimits.Memory
	}
	if eff.KubeletMaxPods == nil {
		zero := int32(0)
		eff.KubeletMaxPods = &zero
	}
	return eff, from
}

// MinMemoryMiB is the platform's memory floor in MiB, the unit Karpenter
// labels instances with.
func (c *Config) MinMemoryMiB() int64 {
	q := resource.MustParse(c.Pools.MinMemory) // validated by Load
	return q.Value() / mebibyte
}

// overlayPools sets on dst every field src sets.
func overlayPools(dst *v1beta1.Pools, src v1beta1.Pools) {
	overlayList(&dst.Allowed.InstanceCategories, src.Allowed.InstanceCategories)
	overlayList(&dst.Allowed.CapacityTypes, src.Allowed.CapacityTypes)
	overlayList(&dst.Allowed.Architectures, src.Allowed.Architectures)
	overlayList(&dst.Allowed.Zones, src.Allowed.Zones)
	if src.MinGeneration != nil {
		v := *src.MinGeneration
		dst.MinGeneration = &v
	}
	if src.KubeletMaxPods != nil {
		v := *src.KubeletMaxPods
		dst.KubeletMaxPods = &v
	}
	overlayStrings(map[*string]string{
		&dst.MinMemory:                       src.MinMemory,
		&dst.MaxLimits.CPU:                   src.MaxLimits.CPU,
		&dst.MaxLimits.Memory:                src.MaxLimits.Memory,
		&dst.MaxClusterLimits.CPU:            src.MaxClusterLimits.CPU,
		&dst.MaxClusterLimits.Memory:         src.MaxClusterLimits.Memory,
		&dst.MinConsolidateAfter:             src.MinConsolidateAfter,
		&dst.Defaults.ConsolidateAfter:       src.Defaults.ConsolidateAfter,
		&dst.Defaults.ExpireAfter:            src.Defaults.ExpireAfter,
		&dst.Defaults.TerminationGracePeriod: src.Defaults.TerminationGracePeriod,
		&dst.Defaults.DisruptionBudget:       src.Defaults.DisruptionBudget,
	})
	if src.CapacityReservationSelectorTerms != nil {
		dst.CapacityReservationSelectorTerms = slices.Clone(src.CapacityReservationSelectorTerms)
	}
}

// overlayList replaces dst with src when src is set, an empty list included.
func overlayList(dst *[]string, src []string) {
	if src != nil {
		*dst = slices.Clone(src)
	}
}

// validatePoolsInput checks one layer of pool policy, input.pools or a
// cluster's override, for form: each field it sets.
func validatePoolsInput(p *field.Path, in v1beta1.Pools) field.ErrorList {
	var errs field.ErrorList
	a := p.Child("allowed")
	errs = append(errs, validateAllowed(a.Child("instanceCategories"), in.Allowed.InstanceCategories, func(v string) string {
		if !category.MatchString(v) {
			return "must be an instance category such as c, m or r"
		}
		return ""
	})...)
	errs = append(errs, validateAllowed(a.Child("capacityTypes"), in.Allowed.CapacityTypes, oneOf(capacityTypes))...)
	errs = append(errs, validateAllowed(a.Child("architectures"), in.Allowed.Architectures, oneOf(architectures))...)
	errs = append(errs, validateAllowedZones(a.Child("zones"), in.Allowed.Zones)...)
	if g := in.MinGeneration; g != nil && (*g < 1 || *g > 20) {
		errs = append(errs, field.Invalid(p.Child("minGeneration"), *g, "must be between 1 and 20"))
	}
	if m := in.MinMemory; m != "" {
		q, err := resource.ParseQuantity(m)
		if err != nil || q.Sign() <= 0 || q.Value()%mebibyte != 0 || q.Cmp(maxMinMemory) > 0 {
			errs = append(errs, field.Invalid(p.Child("minMemory"), m, "must be a quantity in whole Mi, above 0 and at most 1Ti, such as 8Gi"))
		}
	}
	for _, ceiling := range []struct {
		name string
		m    v1beta1.MaxLimits
	}{{"maxLimits", in.MaxLimits}, {"maxClusterLimits", in.MaxClusterLimits}} {
		if v := ceiling.m.CPU; v != "" {
			errs = append(errs, validateQuantity(p.Child(ceiling.name, "cpu"), v, MaxPoolCPU)...)
		}
		if v := ceiling.m.Memory; v != "" {
			errs = append(errs, validateQuantity(p.Child(ceiling.name, "memory"), v, MaxPoolMemory)...)
		}
	}
	if v := in.MinConsolidateAfter; v != "" {
		if _, ok := parseDuration(v); !ok && v != "0s" {
			errs = append(errs, field.Invalid(p.Child("minConsolidateAfter"), v, "must be a duration such as 15m"))
		}
	}
	d := p.Child("defaults")
	if v := in.Defaults.ConsolidateAfter; v != "" {
		if _, ok := parseDuration(v); !ok {
			errs = append(errs, field.Invalid(d.Child("consolidateAfter"), v, "must be a positive duration such as 15m"))
		}
	}
	if v := in.Defaults.ExpireAfter; v != "" && v != "Never" {
		if _, ok := parseDuration(v); !ok {
			errs = append(errs, field.Invalid(d.Child("expireAfter"), v, "must be a positive duration such as 720h, or Never"))
		}
	}
	if v := in.Defaults.TerminationGracePeriod; v != "" {
		if g, ok := parseDuration(v); !ok || g > MaxTerminationGrace {
			errs = append(errs, field.Invalid(d.Child("terminationGracePeriod"), v,
				fmt.Sprintf("must be a positive duration of at most %s", MaxTerminationGrace)))
		}
	}
	if v := in.Defaults.DisruptionBudget; v != "" && !budget.MatchString(v) {
		errs = append(errs, field.Invalid(d.Child("disruptionBudget"), v, "must be a number of nodes or a percentage such as 20%"))
	}
	errs = append(errs, validateReservations(p.Child("capacityReservationSelectorTerms"), in.CapacityReservationSelectorTerms)...)
	if m := in.KubeletMaxPods; m != nil && (*m < 0 || *m > maxKubeletMaxPods) {
		errs = append(errs, field.Invalid(p.Child("kubeletMaxPods"), *m, fmt.Sprintf("must be between 0 (Karpenter's default) and %d", maxKubeletMaxPods)))
	}
	return errs
}

// validatePolicy checks what only the resolved policy of a cluster can
// show: settings of different layers that contradict each other.
// Each error names the field where the value in force was set, and the
// other side of the contradiction with its own path.
func validatePolicy(from origins, eff v1beta1.Pools, region string) field.ErrorList {
	var errs field.ErrorList
	reserved := slices.Contains(eff.Allowed.CapacityTypes, Reserved)
	terms := len(eff.CapacityReservationSelectorTerms) > 0
	switch {
	case reserved && !terms:
		errs = append(errs, field.Invalid(from.of("allowed.capacityTypes"), eff.Allowed.CapacityTypes,
			fmt.Sprintf("reserved needs capacity reservations, and %s selects none", from.of("capacityReservationSelectorTerms"))))
	case terms && !reserved:
		errs = append(errs, field.Invalid(from.of("capacityReservationSelectorTerms"), len(eff.CapacityReservationSelectorTerms),
			fmt.Sprintf("selects capacity reservations no pool may use: %s does not allow reserved", from.of("allowed.capacityTypes"))))
	}
	minimum, _ := parseDuration(eff.MinConsolidateAfter)
	if d, _ := parseDuration(eff.Defaults.ConsolidateAfter); d < minimum {
		errs = append(errs, field.Invalid(from.of("defaults.consolidateAfter"), eff.Defaults.ConsolidateAfter,
			fmt.Sprintf("is below %s %s", from.of("minConsolidateAfter"), eff.MinConsolidateAfter)))
	}
	for i, z := range eff.Allowed.Zones {
		if region != "" && !zoneOf(z, region) {
			errs = append(errs, field.Invalid(from.of("allowed.zones").Index(i), z, fmt.Sprintf("is not a zone of the cluster's region %s", region)))
		}
	}
	return errs
}

// zoneOf tells whether zone is an availability or local zone of region:
// eu-west-3a, us-west-2-lax-1a.
func zoneOf(zone, region string) bool {
	rest, ok := strings.CutPrefix(zone, region)
	return ok && zoneName.MatchString(zone) && (len(rest) == 1 || strings.HasPrefix(rest, "-"))
}

// validateAllowed checks an allowed set the platform sets: items valid, no
// duplicates. An empty list allows nothing, which is a mistake.
func validateAllowed(p *field.Path, items []string, check func(string) string) field.ErrorList {
	if items == nil {
		return nil
	}
	return validateSet(p, items, func(i int, v string) *field.Error {
		if msg := check(v); msg != "" {
			return field.Invalid(p.Index(i), v, msg)
		}
		return nil
	})
}

// validateAllowedZones checks the platform's zones; unlike the other sets,
// an empty list is meaningful: any zone.
func validateAllowedZones(p *field.Path, zones []string) field.ErrorList {
	if len(zones) == 0 {
		return nil
	}
	return validateAllowed(p, zones, func(v string) string {
		if len(v) > 64 || !zoneName.MatchString(v) {
			return "must be an availability zone name such as eu-west-3a"
		}
		return ""
	})
}

func oneOf(values []string) func(string) string {
	return func(v string) string {
		if !slices.Contains(values, v) {
			return "must be one of " + strings.Join(values, ", ")
		}
		return ""
	}
}

// validateReservations checks the terms as Karpenter's EC2NodeClass would:
// an id alone, or tags (with an owner, optionally).
func validateReservations(p *field.Path, terms []v1beta1.CapacityReservationSelectorTerm) field.ErrorList {
	var errs field.ErrorList
	if len(terms) > 30 {
		errs = append(errs, field.TooMany(p, len(terms), 30))
	}
	for i, t := range terms {
		tp := p.Index(i)
		switch {
		case t.ID == "" && len(t.Tags) == 0:
			errs = append(errs, field.Required(tp, "an id or tags"))
		case t.ID != "" && (len(t.Tags) > 0 || t.OwnerID != ""):
			errs = append(errs, field.Invalid(tp.Child("id"), t.ID, "an id selects one reservation: it takes neither tags nor ownerID"))
		case t.ID != "" && !reservationID.MatchString(t.ID):
			errs = append(errs, field.Invalid(tp.Child("id"), t.ID, "must be a capacity reservation id such as cr-0123456789abcdef0"))
		}
		if t.OwnerID != "" && !accountID.MatchString(t.OwnerID) {
			errs = append(errs, field.Invalid(tp.Child("ownerID"), t.OwnerID, "must be a 12-digit AWS account ID"))
		}
		for k, v := range t.Tags {
			if k == "" || v == "" {
				errs = append(errs, field.Invalid(tp.Child("tags").Key(k), v, "tag keys and values must not be empty"))
			}
		}
	}
	return errs
}

// parseDuration reads a positive duration in the form Karpenter takes:
// hours, minutes and seconds, such as 15m or 1h30m.
func parseDuration(s string) (time.Duration, bool) {
	d, err := time.ParseDuration(s)
	return d, err == nil && duration.MatchString(s) && d > 0
}
