package cluster

import (
	"encoding/json"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/do-now/function-karpenter/internal/policy"
)

// TestFinalCheckNeedsOnlyItsOwnPolicy holds the final check's call against
// its own role's policy, as the preflight's calls are held against the
// controller's: the policy grants that call in the cluster's region, and
// none of the controller's other calls (launching, terminating, reading
// the queue), nor the call itself in another region.
func TestFinalCheckNeedsOnlyItsOwnPolicy(t *testing.T) {
	for name, c := range preflightConfigs(t) {
		doc := policy.FinalCheck(c.Account.Region).JSON()
		call := FinalCheckCall(c)
		if named := call.Args[0] + ":" + operation(call.Args[1]); len(call.Authorizations) != 1 || call.Authorizations[0].Action != named {
			t.Errorf("%s: aws %s %s declares %v, want %s", name, call.Args[0], call.Args[1], call.Authorizations, named)
		}
		for _, a := range call.Authorizations {
			if sid := authorizes(t, doc, c.Account.Region, a); sid == "" {
				t.Errorf("%s: %s on %s (context %v) is granted by no statement of the final check's policy", name, a.Action, a.Resource, a.Context)
			}
			elsewhere := a
			elsewhere.Context = map[string][]string{"aws:RequestedRegion": {"ap-south-2"}}
			if sid := authorizes(t, doc, "ap-south-2", elsewhere); sid != "" {
				t.Errorf("%s: %s in another region is granted by %s", name, a.Action, sid)
			}
		}
		_, calls := Preflight(c)
		for _, other := range calls {
			for _, a := range other.Authorizations {
				if a.Action == "ec2:DescribeInstances" {
					continue
				}
				if sid := authorizes(t, doc, c.Account.Region, a); sid != "" {
					t.Errorf("%s: the final check's policy grants the controller's %s on %s (%s)", name, a.Action, a.Resource, sid)
				}
			}
		}
	}
}

// TestFinalCheckObjects: the Deployment holds the uninstall (its
// finalizer) and runs where the controller runs, as its own ServiceAccount
// for the Kubernetes API (its RBAC lets it read and patch that Deployment,
// and nothing else) and for AWS (its own Pod Identity association and role,
// package awsres); nothing of the controller's ServiceAccount, bound to
// Karpenter's cluster roles and the controller role, is its. It is Ready
// once it has listed the instances.
func TestFinalCheckObjects(t *testing.T) {
	c := load(t, map[string]any{})
	m := Manifests(c)
	d := m[FinalCheck].(*appsv1.Deployment)
	ns, controllerSA := c.Input.PodIdentity.Namespace, c.Input.PodIdentity.ServiceAccount
	if d.Name != FinalCheckName || d.Namespace != ns || !slices.Equal(d.Finalizers, []string{FinalCheckFinalizer}) {
		t.Errorf("Deployment %s/%s with finalizers %v, want %s/%s with %s", d.Namespace, d.Name, d.Finalizers, ns, FinalCheckName, FinalCheckFinalizer)
	}
	pod := d.Spec.Template.Spec
	check := m[CheckName(c)].(*corev1.Pod).Spec
	type identity struct {
		ServiceAccountName           string
		AutomountServiceAccountToken *bool
		Volumes                      []corev1.Volume
		Mounts                       []corev1.VolumeMount
	}
	yes := true
	want := identity{
		ServiceAccountName:           FinalCheckName,
		AutomountServiceAccountToken: &yes,
		Volumes:                      []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		Mounts:                       []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
	}
	got := identity{pod.ServiceAccountName, pod.AutomountServiceAccountToken, pod.Volumes, pod.Containers[0].VolumeMounts}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the final check's Pod must reach AWS and the API as its own ServiceAccount, through the token Kubernetes mounts, and mount nothing of the controller's (-want +got):\n%s", diff)
	}
	if pod.ServiceAccountName == controllerSA {
		t.Errorf("the final check's Pod runs as the controller's ServiceAccount %s", controllerSA)
	}
	if !strings.Contains(FinalCheckScript(c), "sa=${SERVICE_ACCOUNT_DIR:-"+FinalCheckTokenDir+"}") {
		t.Errorf("the final check's script does not read its token where Kubernetes mounts it, %s", FinalCheckTokenDir)
	}
	probe := pod.Containers[0].ReadinessProbe
	if probe == nil || probe.Exec == nil || !strings.Contains(strings.Join(probe.Exec.Command, " "), "test -e "+FinalCheckListed) ||
		!strings.Contains(FinalCheckScript(c), "listed=${LISTED_FILE:-"+FinalCheckListed+"}") {
		t.Errorf("the final check's Pod must be Ready only once its script has listed the instances (%s): probe %v", FinalCheckListed, probe)
	}
	// What the API server would default, written out (the e2e suite's TestKubernetesFacts holds
	// these against kubernetes' SetDefaults_Probe): a 0 there would never match the 3 the claimed
	// cluster returns, and the step would wait for ever.
	if probe != nil && [4]int32{probe.TimeoutSeconds, probe.PeriodSeconds, probe.SuccessThreshold, probe.FailureThreshold} != [4]int32{1, 10, 1, 3} {
		t.Errorf("the readiness probe leaves a field to the API server's defaults: %+v", probe)
	}
	if !cmp.Equal(pod.NodeSelector, check.NodeSelector) || !cmp.Equal(pod.Tolerations, check.Tolerations) || !cmp.Equal(pod.Affinity, check.Affinity) {
		t.Errorf("the final check is placed unlike the access check (where the controller runs): %v %v %v", pod.NodeSelector, pod.Tolerations, pod.Affinity)
	}
	if pod.RestartPolicy != corev1.RestartPolicyAlways || pod.ActiveDeadlineSeconds != nil {
		t.Errorf("the final check's Pod must keep running: restart %s, deadline %v", pod.RestartPolicy, pod.ActiveDeadlineSeconds)
	}
	if got := pod.Containers[0].Command; len(got) != 3 || got[2] != FinalCheckScript(c) {
		t.Errorf("the final check's container runs %v, want its script", got)
	}

	sa, ok := m[FinalCheckServiceAccount].(*corev1.ServiceAccount)
	if !ok || sa.Name != FinalCheckName || sa.Namespace != ns {
		t.Fatalf("%s: %v, want ServiceAccount %s/%s", FinalCheckServiceAccount, m[FinalCheckServiceAccount], ns, FinalCheckName)
	}
	if _, ok := m["final-check-token"]; ok {
		t.Errorf("a token Secret is composed: the Pod's own ServiceAccount's token is mounted by Kubernetes")
	}
	role := m[FinalCheckRBAC].(*rbacv1.Role)
	rules := []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, ResourceNames: []string{FinalCheckName}, Verbs: []string{"get", "patch"}}}
	if diff := cmp.Diff(rules, role.Rules); diff != "" || role.Namespace != ns {
		t.Errorf("Role %s/%s grants more or less than reading and patching the final check's Deployment (-want +got):\n%s", role.Namespace, role.Name, diff)
	}
	binding := m[FinalCheckRBACBinding].(*rbacv1.RoleBinding)
	if diff := cmp.Diff([]rbacv1.Subject{{Kind: "ServiceAccount", Name: FinalCheckName, Namespace: ns}}, binding.Subjects); diff != "" ||
		binding.RoleRef != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name}) {
		t.Errorf("RoleBinding %v, want the Role bound to the final check's own ServiceAccount, not the controller's (-want +got subjects):\n%s", binding.RoleRef, diff)
	}
}

// apiStandIn is a stand-in for the claimed cluster's API server, for the
// final check's script: it serves the final check's Deployment's metadata,
// marked deleted or not, to the script's ServiceAccount token, and keeps
// every patch. The e2e suite runs the script against a real one
// (e2e/claimed_test.go).
type apiStandIn struct {
	mu       sync.Mutex
	reads    int
	deleting bool
	patches  []patch
	refused  []string
}

func (a *apiStandIn) read() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reads
}

func (a *apiStandIn) patched() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.patches) > 0
}

type patch struct {
	ContentType string
	Body        map[string]any
}

func (a *apiStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	const path = "/apis/apps/v1/namespaces/karpenter/deployments/" + FinalCheckName
	if r.URL.Path != path || r.Header.Get("Authorization") != "Bearer the-token" {
		a.refused = append(a.refused, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	switch r.Method {
	case http.MethodGet:
		a.reads++
		if r.Header.Get("Accept") != "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1" {
			a.refused = append(a.refused, "GET without asking for metadata only: "+r.Header.Get("Accept"))
		}
		meta := map[string]any{"name": FinalCheckName, "namespace": "karpenter", "finalizers": []string{FinalCheckFinalizer}}
		if a.deleting {
			meta["deletionTimestamp"] = "2026-12-03T07:00:00Z"
		}
		body := map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": meta}
		// Pretty-printed for curl, as kube-apiserver answers it
		// (k8s.io/apiserver v0.35.4 pkg/endpoints/handlers/negotiation,
		// isPrettyPrint: a User-Agent starting with curl).
		b, _ := json.Marshal(body)
		if strings.HasPrefix(r.UserAgent(), "curl") {
			b, _ = json.MarshalIndent(body, "", "  ")
		}
		_, _ = w.Write(b)
	case http.MethodPatch:
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			a.refused = append(a.refused, "PATCH that is not JSON: "+string(b))
		}
		a.patches = append(a.patches, patch{r.Header.Get("Content-Type"), body})
		_, _ = w.Write([]byte(`{}`))
	default:
		a.refused = append(a.refused, r.Method)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// TestFinalCheckScript runs the final check's script with /bin/sh, curl,
// the fake aws and the API server stand-in: while its Deployment lives it
// lists the instances once, to prove its AWS identity (its readiness file),
// or each round until that works, and patches nothing; once the Deployment is marked deleted, it lists the
// instances as Karpenter's List does and names those left on the
// Deployment, or says it cannot list them (an error, or an answer that is
// no list of instance IDs, which never reaches the patch), and removes its
// finalizer, and only its own, once none is left.
func TestFinalCheckScript(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatalf("the final check's script needs curl, as its image has it: %v", err)
	}
	c := load(t, map[string]any{})
	left := func(v string) patch {
		return patch{"application/merge-patch+json", map[string]any{"metadata": map[string]any{"annotations": map[string]any{FinalCheckLeft: v}}}}
	}
	for name, tc := range map[string]struct {
		deleting bool
		env      []string
		want     patch // the first patch; none when the Deployment lives
		lists    bool
		// listings is how many times a living Deployment's check lists in
		// ten rounds, and ready whether it wrote its readiness file.
		listings int
		ready    bool
	}{
		"Living":           {deleting: false, env: []string{"FAKE_INSTANCES=i-0a1"}, lists: true, listings: 1, ready: true},
		"LivingCannotList": {deleting: false, env: []string{"FAIL=describe-instances", "ANSWER=An error occurred (UnauthorizedOperation)"}, lists: true, listings: 2},
		"InstancesLeft":    {deleting: true, env: []string{"FAKE_INSTANCES=i-0a1 i-0b2"}, want: left("i-0a1 i-0b2"), lists: true},
		"NotInstanceIDs":   {deleting: true, env: []string{`FAKE_INSTANCES=i-0a1 "}},"x":{"y":"z`}, want: left("unknown: ec2 describe-instances answered no instance IDs, see the Pod log"), lists: true},
		"CannotList":       {deleting: true, env: []string{"FAIL=describe-instances", "ANSWER=An error occurred (UnauthorizedOperation)"}, want: left("unknown: ec2 describe-instances failed, see the Pod log"), lists: true},
		"NoInstanceLeft":   {deleting: true, want: patch{"application/strategic-merge-patch+json", map[string]any{"metadata": map[string]any{"$deleteFromPrimitiveList/finalizers": []any{FinalCheckFinalizer}}}}, lists: true},
	} {
		t.Run(name, func(t *testing.T) {
			api := &apiStandIn{deleting: tc.deleting}
			srv := httptest.NewTLSServer(api)
			defer srv.Close()
			sa, bin, state := t.TempDir(), t.TempDir(), t.TempDir()
			listed := filepath.Join(state, "listed")
			ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
			must(t, os.WriteFile(filepath.Join(sa, "ca.crt"), ca, 0o644))
			must(t, os.WriteFile(filepath.Join(sa, "token"), []byte("the-token"), 0o644))
			self, err := os.Executable()
			must(t, err)
			must(t, os.Symlink(self, filepath.Join(bin, "aws")))
			host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
			curl, _ := exec.LookPath("curl")
			cmd := exec.Command("/bin/sh", "-c", FinalCheckScript(c))
			cmd.Env = append([]string{"PATH=" + bin + ":" + filepath.Dir(curl) + ":/usr/bin:/bin", "SERVICE_ACCOUNT_DIR=" + sa,
				"KUBERNETES_SERVICE_HOST=" + host, "KUBERNETES_SERVICE_PORT=" + port, "FINAL_CHECK_SECONDS=0.1",
				"FAKE_AWS_STATE=" + state, "AWS_REGION=" + c.Spec.Cluster.Region, "HOME=" + t.TempDir(), "LISTED_FILE=" + listed}, tc.env...)
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			must(t, cmd.Start())
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

			// A living Deployment: ten rounds (reads of its Deployment). A
			// deleted one: until the first patch.
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && !(tc.deleting && api.patched()) && !(!tc.deleting && api.read() >= 10); {
				time.Sleep(50 * time.Millisecond)
			}
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			api.mu.Lock()
			defer api.mu.Unlock()
			if len(api.refused) > 0 {
				t.Errorf("requests the API server refuses: %v\n%s", api.refused, out.String())
			}
			switch {
			case !tc.deleting && len(api.patches) > 0:
				t.Errorf("patched a living Deployment: %v", api.patches)
			case tc.deleting && len(api.patches) == 0:
				t.Errorf("no patch once the Deployment is marked deleted; output:\n%s", out.String())
			case tc.deleting:
				if diff := cmp.Diff(tc.want, api.patches[0]); diff != "" {
					t.Errorf("first patch (-want +got):\n%s", diff)
				}
			}
			calls, _ := os.ReadFile(filepath.Join(state, "describe-instances"))
			if lists := len(calls) > 0; lists != tc.lists {
				t.Fatalf("listed the instances: %v, want %v; output:\n%s", lists, tc.lists, out.String())
			}
			if n := strings.Count(string(calls), "\n"); !tc.deleting && (n < tc.listings || tc.listings == 1 && n != 1) {
				t.Errorf("a living Deployment's check listed %d times in its rounds, want %d%s; output:\n%s", n, tc.listings, map[bool]string{true: "", false: " or more"}[tc.listings == 1], out.String())
			}
			if _, err := os.Stat(listed); !tc.deleting && (err == nil) != tc.ready {
				t.Errorf("readiness file written: %v, want %v; output:\n%s", err == nil, tc.ready, out.String())
			}
			if tc.lists {
				var args []string
				must(t, json.Unmarshal([]byte(strings.SplitN(string(calls), "\n", 2)[0]), &args))
				if diff := cmp.Diff(FinalCheckCall(c).Args, args); diff != "" {
					t.Errorf("the script's call is not FinalCheckCall's (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
