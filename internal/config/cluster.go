package config

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/do-now/function-karpenter/apis/input/v1beta1"
	"github.com/do-now/function-karpenter/internal/ami"
	"github.com/do-now/function-karpenter/internal/naming"
)

// input.settledInterval: by default function-sdk-go's default TTL
// (response.To), which the function answered a settled claim with before the
// platform could choose; at least that, so that no platform makes settled
// claims cost more; at most an hour, Crossplane's default --sync-interval.
const (
	DefaultSettledInterval = "1m"
	MinSettledInterval     = time.Minute
	MaxSettledInterval     = time.Hour
)

// input.accessCheck.minRunInterval's bounds: a minute, so that a run asked
// for right after a pass is never a flood; a day, so that one asked for is
// never far off.
const (
	MinRunIntervalFloor   = time.Minute
	MinRunIntervalCeiling = 24 * time.Hour
)

// Defaults of the cluster half of the input.
const (
	DefaultFluxNamespace           = "flux-system"
	DefaultSourceKind              = "GitRepository"
	DefaultSourceName              = "flux-system"
	DefaultControllerPath          = "./examples/gitops/controller"
	DefaultNodesPath               = "./examples/gitops/nodes"
	DefaultMonitoringPath          = "./examples/gitops/monitoring"
	DefaultNearLimitsRatio         = "0.9"
	DefaultFluxInterval            = "10m"
	DefaultFluxTimeout             = "10m"
	DefaultFluxRetryInterval       = "1m"
	DefaultAccessCheckImage        = "public.ecr.aws/aws-cli/aws-cli:2.31.30"
	DefaultBackoffLimit      int32 = 6
	DefaultDeadline          int64 = 600
	DefaultAttempts          int32 = 4
	DefaultMinRunInterval          = "1h"
	DefaultRootVolumeSize          = "50Gi"
	// DefaultPublicSecurityGroupSuffix names the public nodes' security
	// group <cluster>-public-nodes.
	DefaultPublicSecurityGroupSuffix = "-public-nodes"
)

// Default subnet selectors: the role tags the AWS load balancer controller
// and EKS documentation use for private and public subnets.
var (
	DefaultPrivateSubnetTags = map[string]string{"kubernetes.io/role/internal-elb": "1"}
	DefaultPublicSubnetTags  = map[string]string{"kubernetes.io/role/elb": "1"}
)

var sourceKinds = []string{"GitRepository", "OCIRepository", "Bucket"}

// nearLimitsRatio is a plain decimal, as PromQL and the claim's condition
// read it: no exponent, no sign.
var nearLimitsRatio = regexp.MustCompile(`^(0?\.[0-9]+|1(\.0+)?)$`)

func defaultCluster(in *v1beta1.Input) {
	f := &in.Flux
	setDefault(&f.Namespace, DefaultFluxNamespace)
	setDefault(&f.SourceRef.Kind, DefaultSourceKind)
	setDefault(&f.SourceRef.Name, DefaultSourceName)
	setDefault(&f.SourceRef.Namespace, f.Namespace)
	setDefault(&f.ControllerPath, DefaultControllerPath)
	setDefault(&f.NodesPath, DefaultNodesPath)
	setDefault(&f.MonitoringPath, DefaultMonitoringPath)
	setDefault(&f.Interval, DefaultFluxInterval)
	setDefault(&f.Timeout, DefaultFluxTimeout)
	setDefault(&f.RetryInterval, DefaultFluxRetryInterval)
	setDefault(&in.SettledInterval, DefaultSettledInterval)

	m := &in.Monitoring
	if m.Enabled == nil {
		on := true
		m.Enabled = &on
	}
	setDefault(&m.NearLimitsRatio, DefaultNearLimitsRatio)

	a := &in.AccessCheck
	setDefault(&a.Image, DefaultAccessCheckImage)
	setDefault(&a.MinRunInterval, DefaultMinRunInterval)
	if a.BackoffLimit == nil {
		b := DefaultBackoffLimit
		a.BackoffLimit = &b
	}
	if a.Attempts == nil {
		n := DefaultAttempts
		a.Attempts = &n
	}
	if a.ActiveDeadlineSeconds == nil {
		d := DefaultDeadline
		a.ActiveDeadlineSeconds = &d
	}

	n := &in.Nodes
	if n.PrivateSubnetTags == nil {
		n.PrivateSubnetTags = maps.Clone(DefaultPrivateSubnetTags)
	}
	if n.PublicSubnetTags == nil {
		n.PublicSubnetTags = maps.Clone(DefaultPublicSubnetTags)
	}
	if n.PublicSecurityGroupSuffix == nil {
		suffix := DefaultPublicSecurityGroupSuffix
		n.PublicSecurityGroupSuffix = &suffix
	}
	setDefault(&n.RootVolumeSize, DefaultRootVolumeSize)
	if t := n.SubnetClusterTag; t != nil {
		setDefault(&t.Value, "*")
	}
	if in.Controller.Resources == nil {
		in.Controller.Resources = DefaultControllerResources()
	}
	if in.Controller.Replicas == nil {
		r := DefaultControllerReplicas
		in.Controller.Replicas = &r
	}
}

// DefaultControllerReplicas: two, so one survives the loss of a system node.
const DefaultControllerReplicas int32 = 2

// DefaultControllerResources are the requests and limits of each controller
// replica where the platform sets none. The requests are sized so that
// DefaultControllerReplicas of them and the access check fit one 2-vCPU
// system node (SystemFloor) with room for the rest of it; the limits are
// what Karpenter's getting-started guide requests (1 CPU, 1Gi), so a busy
// controller may burst to them.
func DefaultControllerResources() *corev1.ResourceRequirements {
	return &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
}

// ControllerSize is the claimed cluster's controller: the tenancy's
// override for it, field by field, over the platform-wide setting.
func (c *Config) ControllerSize() v1beta1.ControllerSize {
	size := c.Input.Controller.ControllerSize
	if cl, _ := c.Tenant(); cl.Controller != nil {
		if cl.Controller.Replicas != nil {
			size.Replicas = cl.Controller.Replicas
		}
		if cl.Controller.Resources != nil {
			size.Resources = cl.Controller.Resources
		}
	}
	return size
}

// DefaultAMIAlias is the pin of the claimed cluster's pools that pin none:
// the tenancy's for the cluster, else the platform-wide one.
func (c *Config) DefaultAMIAlias() string {
	if cl, _ := c.Tenant(); cl.AMIAlias != "" {
		return cl.AMIAlias
	}
	return c.Input.Nodes.DefaultAMIAlias
}

// MinAMIAlias is the oldest AMI release the claimed cluster's pools may
// run: the cluster's own minimum, else the platform's; "" when neither sets
// one.
func (c *Config) MinAMIAlias() string {
	if cl, _ := c.Tenant(); cl.MinAMIAlias != "" {
		return cl.MinAMIAlias
	}
	return c.Input.Nodes.MinAMIAlias
}

// StartupTaints are the claimed cluster's CNI startup taints: the cluster's
// own, else the platform's.
func (c *Config) StartupTaints() []v1beta1.Taint {
	if cl, _ := c.Tenant(); cl.StartupTaints != nil {
		return cl.StartupTaints
	}
	return c.Input.Nodes.StartupTaints
}

// SubnetClusterTag is the platform's tag scoping subnets to the claimed
// cluster, with the cluster's name in place; ok is false when the platform
// sets none.
func (c *Config) SubnetClusterTag() (key, value string, ok bool) {
	t := c.Input.Nodes.SubnetClusterTag
	if t == nil {
		return "", "", false
	}
	r := strings.NewReplacer(v1beta1.ClusterPlaceholder, c.Spec.Cluster.Name)
	return r.Replace(t.Key), r.Replace(t.Value), true
}

// MonitoringNamespace is where the monitoring objects go: the platform's
// choice, or the controller's namespace.
func (c *Config) MonitoringNamespace() string {
	if ns := c.Input.Monitoring.Namespace; ns != "" {
		return ns
	}
	return c.Input.PodIdentity.Namespace
}

func setDefault(s *string, v string) {
	if *s == "" {
		*s = v
	}
}

func validateCluster(in v1beta1.Input) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("input")

	f := p.Child("flux")
	errs = append(errs, dnsLabel(f.Child("namespace"), in.Flux.Namespace)...)
	errs = append(errs, validateSourceRef(f.Child("sourceRef"), in.Flux.SourceRef, false)...)
	if in.Flux.ServiceAccountName != "" {
		errs = append(errs, dnsSubdomain(f.Child("serviceAccountName"), in.Flux.ServiceAccountName)...)
	}
	for name, path := range map[string]string{"controllerPath": in.Flux.ControllerPath, "nodesPath": in.Flux.NodesPath, "monitoringPath": in.Flux.MonitoringPath} {
		if !strings.HasPrefix(path, "./") || strings.Contains(path, "..") {
			errs = append(errs, field.Invalid(f.Child(name), path, "must be a relative path inside the source, starting with ./"))
		}
	}
	// At least a second: Flux's CRDs take durations in ms, s, m and h only (a
	// finer one renders as 500µs, which the API server refuses), and a
	// shorter retry would hammer the claimed cluster's API server.
	for name, d := range map[string]string{"interval": in.Flux.Interval, "timeout": in.Flux.Timeout, "retryInterval": in.Flux.RetryInterval} {
		if v, err := time.ParseDuration(d); err != nil || v < time.Second {
			errs = append(errs, field.Invalid(f.Child(name), d, "must be a Go duration of at least 1s, such as 10m"))
		}
	}

	if d, err := time.ParseDuration(in.SettledInterval); err != nil || d < MinSettledInterval || d > MaxSettledInterval {
		errs = append(errs, field.Invalid(p.Child("settledInterval"), in.SettledInterval,
			fmt.Sprintf("must be a Go duration from %s to %s", MinSettledInterval, MaxSettledInterval)))
	}

	m := p.Child("monitoring")
	if in.Monitoring.Namespace != "" {
		errs = append(errs, dnsLabel(m.Child("namespace"), in.Monitoring.Namespace)...)
	}
	errs = append(errs, labels(m.Child("labels"), in.Monitoring.Labels)...)
	if u := in.Monitoring.UpstreamDashboards; u != nil {
		il := m.Child("upstreamDashboards", "instanceLabels")
		if len(u.InstanceLabels) == 0 {
			errs = append(errs, field.Required(il, "the labels of the Grafana instances that import the dashboards"))
		}
		errs = append(errs, labels(il, u.InstanceLabels)...)
	}
	if r, err := strconv.ParseFloat(in.Monitoring.NearLimitsRatio, 64); err != nil || !nearLimitsRatio.MatchString(in.Monitoring.NearLimitsRatio) || r <= 0 || r > 1 {
		errs = append(errs, field.Invalid(m.Child("nearLimitsRatio"), in.Monitoring.NearLimitsRatio, "must be a decimal in (0, 1], such as 0.9"))
	}

	c := p.Child("controller")
	errs = append(errs, labels(c.Child("nodeSelector"), in.Controller.NodeSelector)...)
	for i, t := range in.Controller.Tolerations {
		errs = append(errs, validateToleration(c.Child("tolerations").Index(i), t)...)
	}

	if in.AccessCheck.Image == "" || strings.ContainsAny(in.AccessCheck.Image, " \t\n") {
		errs = append(errs, field.Invalid(p.Child("accessCheck", "image"), in.AccessCheck.Image, "must be an image reference with the AWS CLI"))
	}
	if d, err := time.ParseDuration(in.AccessCheck.MinRunInterval); err != nil || d < MinRunIntervalFloor || d > MinRunIntervalCeiling {
		errs = append(errs, field.Invalid(p.Child("accessCheck", "minRunInterval"), in.AccessCheck.MinRunInterval,
			fmt.Sprintf("must be a Go duration from %s to %s", MinRunIntervalFloor, MinRunIntervalCeiling)))
	}

	n := p.Child("nodes")
	for name, tags := range map[string]map[string]string{"privateSubnetTags": in.Nodes.PrivateSubnetTags, "publicSubnetTags": in.Nodes.PublicSubnetTags} {
		for k, v := range tags {
			errs = append(errs, validateSelectorTag(n.Child(name).Key(k), k, v)...)
		}
	}
	if t := in.Nodes.SubnetClusterTag; t != nil {
		tp := n.Child("subnetClusterTag")
		// Checked with a cluster name in place, as long as any.
		r := strings.NewReplacer(v1beta1.ClusterPlaceholder, strings.Repeat("c", 100))
		switch {
		case t.Key == "":
			errs = append(errs, field.Required(tp.Child("key"), "the tag key, such as kubernetes.io/cluster/{cluster}"))
		case !strings.Contains(t.Key+t.Value, v1beta1.ClusterPlaceholder):
			errs = append(errs, field.Invalid(tp, t.Key+"="+t.Value, "names no cluster: the key or the value must contain {cluster}, else it scopes the subnets to nothing"))
		default:
			for _, e := range validateSelectorTag(tp, r.Replace(t.Key), r.Replace(t.Value)) {
				errs = append(errs, field.Invalid(tp, t.Key+"="+t.Value, e.Detail))
			}
		}
	}
	errs = append(errs, validateControllerSize(p.Child("controller"), in.Controller.ControllerSize)...)
	if s := *in.Nodes.PublicSecurityGroupSuffix; s != "" && (len(s) > 100 || !tagCharacter.MatchString(s)) {
		errs = append(errs, field.Invalid(n.Child("publicSecurityGroupSuffix"), s, "must be up to 100 letters, digits and _.:/=+-@"))
	}
	errs = append(errs, validatePlatformAMI(n.Child("defaultAmiAlias"), in.Nodes.DefaultAMIAlias, in.Nodes)...)
	errs = append(errs, validateMinAMI(in)...)
	errs = append(errs, validateTaints(n.Child("startupTaints"), in.Nodes.StartupTaints)...)
	errs = append(errs, validateTenancy(in.Tenancy)...)
	if g := in.DeletionGuard; g != nil {
		if msgs := validation.IsQualifiedName(g.Annotation); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child("deletionGuard", "annotation"), g.Annotation, "must be an annotation key: "+strings.Join(msgs, "; ")))
		}
	}
	errs = append(errs, validateSubnetScope(n.Child("subnetClusterTag"), in)...)
	errs = append(errs, validateClusterVersions(in)...)
	if in.Tenancy != nil {
		for i, cl := range in.Tenancy.Clusters {
			cp := p.Child("tenancy", "clusters").Index(i)
			if cl.AMIAlias != "" {
				errs = append(errs, validatePlatformAMI(cp.Child("amiAlias"), cl.AMIAlias, in.Nodes)...)
			}
			errs = append(errs, validateTaints(cp.Child("startupTaints"), cl.StartupTaints)...)
			if cl.Controller != nil {
				errs = append(errs, validateControllerSize(cp.Child("controller"), *cl.Controller)...)
			}
		}
	}
	if q, err := resource.ParseQuantity(in.Nodes.RootVolumeSize); err != nil || !volumeSize.MatchString(in.Nodes.RootVolumeSize) ||
		q.Cmp(resource.MustParse("20Gi")) < 0 || q.Cmp(resource.MustParse("16Ti")) > 0 {
		errs = append(errs, field.Invalid(n.Child("rootVolumeSize"), in.Nodes.RootVolumeSize, "must be whole Gi, G, Ti or T (as EC2NodeClass takes it) between 20Gi and 16Ti"))
	}
	return errs
}

// validateSubnetScope fails closed where the subnet selectors alone would
// reach another cluster: the default selectors (the load balancer role
// tags) match the subnets of every EKS VPC of an account and region, so
// where the tenancy puts two clusters in one, Karpenter could launch one
// cluster's nodes into the other's subnets. The platform must then scope
// them with subnetClusterTag.
func validateSubnetScope(p *field.Path, in v1beta1.Input) field.ErrorList {
	if in.Nodes.SubnetClusterTag != nil || in.Tenancy == nil {
		return nil
	}
	first := map[string]string{}
	for _, cl := range in.Tenancy.Clusters {
		where := cl.Account + " " + cl.Region
		if other, ok := first[where]; ok {
			return field.ErrorList{field.Required(p, fmt.Sprintf(
				"clusters %q and %q share account %s and region %s: the subnet selectors alone match both clusters' subnets, so a tag scoping subnets to their cluster (such as kubernetes.io/cluster/{cluster}) is required",
				other, cl.Name, cl.Account, cl.Region))}
		}
		first[where] = cl.Name
	}
	return nil
}

// validatePlatformAMI checks a pin the platform sets: a pinned AL2023
// alias the function does not know to be no release (al2023@latest only
// where the platform allows it).
func validatePlatformAMI(p *field.Path, alias string, nodes v1beta1.Nodes) field.ErrorList {
	if !amiAlias.MatchString(alias) || alias == LatestAMIAlias && !nodes.AllowLatestAMI {
		return field.ErrorList{field.Invalid(p, alias, "must be a pinned AL2023 alias al2023@vYYYYMMDD")}
	}
	if err := ami.Check(alias, "", nil); err != nil {
		return field.ErrorList{field.Invalid(p, alias, err.Error())}
	}
	return nil
}

// validateMinAMI checks the platform's minimum AMI releases, each a pinned
// release, and that no platform pin is below the minimum of a cluster it
// applies to: the platform-wide pin against the platform-wide minimum, and
// each cluster's pin (its own, or the platform-wide one) against its
// minimum (its own, or the platform-wide one).
func validateMinAMI(in v1beta1.Input) field.ErrorList {
	var errs field.ErrorList
	n := field.NewPath("input", "nodes")
	pinned := v1beta1.Nodes{} // a minimum never floats: latest is refused
	if m := in.Nodes.MinAMIAlias; m != "" {
		errs = append(errs, validatePlatformAMI(n.Child("minAmiAlias"), m, pinned)...)
		if ami.Older(in.Nodes.DefaultAMIAlias, m) {
			errs = append(errs, field.Invalid(n.Child("defaultAmiAlias"), in.Nodes.DefaultAMIAlias, "is older than input.nodes.minAmiAlias "+m))
		}
	}
	if in.Tenancy == nil {
		return errs
	}
	for i, cl := range in.Tenancy.Clusters {
		cp := field.NewPath("input", "tenancy", "clusters").Index(i)
		minimum, minPath := in.Nodes.MinAMIAlias, n.Child("minAmiAlias")
		if cl.MinAMIAlias != "" {
			errs = append(errs, validatePlatformAMI(cp.Child("minAmiAlias"), cl.MinAMIAlias, pinned)...)
			minimum, minPath = cl.MinAMIAlias, cp.Child("minAmiAlias")
		}
		pin, pinPath := in.Nodes.DefaultAMIAlias, n.Child("defaultAmiAlias")
		if cl.AMIAlias != "" {
			pin, pinPath = cl.AMIAlias, cp.Child("amiAlias")
		}
		if cl.MinAMIAlias != "" || cl.AMIAlias != "" {
			if ami.Older(pin, minimum) {
				errs = append(errs, field.Invalid(pinPath, pin, fmt.Sprintf("is cluster %q's pin, older than its minimum %s (%s)", cl.Name, minimum, minPath)))
			}
		}
	}
	return errs
}

// validateTaints checks startup taints as the NodePool CRD takes them: a
// qualified key, a known effect, each key and effect once.
func validateTaints(p *field.Path, taints []v1beta1.Taint) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, t := range taints {
		ip := p.Index(i)
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(ip.Child("key"), t.Key, msg))
		}
		if !slices.Contains(taintEffects, t.Effect) {
			errs = append(errs, field.NotSupported(ip.Child("effect"), t.Effect, taintEffects))
		}
		if seen[t.Key+":"+t.Effect] {
			errs = append(errs, field.Duplicate(ip, t.Key+":"+t.Effect))
		}
		seen[t.Key+":"+t.Effect] = true
	}
	return errs
}

var taintEffects = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}

// validateControllerSize checks the controller's replicas and resources:
// no request above its limit.
func validateControllerSize(p *field.Path, size v1beta1.ControllerSize) field.ErrorList {
	var errs field.ErrorList
	if r := size.Replicas; r != nil && (*r < 1 || *r > 5) {
		errs = append(errs, field.Invalid(p.Child("replicas"), *r, "must be between 1 and 5"))
	}
	if r := size.Resources; r != nil {
		for name, req := range r.Requests {
			if lim, ok := r.Limits[name]; ok && req.Cmp(lim) > 0 {
				errs = append(errs, field.Invalid(p.Child("resources", "requests").Key(string(name)), req.String(), "must not exceed the limit "+lim.String()))
			}
		}
	}
	return errs
}

// validateSourceRef checks a Flux source reference; in an override, unset
// fields inherit and are not checked.
func validateSourceRef(p *field.Path, s v1beta1.SourceRef, override bool) field.ErrorList {
	var errs field.ErrorList
	if !override || s.Namespace != "" {
		errs = append(errs, dnsLabel(p.Child("namespace"), s.Namespace)...)
	}
	if !override || s.Name != "" {
		errs = append(errs, dnsSubdomain(p.Child("name"), s.Name)...)
	}
	if (!override || s.Kind != "") && !slices.Contains(sourceKinds, s.Kind) {
		errs = append(errs, field.NotSupported(p.Child("kind"), s.Kind, sourceKinds))
	}
	return errs
}

// validateSelectorTag checks a tag a selector matches: any tag AWS allows,
// those Karpenter and EKS set included, and never an empty value, which
// Karpenter's selector terms refuse.
func validateSelectorTag(p *field.Path, k, v string) field.ErrorList {
	var errs field.ErrorList
	if !validTagKey(k) {
		errs = append(errs, field.Invalid(p, k, tagKeyRule))
	}
	switch {
	case v == "":
		errs = append(errs, field.Invalid(p, v, "selector tag values must not be empty; use \"*\" to match any value"))
	case v != "*" && !validTagValue(v):
		errs = append(errs, field.Invalid(p, v, tagValueRule))
	}
	return errs
}

func validateToleration(p *field.Path, t corev1.Toleration) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(p.Child("key"), t.Key, msg))
		}
	}
	switch t.Operator {
	case "", corev1.TolerationOpEqual, corev1.TolerationOpExists:
	default:
		errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator, []string{"Equal", "Exists"}))
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}))
	}
	return errs
}

func dnsLabel(p *field.Path, v string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

func dnsSubdomain(p *field.Path, v string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

// ClusterLabel carries the cluster's name, in Kubernetes form, on every
// object composed for it, in Crossplane's cluster and in the claimed one.
const ClusterLabel = "socle.do-now.io/cluster"

// KubernetesName turns a cluster name (letters, digits, '-' and '_') into a
// Kubernetes object name.
func KubernetesName(cluster string) string {
	return strings.ReplaceAll(strings.ToLower(cluster), "_", "-")
}

// Delivery is how the claimed cluster is reached: everything the function
// puts there (step three's objects and both Flux Kustomizations) goes
// through one provider-kubernetes ProviderConfig, and the cluster's own
// Flux builds the Kustomizations from FluxSource. Crossplane may run
// elsewhere and serve many clusters.
type Delivery struct {
	ProviderConfig string
	FluxSource     v1beta1.SourceRef
}

// Delivery returns the claimed cluster's delivery: what the platform's
// tenancy declares for it, else the defaults (the ProviderConfig named
// after the cluster, input.flux.sourceRef).
func (c *Config) Delivery() Delivery {
	cl, ok := c.Tenant()
	if !ok {
		cl.Name = c.Spec.Cluster.Name
	}
	d := Delivery{ProviderConfig: deliveryProviderConfig(cl), FluxSource: c.Input.Flux.SourceRef}
	if f := cl.Flux; f != nil && f.SourceRef != nil {
		overlaySource(&d.FluxSource, *f.SourceRef)
	}
	return d
}

// deliveryProviderConfig is the provider-kubernetes ProviderConfig that
// reaches cl: its own, else the one named after it.
func deliveryProviderConfig(cl v1beta1.TenantCluster) string {
	if cl.KubernetesProviderConfig != "" {
		return cl.KubernetesProviderConfig
	}
	return KubernetesName(cl.Name)
}

// overlaySource sets on dst every field src sets.
func overlaySource(dst *v1beta1.SourceRef, src v1beta1.SourceRef) {
	overlayStrings(map[*string]string{&dst.Kind: src.Kind, &dst.Name: src.Name, &dst.Namespace: src.Namespace})
}

// overlayStrings sets each field to its value where the value is set: an
// override layer's fields over what they override.
func overlayStrings(fields map[*string]string) {
	for to, from := range fields {
		if from != "" {
			*to = from
		}
	}
}

// Tenant is what the platform's tenancy declares for the claimed cluster;
// false when it declares nothing for it.
func (c *Config) Tenant() (v1beta1.TenantCluster, bool) {
	i := tenantIndex(c.Input, c.Spec.Cluster.Name)
	if i < 0 {
		return v1beta1.TenantCluster{}, false
	}
	return c.Input.Tenancy.Clusters[i], true
}

// tenantIndex is the index of cluster in the platform's tenancy, -1 when
// it declares nothing for it.
func tenantIndex(in v1beta1.Input, cluster string) int {
	if in.Tenancy == nil {
		return -1
	}
	return slices.IndexFunc(in.Tenancy.Clusters, func(cl v1beta1.TenantCluster) bool { return cl.Name == cluster })
}

var (
	accountID = regexp.MustCompile(`^[0-9]{12}$`)
	// volumeSize is the form EC2NodeClass block device sizes take.
	volumeSize = regexp.MustCompile(`^[1-9][0-9]*(Gi|G|Ti|T)$`)
)

func validateTenancy(t *v1beta1.Tenancy) field.ErrorList {
	if t == nil {
		return nil
	}
	var errs field.ErrorList
	p := field.NewPath("input", "tenancy", "clusters")
	// By name in Kubernetes form: the cluster's label, its lock and its
	// provider-kubernetes ProviderConfig are named so, and IAM names are
	// case-insensitive, so two names alike in that form are one cluster.
	seen := map[string]int{}
	// By the provider-kubernetes ProviderConfig each is applied through,
	// as Delivery resolves it: two clusters sharing one would be one API
	// server to the function, and one claim would manage, and delete, the
	// namespace, the access check and the Kustomizations of the other.
	through := map[string]int{}
	for i, cl := range t.Clusters {
		pc := deliveryProviderConfig(cl)
		if j, ok := through[pc]; ok {
			// Two defaults alike are two names alike, refused below.
			if cl.KubernetesProviderConfig != "" || t.Clusters[j].KubernetesProviderConfig != "" {
				why := "is also the ProviderConfig of %q (%s): one claim would manage and delete the other cluster's objects"
				if cl.KubernetesProviderConfig == "" {
					why = "defaults to the cluster's name, which is also the ProviderConfig of %q (%s): one claim would manage and delete the other cluster's objects; name this cluster's own"
				}
				errs = append(errs, field.Invalid(p.Index(i).Child("kubernetesProviderConfig"), pc,
					fmt.Sprintf(why, t.Clusters[j].Name, p.Index(j).Child("kubernetesProviderConfig"))))
			}
		} else {
			through[pc] = i
		}
		if !validClusterName(cl.Name) {
			errs = append(errs, field.Invalid(p.Index(i).Child("name"), cl.Name, "must be an EKS cluster name"))
		}
		if j, ok := seen[KubernetesName(cl.Name)]; ok {
			if t.Clusters[j].Name == cl.Name {
				errs = append(errs, field.Duplicate(p.Index(i).Child("name"), cl.Name))
			} else {
				errs = append(errs, field.Invalid(p.Index(i).Child("name"), cl.Name, fmt.Sprintf(
					"collides with %q (%s): both are %q once lower-cased with '_' as '-', the form their labels, provider config and case-insensitive IAM names take",
					t.Clusters[j].Name, p.Index(j).Child("name"), KubernetesName(cl.Name))))
			}
		} else {
			seen[KubernetesName(cl.Name)] = i
		}
		if !accountID.MatchString(cl.Account) {
			errs = append(errs, field.Invalid(p.Index(i).Child("account"), cl.Account, "must be a 12-digit AWS account ID"))
		}
		errs = append(errs, validateFacts(p.Index(i), cl)...)
		for j, ns := range cl.Namespaces {
			errs = append(errs, dnsLabel(p.Index(i).Child("namespaces").Index(j), ns)...)
		}
		if cl.AWSProviderConfig != "" {
			errs = append(errs, dnsSubdomain(p.Index(i).Child("awsProviderConfig"), cl.AWSProviderConfig)...)
		}
		if cl.KubernetesProviderConfig != "" {
			errs = append(errs, dnsSubdomain(p.Index(i).Child("kubernetesProviderConfig"), cl.KubernetesProviderConfig)...)
		}
		if f := cl.Flux; f != nil && f.SourceRef != nil {
			errs = append(errs, validateSourceRef(p.Index(i).Child("flux", "sourceRef"), *f.SourceRef, true)...)
		}
	}
	return errs
}

// validateFacts checks what the platform declares of one cluster's AWS side:
// its region, and a node role in its account and the region's partition.
func validateFacts(p *field.Path, cl v1beta1.TenantCluster) field.ErrorList {
	var errs field.ErrorList
	r := p.Child("region")
	switch {
	case cl.Region == "":
		errs = append(errs, field.Required(r, "the cluster's AWS region, such as eu-west-3"))
	case !regionName.MatchString(cl.Region):
		errs = append(errs, field.Invalid(r, cl.Region, "must be an AWS region such as eu-west-3"))
	}
	id := p.Child("nodeIdentity")
	role, err := naming.ParseRoleARN(cl.NodeIdentity.RoleARN)
	switch {
	case cl.NodeIdentity.RoleARN == "":
		errs = append(errs, field.Required(id.Child("roleArn"), "the ARN of the role the cluster's bootstrap nodes run as"))
	case err != nil:
		errs = append(errs, field.Invalid(id.Child("roleArn"), cl.NodeIdentity.RoleARN, err.Error()))
	case role.Account != cl.Account:
		errs = append(errs, field.Invalid(id.Child("roleArn"), cl.NodeIdentity.RoleARN, fmt.Sprintf("is in account %s, the cluster in %s", role.Account, cl.Account)))
	case regionName.MatchString(cl.Region) && regionPartition(cl.Region) != role.Partition:
		errs = append(errs, field.Invalid(r, cl.Region, fmt.Sprintf("is not a region of partition %q of nodeIdentity.roleArn", role.Partition)))
	}
	switch ip := cl.NodeIdentity.InstanceProfile; {
	case ip == "":
		errs = append(errs, field.Required(id.Child("instanceProfile"), "the name of the node role's instance profile"))
	case !validInstanceProfile(ip):
		errs = append(errs, field.Invalid(id.Child("instanceProfile"), ip, instanceProfileRule))
	}
	return errs
}

// AWSProviderConfig is the provider-aws (Cluster)ProviderConfig of the
// claimed cluster's account: the tenancy's for it, else the platform-wide
// one.
func (c *Config) AWSProviderConfig() string {
	if cl, _ := c.Tenant(); cl.AWSProviderConfig != "" {
		return cl.AWSProviderConfig
	}
	return c.Input.ProviderConfigName
}

// labels checks a map of Kubernetes labels: qualified names, valid values.
func labels(path *field.Path, m map[string]string) field.ErrorList {
	var errs field.ErrorList
	for k, v := range m {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(path.Key(k), k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(path.Key(k), v, msg))
		}
	}
	return errs
}
