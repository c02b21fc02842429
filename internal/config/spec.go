// Package config reads what the function is asked to do, the tenant's XR spec
// and the platform's function input, fills defaults, and validates both into
// field errors with paths, because the API server never validates function
// input and a claim may predate a schema change.
package config

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/do-now/function-karpenter/apis/input/v1beta1"
	"github.com/do-now/function-karpenter/apis/v1alpha1"
	"github.com/do-now/function-karpenter/internal/naming"
	"github.com/do-now/function-karpenter/internal/scope"
)

// Defaults of the function input.
const (
	DefaultIAMPathPrefix      = "/socle/"
	DefaultProviderConfigName = "default"
	DefaultNamespace          = "karpenter"
	DefaultServiceAccount     = "karpenter"
)

// Owner is who asked for Karpenter: the claim's namespace and name, or for
// an XR without a claim, the XR's own name (and namespace, when namespaced).
// Every instance is traced back to it.
type Owner struct {
	Namespace string
	Name      string
}

// OwnerOf reads the owner of an XR of api: the claim its spec.claimRef
// names, when api has claims (Crossplane writes that field), else the XR
// itself. A namespaced XR's spec.claimRef, which its tenant could write,
// names no one.
func OwnerOf(xr map[string]any, api scope.API) Owner {
	str := func(m map[string]any, k string) string { v, _ := m[k].(string); return v }
	s, _ := xr["spec"].(map[string]any)
	if ref, ok := s["claimRef"].(map[string]any); ok && api.Claims && str(ref, "name") != "" {
		return Owner{Namespace: str(ref, "namespace"), Name: str(ref, "name")}
	}
	meta, _ := xr["metadata"].(map[string]any)
	return Owner{Namespace: str(meta, "namespace"), Name: str(meta, "name")}
}

// Config is everything one call composes from, validated and defaulted.
type Config struct {
	Spec  v1alpha1.XKarpenterSpec
	Input v1beta1.Input
	Owner Owner
	// VersionDefaulted is true when the claim names no version and has the
	// platform's default: such a claim follows the default up, never down.
	VersionDefaulted bool
	// AccessCheckRun is the run the access check's Pod is for: the XR's
	// socle.do-now.io/access-check-run annotation (internal/cluster.RunKey),
	// or the run its Pod ran while a new one waits (internal/cluster.Run).
	AccessCheckRun string
	// AccessCheckAttempt is which attempt of this run the access check's
	// Pod is, from 1 (internal/cluster.Attempt).
	AccessCheckAttempt int
	// AccessCheckName is the composed resource name the access check's
	// Pod goes by (internal/cluster.Place); empty: access-check.
	AccessCheckName string
	// ClusterVersion is the claimed cluster's Kubernetes version as AWS
	// reports it (1.34); empty until the observed cluster says.
	ClusterVersion string
	// ClusterVPC is the claimed cluster's VPC (vpc-0123…) as AWS reports
	// it; empty until the observed cluster says. The controller policy
	// names it.
	ClusterVPC string
	// AccessCheck is the access check's Pod spec, built once this Config
	// is complete (internal/cluster.Prepare): every part of one call that
	// names or builds the Pod shares it. Nil: built on each use.
	AccessCheck *AccessCheckPod

	// XR is the composite this call composes for, and its API. The
	// function sets it from the observed XR; Load does not read it.
	XR scope.XR

	// Pools is the platform's pool policy for the claimed cluster:
	// input.pools with the cluster's override applied, every field set.
	Pools v1beta1.Pools

	// Requested is what the claim itself wrote of the facts the platform
	// declares per cluster, before the platform's values filled what it
	// left unset: tenancy.Check refuses any that differ.
	Requested Requested

	// NodeRole is the parsed node role: the platform's for the cluster.
	NodeRole naming.RoleARN
	// Account is where every ARN is built: the node role's partition and
	// account, the cluster's region.
	Account naming.Account
	// Names are the AWS names of the cluster's resources.
	Names naming.Names
}

// AccessCheckPod is the access check's Pod spec as internal/cluster builds
// it, and its JSON encoding, which the Pod's name digests.
type AccessCheckPod struct {
	Spec corev1.PodSpec
	JSON []byte
}

// Requested is what a claim wrote of its cluster's region and node
// identity; empty where it wrote nothing.
type Requested struct {
	Region       string
	NodeIdentity v1alpha1.NodeIdentity
}

// platformFacts keeps what the claim wrote of the facts the platform
// declares for its cluster, and sets the spec to the platform's: the region,
// the node role and its instance profile. A cluster the tenancy does not
// declare keeps the claim's values, for tenancy.Check to refuse.
func platformFacts(c *Config) {
	c.Requested = Requested{Region: c.Spec.Cluster.Region, NodeIdentity: c.Spec.NodeIdentity}
	cl, ok := c.Tenant()
	if !ok {
		return
	}
	c.Spec.Cluster.Region = cl.Region
	c.Spec.NodeIdentity = v1alpha1.NodeIdentity{RoleARN: cl.NodeIdentity.RoleARN, InstanceProfile: cl.NodeIdentity.InstanceProfile}
}

// validClusterName tells whether s can name an EKS cluster: 1-100 letters,
// digits, '-' and '_', starting with a letter or digit.
func validClusterName(s string) bool { return len(s) <= 100 && clusterName.MatchString(s) }

var (
	clusterName  = regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9_-]*$`)
	regionName   = regexp.MustCompile(`^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]+$`)
	iamName      = regexp.MustCompile(`^[A-Za-z0-9+=,.@_-]+$`)
	iamPath      = regexp.MustCompile(`^/([A-Za-z0-9+=,.@_-]+/)*$`)
	tagCharacter = regexp.MustCompile(`^[\p{L}\p{Z}\p{N}_.:/=+\-@]*$`)
)

// Load decodes and validates the XR's spec and the function input for the
// XR's owner. in may be nil: every input field has a default.
func Load(owner Owner, xrSpec map[string]any, in *structpb.Struct) (*Config, field.ErrorList) {
	c := &Config{Owner: owner}
	errs := decodeSpec(xrSpec, &c.Spec)
	errs = append(errs, decodeInput(in, &c.Input)...)
	if len(errs) > 0 {
		return nil, ordered(errs)
	}
	platformFacts(c)
	errs = append(errs, validatePoolPolicy(c)...)
	errs = append(errs, validatePins(c.Input)...)
	errs = append(errs, validateVersionsInput(&c.Input.Versions)...)
	errs = append(errs, validateGates(c.Input.Controller)...)
	if len(errs) > 0 {
		// The tenant's pools are checked against the policy: not before
		// it is valid.
		return nil, ordered(errs)
	}
	defaults(c)
	errs = append(errs, validateOwner(owner)...)
	errs = append(errs, validateSpec(c)...)
	errs = append(errs, validateInput(c)...)
	errs = append(errs, validateCluster(c.Input)...)
	errs = append(errs, validatePools(c)...)
	if len(errs) > 0 {
		return nil, ordered(errs)
	}
	c.Names = naming.For(c.Spec.Cluster.Name, c.Input.IAMPathPrefix)
	if errs := c.Names.Check(field.NewPath("spec", "cluster", "name")); len(errs) > 0 {
		return nil, ordered(errs)
	}
	return c, nil
}

// decodeSpec reads the tenant fields of the XR spec. Crossplane adds its own
// fields to an XR's spec, so unknown fields are ignored here; the XRD schema
// prunes anything a tenant adds.
func decodeSpec(xrSpec map[string]any, into *v1alpha1.XKarpenterSpec) field.ErrorList {
	b, err := json.Marshal(xrSpec)
	if err == nil {
		err = json.Unmarshal(b, into)
	}
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), "", fmt.Sprintf("cannot decode: %v", err))}
	}
	return nil
}

// decodeInput reads the function input strictly: a misspelt platform setting
// must not silently fall back to a default.
func decodeInput(in *structpb.Struct, into *v1beta1.Input) field.ErrorList {
	root := field.NewPath("input")
	if in == nil {
		return nil
	}
	b, err := in.MarshalJSON()
	if err != nil {
		return field.ErrorList{field.InternalError(root, err)}
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(into); err != nil {
		return field.ErrorList{field.Invalid(root, "", fmt.Sprintf("cannot decode: %v", err))}
	}
	var errs field.ErrorList
	if into.APIVersion != "" && into.APIVersion != v1beta1.APIVersion {
		errs = append(errs, field.NotSupported(root.Child("apiVersion"), into.APIVersion, []string{v1beta1.APIVersion}))
	}
	if into.Kind != "" && into.Kind != v1beta1.Kind {
		errs = append(errs, field.NotSupported(root.Child("kind"), into.Kind, []string{v1beta1.Kind}))
	}
	return errs
}

func defaults(c *Config) {
	defaultVersions(c)
	in := &c.Input
	if in.IAMPathPrefix == "" {
		in.IAMPathPrefix = DefaultIAMPathPrefix
	}
	if in.ProviderConfigName == "" {
		in.ProviderConfigName = DefaultProviderConfigName
	}
	if in.PodIdentity.Namespace == "" {
		in.PodIdentity.Namespace = DefaultNamespace
	}
	if in.PodIdentity.ServiceAccount == "" {
		in.PodIdentity.ServiceAccount = DefaultServiceAccount
	}
	defaultCluster(in)
	defaultPools(c)
}

// validatePoolPolicy checks every layer of the platform's pool policy at its
// own path, then resolves the claimed cluster's.
func validatePoolPolicy(c *Config) field.ErrorList {
	errs := validatePoolsInput(field.NewPath("input", "pools"), c.Input.Pools)
	if t := c.Input.Tenancy; t != nil {
		for i, cl := range t.Clusters {
			if cl.Pools != nil {
				errs = append(errs, validatePoolsInput(field.NewPath("input", "tenancy", "clusters").Index(i).Child("pools"), *cl.Pools)...)
			}
		}
	}
	if len(errs) > 0 {
		return errs
	}
	var from origins
	c.Pools, from = resolvePools(c.Input, c.Spec.Cluster.Name)
	region := ""
	if regionName.MatchString(c.Spec.Cluster.Region) {
		region = c.Spec.Cluster.Region
	}
	return validatePolicy(from, c.Pools, region)
}

// validateOwner checks that the owner's names can label a node, as they
// must for every instance to be traced back to its claim.
func validateOwner(o Owner) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidLabelValue(o.Name) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), o.Name, "labels every node of the claim, so "+msg))
	}
	return errs
}

func validateSpec(c *Config) field.ErrorList {
	var errs field.ErrorList
	s := c.Spec
	p := field.NewPath("spec")

	name := p.Child("cluster", "name")
	switch {
	case s.Cluster.Name == "":
		errs = append(errs, field.Required(name, "the EKS cluster name"))
	case !validClusterName(s.Cluster.Name):
		errs = append(errs, field.Invalid(name, s.Cluster.Name, "must be an EKS cluster name: 1-100 letters, digits, '-' and '_', starting with a letter or digit"))
	}

	// The region and the node identity are the platform's (platformFacts),
	// checked where the tenancy declares them; what the claim wrote of
	// them is checked here for its form, and by tenancy.Check against
	// the platform's.
	r, req := p.Child("cluster", "region"), c.Requested
	if req.Region != "" && !regionName.MatchString(req.Region) {
		errs = append(errs, field.Invalid(r, req.Region, "must be an AWS region such as eu-west-3"))
	}
	if a := req.NodeIdentity.RoleARN; a != "" {
		if _, err := naming.ParseRoleARN(a); err != nil {
			errs = append(errs, field.Invalid(p.Child("nodeIdentity", "roleArn"), a, err.Error()))
		}
	}
	if ip := req.NodeIdentity.InstanceProfile; ip != "" && !validInstanceProfile(ip) {
		errs = append(errs, field.Invalid(p.Child("nodeIdentity", "instanceProfile"), ip, instanceProfileRule))
	}
	if role, err := naming.ParseRoleARN(s.NodeIdentity.RoleARN); err == nil {
		c.NodeRole = role
		c.Account = naming.Account{Partition: role.Partition, ID: role.Account, Region: s.Cluster.Region}
	}
	return append(errs, validateVersion(c)...)
}

const instanceProfileRule = "must be an IAM instance profile name: up to 128 letters, digits and +=,.@_-"

func validInstanceProfile(s string) bool { return len(s) <= 128 && iamName.MatchString(s) }

// regionPartition is the partition a region belongs to. Regions of the
// partitions no role ARN can name (ISO) map to a partition of their own.
func regionPartition(r string) naming.Partition {
	switch {
	case strings.HasPrefix(r, "cn-"):
		return "aws-cn"
	case strings.HasPrefix(r, "us-gov-"):
		return "aws-us-gov"
	case strings.Contains(r, "-iso"):
		return "aws-iso"
	default:
		return "aws"
	}
}

func validateInput(c *Config) field.ErrorList {
	var errs field.ErrorList
	in := c.Input
	p := field.NewPath("input")

	if len(in.IAMPathPrefix) > 256 || !iamPath.MatchString(in.IAMPathPrefix) {
		errs = append(errs, field.Invalid(p.Child("iamPathPrefix"), in.IAMPathPrefix, "must be an IAM path: start and end with '/', segments of letters, digits and +=,.@_-"))
	}
	if b := in.PermissionsBoundaryARN; b != "" {
		part, err := naming.ParsePolicyARN(b)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(p.Child("permissionsBoundaryArn"), b, err.Error()))
		case c.NodeRole.Partition != "" && part != c.NodeRole.Partition:
			errs = append(errs, field.Invalid(p.Child("permissionsBoundaryArn"), b, fmt.Sprintf("is in partition %q, the node role in %q", part, c.NodeRole.Partition)))
		}
	}
	errs = append(errs, dnsSubdomain(p.Child("providerConfigName"), in.ProviderConfigName)...)
	errs = append(errs, dnsLabel(p.Child("podIdentity", "namespace"), in.PodIdentity.Namespace)...)
	if ns := in.PodIdentity.Namespace; slices.Contains(systemNamespaces, ns) || ns == in.Flux.Namespace {
		errs = append(errs, field.Invalid(p.Child("podIdentity", "namespace"), ns,
			"is a namespace the cluster or Flux owns: the function composes the controller's namespace, and deleting a claim would delete it"))
	}
	errs = append(errs, dnsSubdomain(p.Child("podIdentity", "serviceAccount"), in.PodIdentity.ServiceAccount)...)
	errs = append(errs, validateTags(p.Child("tags"), in.Tags)...)
	return errs
}

// systemNamespaces exist in every cluster before any claim, and must never
// be managed, nor deleted with one.
var systemNamespaces = []string{"kube-system", "kube-public", "kube-node-lease", "default"}

// reservedTag tells whether Karpenter or EKS own a tag key: Karpenter's
// EC2NodeClass refuses them, and they scope its controller policy.
func reservedTag(k string) bool {
	switch k {
	case "karpenter.sh/nodepool", "karpenter.sh/nodeclaim", "karpenter.k8s.aws/ec2nodeclass", "eks:eks-cluster-name":
		return true
	}
	return strings.HasPrefix(k, "kubernetes.io/cluster/")
}

// validateTags applies AWS's tag rules shared by IAM, SQS, EventBridge and EKS.
// AWS counts their lengths in Unicode characters, not bytes.
func validateTags(p *field.Path, tags map[string]string) field.ErrorList {
	var errs field.ErrorList
	if len(tags) > 40 {
		errs = append(errs, field.TooMany(p, len(tags), 40))
	}
	for k, v := range tags {
		kp := p.Key(k)
		switch {
		case !validTagKey(k):
			errs = append(errs, field.Invalid(kp, k, tagKeyRule))
		case strings.HasPrefix(strings.ToLower(k), "aws:"):
			errs = append(errs, field.Invalid(kp, k, "the aws: prefix is reserved by AWS"))
		case reservedTag(k):
			errs = append(errs, field.Invalid(kp, k, "Karpenter and EKS set this tag themselves; Karpenter refuses node classes that set it"))
		}
		if !validTagValue(v) {
			errs = append(errs, field.Invalid(kp, v, tagValueRule))
		}
	}
	return errs
}

// AWS's rules for a tag's key and value; AWS counts their lengths in
// Unicode characters, not bytes.
const (
	tagKeyRule   = "tag keys are 1-128 letters, digits, spaces and _.:/=+-@"
	tagValueRule = "tag values are up to 256 letters, digits, spaces and _.:/=+-@"
)

func validTagKey(k string) bool {
	return k != "" && utf8.RuneCountInString(k) <= 128 && tagCharacter.MatchString(k)
}

func validTagValue(v string) bool {
	return utf8.RuneCountInString(v) <= 256 && tagCharacter.MatchString(v)
}

// ordered sorts a refusal's errors by field path, then by type and detail.
// Several validators walk maps, whose order Go randomises, and a refusal
// must read the same on every call: it is the answer Crossplane shows and
// the function caches.
func ordered(errs field.ErrorList) field.ErrorList {
	slices.SortStableFunc(errs, func(a, b *field.Error) int {
		return cmp.Or(strings.Compare(a.Field, b.Field), strings.Compare(string(a.Type), string(b.Type)), strings.Compare(a.Detail, b.Detail))
	})
	return errs
}

// Settled is the TTL of the answer for a claim that waits on nothing
// (input.settledInterval, validated by Load).
func (c *Config) Settled() time.Duration {
	d, _ := time.ParseDuration(c.Input.SettledInterval)
	return d
}

// MinRunInterval is how long after a pass the access check runs again on
// a new run asked for (input.accessCheck.minRunInterval, validated by Load).
func (c *Config) MinRunInterval() time.Duration {
	d, _ := time.ParseDuration(c.Input.AccessCheck.MinRunInterval)
	return d
}
