//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/do-now/function-karpenter/internal/cluster"
)

// standInAWS is a stand-in for the AWS CLI and EC2 behind it, for the final check's script: with
// no credentials (E2E_IDENTITY empty: no Pod Identity association for the Pod) it fails as the
// CLI does; else its ec2 describe-instances lists the instance IDs the test wrote to
// E2E_INSTANCES (nothing when the file is empty or absent). It keeps every call in
// E2E_AWS_CALLS, after the identity it was made as. It answers nothing else.
const standInAWS = `#!/bin/sh
# A stand-in for the AWS CLI and EC2 (function-karpenter's e2e suite, e2e/finalcheck_test.go).
echo "${E2E_IDENTITY:-no credentials} $*" >>"$E2E_AWS_CALLS"
if [ -z "${E2E_IDENTITY:-}" ]; then echo "Unable to locate credentials. You can configure credentials by running \"aws configure\"." >&2; exit 253; fi
case "$1 $2" in
"ec2 describe-instances") cat "$E2E_INSTANCES" 2>/dev/null; exit 0 ;;
esac
echo "stand-in aws: unexpected call: $*" >&2
exit 2
`

// finalCheckKubelet plays, for the final check's Pod, the part of a kubelet kwok cannot: running
// its container. kwok reports the Pod Running; this runs the container's command as the claimed
// cluster holds it (the final check's script) on this machine, with the container's
// environment; the API server's address as a Pod finds it (KUBERNETES_SERVICE_HOST and _PORT);
// its ServiceAccount's token, projected as the kubelet would (bound to the Pod: TokenRequest),
// and the cluster's CA; and standInAWS for the AWS CLI. Its changes to the script's
// environment: a round every 2 seconds instead of 30 (FINAL_CHECK_SECONDS), and its
// readiness file in the Pod's own directory (LISTED_FILE). A Pod gone, its process is stopped, as a kubelet kills a deleted
// Pod's containers.
func (c *claimedCluster) finalCheckKubelet(ctx context.Context) {
	pods, err := c.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + cluster.FinalCheckName})
	if err != nil {
		return
	}
	live := map[types.UID]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		live[p.UID] = true
		if c.finalChecks[p.UID] != nil || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		run, err := c.runFinalCheck(ctx, p)
		if err != nil {
			fmt.Printf("e2e: claimed cluster %s: cannot run the final check's Pod %s: %v\n", c.name, p.Name, err)
			continue
		}
		c.finalChecks[p.UID] = run
	}
	for uid, run := range c.finalChecks {
		if !live[uid] {
			run.stop(time.Second)
			delete(c.finalChecks, uid)
		}
	}
}

func (c *claimedCluster) runFinalCheck(ctx context.Context, p *corev1.Pod) (*proc, error) {
	dir := filepath.Join(c.dir, "final-check-"+string(p.UID))
	sa, bin := filepath.Join(dir, "serviceaccount"), filepath.Join(dir, "bin")
	for _, d := range []string{sa, bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	// The Pod reaches the API server as its own ServiceAccount, through the token the kubelet
	// projects into it (automountServiceAccountToken): a token of that ServiceAccount bound to
	// the Pod, as the kubelet asks for one (TokenRequest).
	if p.Spec.AutomountServiceAccountToken == nil || !*p.Spec.AutomountServiceAccountToken {
		return nil, fmt.Errorf("the final check's Pod %s does not ask for its ServiceAccount's token", p.Name)
	}
	expiry := int64(3600)
	tok, err := c.kube.CoreV1().ServiceAccounts(p.Namespace).CreateToken(ctx, p.Spec.ServiceAccountName, &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{ExpirationSeconds: &expiry, BoundObjectRef: &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	// Its AWS: the stand-in, as the identity EKS Pod Identity gives its ServiceAccount
	// (podIdentity); where Karpenter's real controller runs (realKarpenter), the real AWS CLI
	// against the emulator, as a session of that identity's role (emulatedAWSEnv).
	awsCLI, awsEnv := []byte(standInAWS), []string(nil)
	identity, err := c.podIdentity(ctx, p)
	if err != nil {
		return nil, err
	}
	if c.realKarpenter {
		if awsCLI, awsEnv, err = c.emulatedAWSEnv(ctx, p); err != nil {
			return nil, err
		}
	}
	for path, b := range map[string][]byte{
		filepath.Join(sa, "token"): []byte(tok.Status.Token), filepath.Join(sa, "ca.crt"): c.ca.certPEM,
		filepath.Join(bin, "aws"): awsCLI,
	} {
		if err := os.WriteFile(path, b, 0o755); err != nil {
			return nil, err
		}
	}
	server, err := url.Parse(c.cfg.Host)
	if err != nil {
		return nil, err
	}
	ctr := p.Spec.Containers[0]
	env := []string{"PATH=" + bin + ":/usr/bin:/bin", "SERVICE_ACCOUNT_DIR=" + sa, "FINAL_CHECK_SECONDS=2", "LISTED_FILE=" + filepath.Join(dir, "listed"),
		"KUBERNETES_SERVICE_HOST=" + server.Hostname(), "KUBERNETES_SERVICE_PORT=" + server.Port(),
		"E2E_INSTANCES=" + c.instances(), "E2E_AWS_CALLS=" + filepath.Join(dir, "aws-calls"), "E2E_IDENTITY=" + identity}
	for _, e := range ctr.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	// The container's HOME is /tmp, its own emptyDir: here, a directory of the Pod's own.
	env = append(append(env, "HOME="+dir), awsEnv...)
	return startProc(c.logDir, "final-check-"+p.Name, env, ctr.Command[0], ctr.Command[1:]...)
}

// emulatedAWSEnv is the AWS CLI of Pod p where the emulator is the cluster's AWS: the real AWS
// CLI v2 (E2E_AWS_CLI, Debian's awscli: make e2e-test installs it), called through a one-line
// script that points it at the emulator, since 2.9.19 reads no AWS_ENDPOINT_URL (tried on this
// machine: it called ec2.eu-west-3.amazonaws.com) and takes --endpoint-url only; and the
// environment of a session of the role EKS Pod Identity gives the Pod's ServiceAccount, from the
// emulator's STS AssumeRole (the stand-in for the Pod Identity agent, as for Karpenter's
// controller). A Pod no Ready association names gets no credentials, as in EKS.
func (c *claimedCluster) emulatedAWSEnv(ctx context.Context, p *corev1.Pod) ([]byte, []string, error) {
	cli := os.Getenv("E2E_AWS_CLI")
	if cli == "" {
		return nil, nil, fmt.Errorf("E2E_AWS_CLI must be set: run the suite with `make e2e-test`")
	}
	script := []byte("#!/bin/sh\nexec " + cli + " --endpoint-url \"$AWS_ENDPOINT_URL\" \"$@\"\n")
	env := []string{"AWS_ENDPOINT_URL=" + cp.aws.endpoint, "AWS_EC2_METADATA_DISABLED=true"}
	roleARN, err := c.podIdentityRole(ctx, p)
	if err != nil || roleARN == "" {
		return script, env, err
	}
	session, err := cp.aws.sts.AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: aws.String(roleARN),
		RoleSessionName: aws.String("eks-" + c.name + "-" + string(p.UID)[:8])})
	if err != nil {
		return nil, nil, fmt.Errorf("a session of %s for Pod %s: %w", roleARN, p.Name, err)
	}
	return script, append(env, "AWS_ACCESS_KEY_ID="+aws.ToString(session.Credentials.AccessKeyId),
		"AWS_SECRET_ACCESS_KEY="+aws.ToString(session.Credentials.SecretAccessKey),
		"AWS_SESSION_TOKEN="+aws.ToString(session.Credentials.SessionToken)), nil
}

// awsCalls is how much the final checks' stand-in AWS CLI has been asked so far, in the claimed
// cluster's Pods (the bytes of their E2E_AWS_CALLS files): it grows with every round that lists.
func (c *claimedCluster) awsCalls() int64 {
	files, _ := filepath.Glob(filepath.Join(c.dir, "final-check-*", "aws-calls"))
	var n int64
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			n += st.Size()
		}
	}
	return n
}

// awsIdentities are the identities the final checks' stand-in AWS CLI was called as in the
// claimed cluster's Pods, each with how many calls.
func (c *claimedCluster) awsIdentities() map[string]int {
	files, _ := filepath.Glob(filepath.Join(c.dir, "final-check-*", "aws-calls"))
	out := map[string]int{}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if line != "" {
				out[strings.Fields(line)[0]]++
			}
		}
	}
	return out
}

// instances is the file where the test lists the instances EC2 still runs for the claimed
// cluster, as standInAWS reads it.
func (c *claimedCluster) instances() string { return filepath.Join(c.dir, "ec2-instances") }

// uninstallPastAnInstance deletes c while EC2 still lists an instance of the claimed cluster's
// that Karpenter let go of: the uninstall must stop at the final check, whose Deployment is
// marked deleted and names the instance, with the controller's AWS access and the final check's
// namespace still there. While it holds, each of outages stops a part and starts it again, one
// after the other, and it still holds. Then the instance goes, and the uninstall completes; the
// AWS access goes only after. It returns the deletions the fake provider saw.
func uninstallPastAnInstance(t *testing.T, c *karpenter, claimed *claimedCluster, outages []claimedOutage) []deletion {
	ctx := t.Context()
	const leaked = "i-0e2e0000000000001"
	before, _ := c.composed()
	namespace, _, _ := unstructured.NestedString(before["final-check"].Object, "spec", "forProvider", "manifest", "metadata", "namespace")
	if err := os.WriteFile(claimed.instances(), []byte(leaked+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	start, mark := time.Now(), fake.deletionMark()
	c.delete()
	deployments := claimed.kube.AppsV1().Deployments(namespace)
	var named time.Time
	c.wait(5*time.Minute, "the final check marked deleted and naming "+leaked, func() (bool, error) {
		d, err := deployments.Get(ctx, cluster.FinalCheckName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if d.DeletionTimestamp != nil && d.Annotations[cluster.FinalCheckLeft] == leaked {
			named = time.Now()
			return true, nil
		}
		return false, nil
	})
	t.Logf("the final check holds the uninstall %.0fs after the deletion, naming %s", named.Sub(start).Seconds(), leaked)
	// holds checks that the uninstall stays at the final check.
	holds := func(when string) {
		t.Helper()
		resources, _ := c.composed()
		for _, name := range []string{"controller-role", "controller-role-policy", "pod-identity-association", "controller-namespace",
			"controller-service-account", "final-check", "final-check-rbac", "final-check-rbac-binding",
			"final-check-service-account", "final-check-role", "final-check-role-policy", "final-check-pod-identity-association"} {
			r, ok := resources[name]
			switch {
			case !ok:
				t.Errorf("%s: %s is gone while EC2 still lists %s", when, name, leaked)
			case name != "final-check" && r.GetDeletionTimestamp() != nil:
				t.Errorf("%s: %s is being deleted while EC2 still lists %s", when, name, leaked)
			}
		}
		if _, err := deployments.Get(ctx, cluster.FinalCheckName, metav1.GetOptions{}); err != nil {
			t.Errorf("%s: the final check's Deployment went while EC2 still lists %s: %v", when, leaked, err)
		}
		if _, ok := resources["controller-kustomization"]; ok {
			t.Errorf("%s: the final check holds the uninstall while the controller's Kustomization is still there", when)
		}
	}
	// A few of its rounds: the uninstall stays there.
	time.Sleep(10 * time.Second)
	holds("held")
	// Every listing was made as the final check's own role, through its own association: the
	// session EKS Pod Identity gives its ServiceAccount (podIdentity).
	own := "assumed-role/" + claimed.name + "-karpenter-final/"
	identities := claimed.awsIdentities()
	if len(identities) == 0 {
		t.Errorf("the final check made no AWS call while holding the uninstall")
	}
	for identity, n := range identities {
		if !strings.Contains(identity, own) {
			t.Errorf("the final check listed the instances %d times as %s, want the final check's own role (%s)", n, identity, own)
		}
	}
	if len(outages) > 0 {
		calls := claimed.awsCalls()
		for _, o := range outages {
			back := o.outage()
			fmt.Printf("e2e: %-40s %s killed mid-uninstall, back %s\n", t.Name(), o.what, back.Format(time.TimeOnly))
		}
		// Held after the faults only means something once the final check has read its
		// Deployment and asked EC2 again.
		c.wait(2*time.Minute, "the final check asking EC2 again after the faults", func() (bool, error) {
			return claimed.awsCalls() > calls, nil
		})
		holds("after the parts stopped came back")
	}

	released := time.Now()
	if err := os.WriteFile(claimed.instances(), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	deletions := c.waitGone(start, mark)
	fmt.Printf("e2e: %-40s the uninstall went on %.0fs after EC2 listed no instance\n", t.Name(), time.Since(released).Seconds())
	for _, d := range deletions {
		// The AWS access of the controller and of the final check (not the Usages naming them,
		// which Crossplane deletes with everything else at once).
		access := strings.HasPrefix(d.name, "controller-role") || strings.HasPrefix(d.name, "final-check-role") ||
			d.name == "pod-identity-association" || d.name == "final-check-pod-identity-association"
		if d.xr == c.xr && access {
			if d.at.Before(released) {
				t.Errorf("%s deleted at %s, before EC2 listed no instance (%s)", d.name, d.at.Format(time.RFC3339), released.Format(time.RFC3339))
			}
		}
	}
	return deletions
}
