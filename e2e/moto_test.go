//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/do-now/function-karpenter/internal/ami"
)

// motoInstall is how a machine without the AWS emulator gets it (docs/testing.md).
const motoInstall = "pip install 'moto[server]'"

// emulatedAWS is the AWS of one shard: a moto_server on loopback (moto 5.2.1, ../shared/TOOLCHAIN.md)
// and the one set of SDK clients the fake provider-aws and the seeding share. IAM is global; the
// regional services are asked in the region a call names (withRegion).
type emulatedAWS struct {
	endpoint string // http://127.0.0.1:PORT
	account  string
	iam      *iam.Client
	sqs      *sqs.Client
	events   *eventbridge.Client
	eks      *eks.Client
	ec2      *ec2.Client
	sts      *sts.Client
}

// startMoto starts the AWS emulator on a loopback port of its own, its log in logDir/moto.log,
// every resource in account (MOTO_ACCOUNT_ID: moto 5.2.1 core/responses.py, get_current_account,
// reads it before anything a request says), and waits until it answers: 1-2 s idle, up to 10 s
// under load (../shared/TOOLCHAIN.md), here within three minutes (a run niced beside a whole
// make test waited over one). It is moto's own server run by
// e2e/moto/launch.py, which corrects what moto 5.2.1 gets wrong of the calls Karpenter's real
// controller makes and seeds what AWS itself owns (its comment says each, with both sources):
// here the EKS AMIs of two releases (seededReleases), and their public SSM parameters, in every
// region the shipped tenancies declare a cluster in (amiSeed). Its state is its memory: it is
// not started again should it exit (a restarted moto would have forgotten every resource).
func startMoto(ctx context.Context, logDir, account string) (*proc, *emulatedAWS, error) {
	if err := exec.Command("python3", "-c", "import moto.server").Run(); err != nil {
		return nil, nil, fmt.Errorf("the AWS emulator moto is not installed for python3 (%v): install it with %s", err, motoInstall)
	}
	launcher, err := filepath.Abs(filepath.Join("moto", "launch.py"))
	if err != nil {
		return nil, nil, err
	}
	images, seed, err := amiSeed(logDir)
	if err != nil {
		return nil, nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, nil, err
	}
	p, err := startProc(logDir, "moto", []string{"MOTO_ACCOUNT_ID=" + account, "MOTO_AMIS_PATH=" + images}, "python3",
		launcher, "--host", "127.0.0.1", "--port", fmt.Sprint(port), "--seed", seed)
	if err != nil {
		return nil, nil, err
	}
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	// moto's own API (moto 5.2.1 moto_api/_internal/urls.py: /moto-api/ is its dashboard).
	if err := waitHealthy(ctx, 3*time.Minute, "moto answering", p, endpoint+"/moto-api/"); err != nil {
		p.stop(time.Second)
		return nil, nil, err
	}
	return p, newEmulatedAWS(endpoint, account), nil
}

// seededAMIs are the images the emulator holds (amiSeed), by ID: the release (vYYYYMMDD) of each.
var seededAMIs = map[string]string{}

// amisOf are the IDs of the seeded images of release (vYYYYMMDD).
func amisOf(release string) []string {
	var ids []string
	for id, r := range seededAMIs {
		if r == release {
			ids = append(ids, id)
		}
	}
	return slices.Sorted(slices.Values(ids))
}

// seededReleases are the AMI releases the emulator publishes: the shipped Composition's pin
// (nodes.defaultAmiAlias) and the release before it (internal/ami's list), which a cluster starts
// on to be moved to the pin.
func seededReleases() (previous, latest string, err error) {
	input, err := shippedInput(claimAPI)
	if err != nil {
		return "", "", err
	}
	pin, _, _ := unstructured.NestedString(input, "nodes", "defaultAmiAlias")
	latest = strings.TrimPrefix(pin, ami.Prefix)
	i := slices.IndexFunc(ami.Releases, func(r ami.Release) bool { return r.Name == latest })
	if i < 1 {
		return "", "", fmt.Errorf("the shipped nodes.defaultAmiAlias %q is no release after another of internal/ami's list", pin)
	}
	return ami.Releases[i-1].Name, latest, nil
}

// mustSeededReleases is seededReleases, in a test.
func mustSeededReleases(t *testing.T) (previous, latest string) {
	t.Helper()
	previous, latest, err := seededReleases()
	if err != nil {
		t.Fatal(err)
	}
	return previous, latest
}

// amiSeed writes into dir the emulator's images (MOTO_AMIS_PATH, e2e/moto/launch.py says the
// format) and its public SSM parameters (--seed): for both seeded releases (seededReleases),
// Kubernetes clusterVersion and both architectures, the standard AL2023 EKS AMI and the
// parameter Karpenter resolves the alias through, in every region a cluster of a shipped tenancy
// is in: /aws/service/eks/optimized-ami/MINOR/amazon-linux-2023/ARCH/standard/
// amazon-eks-node-al2023-ARCH-standard-MINOR-RELEASE/image_id (karpenter-provider-aws v1.14.3
// pkg/providers/amifamily/al2023.go, DescribeImageQuery; internal/ami says the same of v1.15.0).
// Images are released at midnight of their release's date (its name, vYYYYMMDD).
func amiSeed(dir string) (images, seed string, err error) {
	regions := map[string]bool{}
	for _, a := range apis {
		input, err := shippedInput(a)
		if err != nil {
			return "", "", err
		}
		for _, c := range declaredClusters(input) {
			regions[c.region] = true
		}
	}
	var imageList, params []map[string]any
	previous, latest, err := seededReleases()
	if err != nil {
		return "", "", err
	}
	for _, release := range []string{previous, latest} {
		created, err := time.Parse("20060102", strings.TrimPrefix(release, "v"))
		if err != nil {
			return "", "", fmt.Errorf("%s is no release: %w", release, err)
		}
		for _, arch := range []string{"x86_64", "arm64"} {
			name := fmt.Sprintf("amazon-eks-node-al2023-%s-standard-%s-%s", arch, clusterVersion, release)
			id := fmt.Sprintf("ami-%017x", fnv64(name))
			seededAMIs[id] = release
			imageList = append(imageList, map[string]any{"ami_id": id, "name": name, "architecture": arch, "state": "available",
				"public": true, "creation_date": created.UTC().Format("2006-01-02T15:04:05.000Z")})
			for _, region := range slices.Sorted(maps.Keys(regions)) {
				params = append(params, map[string]any{"region": region, "value": id,
					"name": fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/standard/%s/image_id", clusterVersion, arch, name)})
			}
		}
	}
	images, seed = filepath.Join(dir, "moto-images.json"), filepath.Join(dir, "moto-seed.json")
	for path, v := range map[string]any{images: imageList, seed: map[string]any{"ssmParameters": params}} {
		b, err := json.MarshalIndent(v, "", "  ")
		if err == nil {
			err = os.WriteFile(path, b, 0o644)
		}
		if err != nil {
			return "", "", err
		}
	}
	return images, seed, nil
}

// fnv64 is the 64-bit FNV-1a hash of s: an image ID of its own for each name.
func fnv64(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// newEmulatedAWS is the SDK clients of an emulator at endpoint. moto checks no signature unless
// told to (moto 5.2.1 settings.py, INITIAL_NO_AUTH_ACTION_COUNT: infinite by default); the
// credentials only have to be there. A call retries connection errors alone, briefly (a moto
// busy on two shared cores can drop one): every other answer, a refusal above all, is moto's
// answer and is returned at once (aws-sdk-go-v2 v1.41.7 aws/retry/retryable_error.go,
// RetryableConnectionError; no retry quota, aws/ratelimit/none.go).
func newEmulatedAWS(endpoint, account string) *emulatedAWS {
	cfg := aws.Config{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "e2e", SecretAccessKey: "e2e", Source: "e2e"}, nil
		}),
		HTTPClient: &http.Client{Timeout: 30 * time.Second},
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = 6
				o.MaxBackoff = time.Second
				o.RateLimiter = ratelimit.None
				o.Retryables = []retry.IsErrorRetryable{retry.RetryableConnectionError{}}
			})
		},
	}
	return &emulatedAWS{
		endpoint: endpoint,
		account:  account,
		iam:      iam.NewFromConfig(cfg),
		sqs:      sqs.NewFromConfig(cfg),
		events:   eventbridge.NewFromConfig(cfg),
		eks:      eks.NewFromConfig(cfg),
		ec2:      ec2.NewFromConfig(cfg),
		sts:      sts.NewFromConfig(cfg),
	}
}

// sqsRegion, eventsRegion and eksRegion have a call made in region: moto keeps each region's
// resources apart, by the region of the request's signature (moto 5.2.1 core/responses.py,
// get_region_from_url).
func sqsRegion(region string) func(*sqs.Options) { return func(o *sqs.Options) { o.Region = region } }

func eventsRegion(region string) func(*eventbridge.Options) {
	return func(o *eventbridge.Options) { o.Region = region }
}

func eksRegion(region string) func(*eks.Options) { return func(o *eks.Options) { o.Region = region } }

// A declaredCluster is a cluster the platform's tenancy declares (the Composition's input,
// tenancy.clusters[]): what the account holds for it before any claim, as the platform's
// prerequisites would have created it.
type declaredCluster struct {
	name, account, region string
	// nodeRoleARN and instanceProfile: the existing nodes' identity (nodeIdentity).
	nodeRoleARN, instanceProfile string
	// providerConfig is the provider-kubernetes config that reaches it (kubernetesProviderConfig,
	// the cluster's name by default).
	providerConfig string
}

// declaredClusters reads a tenancy's clusters (the input's tenancy.clusters).
func declaredClusters(input map[string]any) []declaredCluster {
	var out []declaredCluster
	clusters, _ := input["tenancy"].(map[string]any)["clusters"].([]any)
	for _, c := range clusters {
		m, _ := c.(map[string]any)
		str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
		identity, _ := m["nodeIdentity"].(map[string]any)
		d := declaredCluster{name: str(m, "name"), account: str(m, "account"), region: str(m, "region"),
			nodeRoleARN: str(identity, "roleArn"), instanceProfile: str(identity, "instanceProfile"),
			providerConfig: str(m, "kubernetesProviderConfig")}
		if d.providerConfig == "" {
			d.providerConfig = strings.ReplaceAll(strings.ToLower(d.name), "_", "-")
		}
		out = append(out, d)
	}
	return out
}

// clusterVersion is the Kubernetes version of every claimed EKS cluster the suite seeds.
const clusterVersion = "1.34"

// seed creates in the emulator what the platform's prerequisites hold for each cluster: the
// existing nodes' role (trusted by EC2) in its instance profile, the cluster's own role (trusted
// by EKS) and the EKS cluster (CreateCluster, version clusterVersion). What exists already is
// kept: clusters of two tenancies may share a node role. The emulator holds one account (its
// MOTO_ACCOUNT_ID): a cluster of another is refused.
func (a *emulatedAWS) seed(ctx context.Context, clusters ...declaredCluster) error {
	for _, c := range clusters {
		if c.account != a.account {
			return fmt.Errorf("cluster %s is in account %q; the emulator holds %q alone", c.name, c.account, a.account)
		}
		path, role, ok := roleFromARN(c.nodeRoleARN)
		if !ok {
			return fmt.Errorf("cluster %s: node role %q is not a role ARN", c.name, c.nodeRoleARN)
		}
		if _, err := a.createRole(ctx, path, role, trustedBy("ec2.amazonaws.com")); err != nil {
			return fmt.Errorf("cluster %s: %w", c.name, err)
		}
		_, err := a.iam.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(c.instanceProfile)})
		if err == nil {
			_, err = a.iam.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{
				InstanceProfileName: aws.String(c.instanceProfile), RoleName: aws.String(role)})
		}
		if err != nil && !isAWSError[*iamtypes.EntityAlreadyExistsException](err) {
			return fmt.Errorf("cluster %s: instance profile %s: %w", c.name, c.instanceProfile, err)
		}
		clusterRole, err := a.createRole(ctx, "/", c.name+"-eks-cluster", trustedBy("eks.amazonaws.com"))
		if err != nil {
			return fmt.Errorf("cluster %s: %w", c.name, err)
		}
		_, err = a.eks.CreateCluster(ctx, &eks.CreateClusterInput{Name: aws.String(c.name), RoleArn: aws.String(clusterRole),
			Version: aws.String(clusterVersion), ResourcesVpcConfig: &ekstypes.VpcConfigRequest{}}, eksRegion(c.region))
		if err != nil && !isAWSError[*ekstypes.ResourceInUseException](err) {
			return fmt.Errorf("cluster %s: EKS cluster: %w", c.name, err)
		}
	}
	return nil
}

// createRole creates an IAM role, or finds the one of that name; it returns its ARN.
func (a *emulatedAWS) createRole(ctx context.Context, path, name, trust string) (string, error) {
	out, err := a.iam.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(name), Path: aws.String(path), AssumeRolePolicyDocument: aws.String(trust)})
	if err == nil {
		return aws.ToString(out.Role.Arn), nil
	}
	if !isAWSError[*iamtypes.EntityAlreadyExistsException](err) {
		return "", fmt.Errorf("role %s: %w", name, err)
	}
	got, err := a.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("role %s: %w", name, err)
	}
	return aws.ToString(got.Role.Arn), nil
}

// trustedBy is a trust policy letting an AWS service assume a role.
func trustedBy(service string) string {
	return fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":%q},"Action":"sts:AssumeRole"}]}`, service)
}

// roleFromARN splits arn:aws:iam::ACCOUNT:role/PATH/NAME into its path ("/PATH/", "/" without
// one) and name.
func roleFromARN(arn string) (path, name string, ok bool) {
	_, rest, ok := strings.Cut(arn, ":role/")
	if !ok || rest == "" {
		return "", "", false
	}
	i := strings.LastIndex(rest, "/")
	return "/" + rest[:i+1], rest[i+1:], true
}

// isAWSError tells whether err is, or wraps, the SDK's error of type E.
func isAWSError[E error](err error) bool {
	var e E
	return errors.As(err, &e)
}
