//go:build e2e

package e2e

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log"
	"maps"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/do-now/function-karpenter/internal/versions"
)

// A claimed cluster's Flux is the real one: source-controller v1.9.3, kustomize-controller v1.9.3
// and helm-controller v1.6.2, the controllers Flux v2.9.2 ships together (its go.mod requires
// their api modules at these versions), built from the module proxy (hack/e2e.mk,
// e2e/tools/controllers) and run out of cluster against the claimed cluster's API server, with its
// admin kubeconfig (in a bootstrapped cluster kustomize- and helm-controller are cluster-admin,
// source-controller is not: this suite does not hold it to a narrower role).
// What they reconcile is served from loopback by a gitOpsBase.

var (
	kustomizationGVR = schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}
	gitRepositoryGVR = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "gitrepositories"}
	helmReleaseGVR   = schema.GroupVersionResource{Group: "helm.toolkit.fluxcd.io", Version: "v2", Resource: "helmreleases"}
	nodePoolGVR      = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}
	nodeClaimGVR     = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}
	ec2NodeClassGVR  = schema.GroupVersionResource{Group: "karpenter.k8s.aws", Version: "v1", Resource: "ec2nodeclasses"}
)

// The media types of a Helm chart pushed to an OCI registry (helm.sh/helm/v4 v4.2.2,
// pkg/registry/constants.go: ConfigMediaType, ChartLayerMediaType). The GitOps base's
// OCIRepository selects the chart's layer by the second (examples/gitops/controller).
const (
	helmConfigMediaType = "application/vnd.cncf.helm.config.v1+json"
	helmChartMediaType  = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
	ociManifestType     = "application/vnd.oci.image.manifest.v1+json"
)

// A gitOpsBase is what a claimed cluster's Flux reconciles, served on loopback: this
// repository's GitOps base (examples/gitops) committed to a git repository that git's own smart
// HTTP server (git http-backend, through net/http/cgi) serves, and Karpenter's chart in an OCI
// registry (go-containerregistry's, as the package tests run one), pushed as Karpenter's release
// pushes it. The one change to the base: its OCIRepository points at that registry (same
// repository path, plain HTTP: insecure) instead of public.ecr.aws.
type gitOpsBase struct {
	repoURL  string // the git repository holding the base
	chartRef string // where the chart was pushed: host/repository:tag
	servers  []*httptest.Server
}

func (b *gitOpsBase) close() {
	for _, s := range b.servers {
		s.Close()
	}
}

// serveGitOpsBase pushes the chart of every Karpenter version the function knows and serves the
// base, under dir.
func serveGitOpsBase(dir string) (*gitOpsBase, error) {
	b := &gitOpsBase{}
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	b.servers = append(b.servers, reg)
	host := strings.TrimPrefix(reg.URL, "http://")

	work := filepath.Join(dir, "gitops-work")
	if err := os.CopyFS(filepath.Join(work, "examples", "gitops"), os.DirFS(filepath.Join("..", "examples", "gitops"))); err != nil {
		return b, fmt.Errorf("cannot copy the GitOps base: %w", err)
	}
	repository, err := pointAtRegistry(filepath.Join(work, "examples", "gitops", "controller", "ocirepository.yaml"), host)
	if err != nil {
		return b, err
	}
	var tags []string
	for _, v := range versions.All {
		if err := pushChart(reg.URL, repository, v); err != nil {
			return b, err
		}
		tags = append(tags, v.Chart)
	}
	b.chartRef = host + "/" + repository + ":" + strings.Join(tags, ",")

	git, err := exec.LookPath("git")
	if err != nil {
		return b, err
	}
	root := filepath.Join(dir, "git")
	run := func(args ...string) error {
		if out, err := exec.Command(git, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	commit := []string{"-C", work, "-c", "user.name=e2e", "-c", "user.email=e2e@127.0.0.1", "commit", "-q", "-a", "-m"}
	for _, args := range [][]string{
		{"-C", work, "init", "-q", "-b", "main"},
		{"-C", work, "add", "-A"},
		append(commit, "the GitOps base"),
		{"-C", work, "checkout", "-q", "-b", renamedBranch},
	} {
		if err := run(args...); err != nil {
			return b, err
		}
	}
	if err := renameHelmRelease(filepath.Join(work, "examples", "gitops", "controller", "helmrelease.yaml")); err != nil {
		return b, err
	}
	for _, args := range [][]string{
		append(commit, "the HelmRelease renamed"),
		{"clone", "-q", "--bare", work, filepath.Join(root, "platform.git")},
	} {
		if err := run(args...); err != nil {
			return b, err
		}
	}
	srv := httptest.NewServer(&cgi.Handler{Path: git, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}})
	b.servers = append(b.servers, srv)
	b.repoURL = srv.URL + "/platform.git"
	return b, nil
}

// renamedBranch is the branch of the served base whose HelmRelease has another name than the one
// the function's values patch targets: a platform's base that drifted from the function.
const renamedBranch = "helmrelease-renamed"

// renameHelmRelease renames the HelmRelease of the base's file.
func renameHelmRelease(file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	const name = "metadata:\n  name: karpenter\n"
	if !bytes.Contains(b, []byte(name)) {
		return fmt.Errorf("%s holds no HelmRelease named karpenter", file)
	}
	return os.WriteFile(file, bytes.Replace(b, []byte(name), []byte("metadata:\n  name: karpenter-renamed\n"), 1), 0o644)
}

// pointAtRegistry rewrites the base's OCIRepository (file) to pull from the registry at host:
// the same repository path, over plain HTTP. It returns that path.
func pointAtRegistry(file, host string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	var o map[string]any
	if err := yaml.Unmarshal(b, &o); err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	raw, _, _ := unstructured.NestedString(o, "spec", "url")
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "oci" {
		return "", fmt.Errorf("%s: spec.url %q is not an oci:// URL", file, raw)
	}
	if media, _, _ := unstructured.NestedString(o, "spec", "layerSelector", "mediaType"); media != helmChartMediaType {
		return "", fmt.Errorf("%s: spec.layerSelector.mediaType is %q, not a Helm chart's layer (%s)", file, media, helmChartMediaType)
	}
	repository := strings.TrimPrefix(u.Path, "/")
	_ = unstructured.SetNestedField(o, "oci://"+host+"/"+repository, "spec", "url")
	_ = unstructured.SetNestedField(o, true, "spec", "insecure")
	out, err := yaml.Marshal(o)
	if err != nil {
		return "", err
	}
	return repository, os.WriteFile(file, out, 0o644)
}

// karpenterChart packs the chart of Karpenter release v from the module zip of its release tag
// (v.Module) as Karpenter's release does (hack/release/common.sh, publishHelmChart: Chart.yaml's
// version and appVersion set to the release's, then helm package; the images it pins are not
// pulled here). The module zip has no charts/karpenter/crds: in the repository its files are
// symlinks to ../../../pkg/apis/crds/<same name>, which module zips leave out; they are packed
// from there. It returns the .tgz and Chart.yaml as JSON (the chart's OCI config).
func karpenterChart(v versions.Version) (tgz, config []byte, err error) {
	module, version := v.Module, v.Chart
	zipPath, err := moduleZip(module)
	if err != nil {
		return nil, nil, err
	}
	z, err := zip.OpenReader(zipPath)
	if err != nil {
		return nil, nil, err
	}
	defer z.Close()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	chartDir, crdDir := module+"/charts/karpenter/", module+"/pkg/apis/crds/"
	crds := 0
	for _, f := range z.File {
		var name string
		switch {
		case strings.HasPrefix(f.Name, chartDir):
			name = "karpenter/" + strings.TrimPrefix(f.Name, chartDir)
		case strings.HasPrefix(f.Name, crdDir) && path.Dir(f.Name)+"/" == crdDir && strings.HasSuffix(f.Name, ".yaml"):
			name = "karpenter/crds/" + path.Base(f.Name)
			crds++
		default:
			continue
		}
		b, err := readZipFile(f)
		if err != nil {
			return nil, nil, err
		}
		if name == "karpenter/Chart.yaml" {
			var meta map[string]any
			if err := yaml.Unmarshal(b, &meta); err != nil {
				return nil, nil, err
			}
			meta["version"], meta["appVersion"] = version, version
			if b, err = yaml.Marshal(meta); err != nil {
				return nil, nil, err
			}
			if config, err = json.Marshal(meta); err != nil {
				return nil, nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: f.Modified}); err != nil {
			return nil, nil, err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, nil, err
		}
	}
	if config == nil || crds == 0 {
		return nil, nil, fmt.Errorf("%s holds no charts/karpenter/Chart.yaml or no pkg/apis/crds", module)
	}
	if err := tw.Close(); err != nil {
		return nil, nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, nil, err
	}
	return buf.Bytes(), config, nil
}

// readZipFile is the content of one file of a zip.
func readZipFile(f *zip.File) ([]byte, error) {
	r, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// moduleZip is the path of module's zip (path@version) in the module cache, downloaded if
// missing. Karpenter's go.mod asks for a newer Go than the machine's: go mod download verifies
// and caches the zip, then refuses to extract it and exits non-zero, so its exit status is not
// the answer; the zip is read in place.
func moduleZip(module string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", module)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
	out, _ := cmd.Output()
	var info struct{ Zip, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", fmt.Errorf("go mod download %s: %v: %s", module, err, out)
	}
	if _, err := os.Stat(info.Zip); info.Zip == "" || err != nil {
		return "", fmt.Errorf("go mod download %s: no zip (%s)", module, info.Error)
	}
	return info.Zip, nil
}

// pushChart pushes the chart of Karpenter release v to repository of the registry at base,
// tagged with its chart version, as helm push does: one config blob, one chart layer, an OCI
// image manifest (the OCI distribution spec's blob upload, POST then PUT, and manifest PUT).
func pushChart(base, repository string, v versions.Version) error {
	chart, config, err := karpenterChart(v)
	if err != nil {
		return err
	}
	descriptor := func(media string, b []byte) (map[string]any, error) {
		digest := fmt.Sprintf("sha256:%x", sha256.Sum256(b))
		rsp, err := http.Post(base+"/v2/"+repository+"/blobs/uploads/", "", nil)
		if err != nil {
			return nil, err
		}
		rsp.Body.Close()
		loc, err := rsp.Location()
		if rsp.StatusCode != http.StatusAccepted || err != nil {
			return nil, fmt.Errorf("blob upload to %s: %s (%v)", repository, rsp.Status, err)
		}
		q := loc.Query()
		q.Set("digest", digest)
		loc.RawQuery = q.Encode()
		if err := put(loc.String(), "application/octet-stream", b); err != nil {
			return nil, err
		}
		return map[string]any{"mediaType": media, "digest": digest, "size": len(b)}, nil
	}
	cfg, err := descriptor(helmConfigMediaType, config)
	if err != nil {
		return err
	}
	layer, err := descriptor(helmChartMediaType, chart)
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": ociManifestType, "config": cfg, "layers": []any{layer}})
	if err != nil {
		return err
	}
	return put(base+"/v2/"+repository+"/manifests/"+v.Chart, ociManifestType, manifest)
}

func put(url, contentType string, body []byte) error {
	req, err := http.NewRequest(http.MethodPut, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer rsp.Body.Close()
	if rsp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(rsp.Body)
		return fmt.Errorf("PUT %s: %s: %s", url, rsp.Status, b)
	}
	return nil
}

// fluxCRDs are the CRD files of the three controllers' modules (E2E_FLUX_CRDS: their
// config/crd/bases folders, as hack/e2e.mk locates them).
func fluxCRDs() ([]string, error) {
	dirs := strings.Fields(os.Getenv("E2E_FLUX_CRDS"))
	if len(dirs) != 3 {
		return nil, fmt.Errorf("E2E_FLUX_CRDS must name the three Flux controllers' CRD folders: run the suite with `make e2e-test`")
	}
	var files []string
	for _, d := range dirs {
		found, err := fs.Glob(os.DirFS(d), "*.yaml")
		if err != nil || len(found) == 0 {
			return nil, fmt.Errorf("%s holds no CRDs (%v)", d, err)
		}
		for _, f := range found {
			files = append(files, filepath.Join(d, f))
		}
	}
	return files, nil
}

// fluxControllers are the claimed cluster's Flux controllers, as their processes are named.
var fluxControllers = []string{"source-controller", "kustomize-controller", "helm-controller"}

// fluxServiceAccount creates, as the platform does before any claim (docs/platform.md, "What
// the platform must have"), the ServiceAccount the input names for kustomize-controller to
// impersonate (flux.serviceAccountName) in the Kustomizations' namespace, bound to cluster-admin:
// the controller's base applies CRDs, ClusterRoles and their bindings, which RBAC lets only a
// subject that holds their permissions create. Nothing when the input names none.
func (c *claimedCluster) fluxServiceAccount(ctx context.Context, input map[string]any, ns string) error {
	sa, _, _ := unstructured.NestedString(input, "flux", "serviceAccountName")
	if sa == "" {
		return nil
	}
	for _, o := range []map[string]any{
		{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": sa, "namespace": ns}},
		{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": map[string]any{"name": "flux-" + ns + "-" + sa},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
			"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": sa, "namespace": ns}}},
	} {
		if err := c.apply(ctx, &unstructured.Unstructured{Object: o}); err != nil {
			return err
		}
	}
	return nil
}

// startFlux points the claimed cluster's Flux at base (the GitRepository the platform's
// function input names as its source) and starts its three controllers. Their processes join
// the cluster's.
func (c *claimedCluster) startFlux(ctx context.Context, base *gitOpsBase) error {
	input, err := shippedInput(claimAPI)
	if err != nil {
		return err
	}
	// The platform's monitoring runs in the claimed cluster before any claim: the namespace the
	// input puts Karpenter's PodMonitor, rules and dashboards in exists (with
	// prometheus-operator's CRDs, claimedCRDs).
	if monitoring, _, _ := unstructured.NestedString(input, "monitoring", "namespace"); monitoring != "" {
		if err := c.ensureNamespace(ctx, monitoring); err != nil {
			return err
		}
	}
	ns, _, _ := unstructured.NestedString(input, "flux", "namespace")
	if err := c.fluxServiceAccount(ctx, input, ns); err != nil {
		return err
	}
	source, err := gitRepository(input, base)
	if err != nil {
		return err
	}
	if err := c.apply(ctx, source); err != nil {
		return err
	}
	sourceNS, name := source.GetNamespace(), source.GetName()
	bins, sourceLog := map[string]string{}, ""
	for _, n := range fluxControllers {
		env := "E2E_" + strings.ToUpper(strings.ReplaceAll(n, "-", "_"))
		if bins[n] = os.Getenv(env); bins[n] == "" {
			return fmt.Errorf("%s is not set: run the suite with `make e2e-test`", env)
		}
	}
	ports, err := freePorts(7)
	if err != nil {
		return err
	}
	storage := fmt.Sprintf("127.0.0.1:%d", ports[6])
	env := []string{"KUBECONFIG=" + c.kubeconfig, "RUNTIME_NAMESPACE=" + ns}
	for i, n := range fluxControllers {
		args := []string{fmt.Sprintf("--metrics-addr=127.0.0.1:%d", ports[2*i]), fmt.Sprintf("--health-addr=127.0.0.1:%d", ports[2*i+1]),
			"--log-level=debug"}
		if n == "source-controller" {
			artifacts := filepath.Join(c.dir, "flux-artifacts")
			if err := os.MkdirAll(artifacts, 0o755); err != nil {
				return err
			}
			args = append(args, "--storage-path="+artifacts, "--storage-addr="+storage, "--storage-adv-addr="+storage)
		}
		p, err := startProc(c.logDir, n, env, bins[n], args...)
		if err != nil {
			return err
		}
		c.procs = append(c.procs, p.asKubelet())
		if n == "source-controller" {
			sourceLog = p.log
		}
		if err := waitHealthy(ctx, time.Minute, n+" healthy", p, fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[2*i+1])); err != nil {
			return err
		}
	}
	var ready map[string]any
	err = waitFor(ctx, 2*time.Minute, "GitRepository "+sourceNS+"/"+name+" Ready", func() (bool, error) {
		u, err := c.dyn.Resource(gitRepositoryGVR).Namespace(sourceNS).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			ready = condition(u, "Ready")
		}
		return ready["status"] == "True", nil
	})
	if err != nil {
		return fmt.Errorf("%w (its Ready condition: %v; source-controller's log: %s)", err, ready, sourceLog)
	}
	return nil
}

// gitRepository is the Flux source the shipped input names (flux.sourceRef, in flux.namespace
// when it names none), fetching the base.
func gitRepository(input map[string]any, base *gitOpsBase) (*unstructured.Unstructured, error) {
	kind, _, _ := unstructured.NestedString(input, "flux", "sourceRef", "kind")
	name, _, _ := unstructured.NestedString(input, "flux", "sourceRef", "name")
	ns, _, _ := unstructured.NestedString(input, "flux", "sourceRef", "namespace")
	if ns == "" {
		ns, _, _ = unstructured.NestedString(input, "flux", "namespace") // the input's default
	}
	if kind != "GitRepository" {
		return nil, fmt.Errorf("the shipped input's Flux source is a %s: the suite serves a GitRepository", kind)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gitRepositoryGVR.GroupVersion().String(), "kind": "GitRepository",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"url": base.repoURL, "interval": "1m", "ref": map[string]any{"branch": "main"}},
	}}, nil
}

// brokenSource deletes the claimed cluster's Flux source (the GitRepository the input names)
// before the request's Kustomizations are applied, as on a cluster whose platform source is
// missing, and returns what to do once the controller's Kustomization is composed: wait until
// the real kustomize-controller reports it failing (Ready=False, ArtifactFailed) and the
// request's ControllerReady condition carries that report word for word, with nothing of the
// steps after it composed; then put the source back, at the branch whose HelmRelease is renamed
// (renamedBranch): kustomize-controller's build fails on the function's patches (the values
// patch's target is missing: internal/flux helmReleaseMustExist), which the request shows the
// same way; then at the base's own branch. kustomize-controller acts on a source's new artifact
// at once (v1.9.3 internal/controller/kustomization_manager.go watches the sources its
// Kustomizations name), and the walk goes on.
func brokenSource(t *testing.T, c *karpenter, claimed *claimedCluster, base *gitOpsBase) (atController func()) {
	t.Helper()
	sourceAt(t, c, claimed, base, "")
	return func() {
		t.Helper()
		kustomizationFailing(t, c, claimed, "the source missing", "ArtifactFailed")
		sourceAt(t, c, claimed, base, renamedBranch)
		msg := kustomizationFailing(t, c, claimed, "the base's HelmRelease renamed", "BuildFailed")
		if !strings.Contains(msg, "HelmRelease") || !strings.Contains(msg, "karpenter") {
			t.Errorf("the build over the renamed HelmRelease failed, but not on the HelmRelease karpenter: %s", msg)
		}
		sourceAt(t, c, claimed, base, "main")
	}
}

// kustomizationFailing waits until the real kustomize-controller reports c's controller Kustomization
// Ready=False for reason, and the request's ControllerReady condition carries that report word
// for word, with nothing of the steps after it composed. It returns the report's message.
func kustomizationFailing(t *testing.T, c *karpenter, claimed *claimedCluster, what, reason string) string {
	t.Helper()
	start := time.Now()
	msg, cond := kustomizationReported(t, c, claimed, reason)
	want := throughStep(slices.IndexFunc(steps, func(s step) bool { return s.condition == "ControllerReady" }))
	if got, _ := c.composed(); !equalSets(sortedKeys(got), want) {
		t.Errorf("%s, the controller's Kustomization failing: composed %v, want exactly the steps through it %v", what, sortedKeys(got), want)
	}
	t.Logf("%s: kustomize-controller reports %q; ControllerReady=False after %.0fs: %v", what, msg, time.Since(start).Seconds(), cond["message"])
	return msg
}

// kustomizationReported waits until the real kustomize-controller reports c's controller
// Kustomization Ready=False for reason, and the request's ControllerReady condition carries that
// report word for word. It returns the report's message and the condition.
func kustomizationReported(t *testing.T, c *karpenter, claimed *claimedCluster, reason string) (string, map[string]any) {
	t.Helper()
	resources, _ := c.composed()
	var reported map[string]any
	c.wait(3*time.Minute, "kustomize-controller to report the controller's Kustomization "+reason, func() (bool, error) {
		k, err := claimed.remote(t.Context(), resources["controller-kustomization"])
		if err != nil || k == nil {
			return false, nil
		}
		reported = condition(k, "Ready")
		return reported != nil && reported["status"] == "False" && reported["reason"] == reason, nil
	})
	msg, _ := reported["message"].(string)
	cond := c.waitCondition("ControllerReady", "False", 2*time.Minute,
		"controller-kustomization: Kustomization Ready=False ("+reason+"): "+msg)
	return msg, cond
}

// sourceAt points the claimed cluster's Flux source for c (the GitRepository the input names) at
// branch of base, as a platform engineer's change of the GitOps repository would; "" deletes it.
// (Not on t's context: a cleanup of t puts the source back.)
func sourceAt(t *testing.T, c *karpenter, claimed *claimedCluster, base *gitOpsBase, branch string) {
	t.Helper()
	ctx := context.Background()
	source, err := gitRepository(platformInput(t, c.api), base)
	if err != nil {
		t.Fatal(err)
	}
	if branch == "" {
		// Deleted, and gone: source-controller's finalizer goes first.
		sources := claimed.dyn.Resource(gitRepositoryGVR).Namespace(source.GetNamespace())
		if err = sources.Delete(ctx, source.GetName(), metav1.DeleteOptions{}); apierrors.IsNotFound(err) {
			err = nil
		}
		if err == nil {
			err = waitFor(ctx, time.Minute, "the GitRepository gone", func() (bool, error) {
				_, err := sources.Get(ctx, source.GetName(), metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
		}
	} else {
		_ = unstructured.SetNestedField(source.Object, branch, "spec", "ref", "branch")
		err = claimed.apply(ctx, source)
	}
	if err != nil {
		t.Fatalf("cannot point GitRepository %s/%s in %s at %q: %v", source.GetNamespace(), source.GetName(), claimed.name, branch, err)
	}
}

// installedUIDs is what the claimed cluster holds of c, by what it is ("<resource name>" for
// each object an Object applied, "<Kind> <name>" for the controller's HelmRelease and Deployment
// and each pool and class): its UID, and whether it is being deleted.
func installedUIDs(t *testing.T, c *karpenter, claimed *claimedCluster) map[string]string {
	t.Helper()
	ctx := t.Context()
	out := map[string]string{}
	mark := func(what string, o metav1.Object) {
		uid := string(o.GetUID())
		if o.GetDeletionTimestamp() != nil {
			uid += " (being deleted)"
		}
		out[what] = uid
	}
	resources, _ := c.composed()
	for _, name := range appliedObjects(resources) {
		if remote, err := claimed.remote(ctx, resources[name]); err == nil && remote != nil {
			mark(name, remote)
		}
	}
	ns, _, _ := unstructured.NestedString(platformInput(t, c.api), "podIdentity", "namespace")
	for _, gvr := range []schema.GroupVersionResource{helmReleaseGVR, {Group: "apps", Version: "v1", Resource: "deployments"}} {
		if o, err := claimed.dyn.Resource(gvr).Namespace(ns).Get(ctx, "karpenter", metav1.GetOptions{}); err == nil {
			mark(o.GetKind()+" karpenter", o)
		}
	}
	for _, gvr := range []schema.GroupVersionResource{nodePoolGVR, ec2NodeClassGVR} {
		l, err := claimed.dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for i := range l.Items {
			mark(l.Items[i].GetKind()+" "+l.Items[i].GetName(), &l.Items[i])
		}
	}
	return out
}

// checkInstalledSurvived checks that the claimed cluster still holds every object of before
// (installedUIDs), the same (UID), none being deleted.
func checkInstalledSurvived(t *testing.T, when string, before, after map[string]string) {
	t.Helper()
	for _, what := range sortedKeys(before) {
		if after[what] != before[what] {
			t.Errorf("%s: the claimed cluster's %s was %s, is now %q", when, what, before[what], after[what])
		}
	}
}

// karpenter stands in for Karpenter's controller, which runs in the claimed cluster (its
// Deployment, installed by helm-controller, is Available: kwok runs its pods) but cannot reach
// AWS here. It does to the objects what the function reads of Karpenter v1.15.2's work, and
// nothing more (not the classes' resolved subnets, security groups, AMIs and instance profile,
// not the pools' other conditions and resources):
//   - an EC2NodeClass gets Karpenter's finalizer (karpenter.k8s.aws/termination:
//     pkg/apis/v1/labels.go, added by pkg/controllers/nodeclass/controller.go) and the conditions
//     its validation leaves when AWS answers (pkg/apis/v1/ec2nodeclass_status.go:
//     StatusConditions, all True, Ready the root; CapacityReservationsReady too, as the chart's
//     default reservedCapacity gate turns it on, cmd/controller/main.go); deleted, it keeps the
//     finalizer while a NodeClaim refers to it (finalize);
//   - a NodePool gets the status Karpenter's core reports (sigs.k8s.io/karpenter v1.15.0, the
//     version nearest v1.15.2's v1.15.1 that the proxy serves, pkg/apis/v1/nodepool_status.go:
//     ValidationSucceeded and NodeClassReady True, Ready the root; its nodes and resources as
//     pkg/controllers/nodepool/counter/controller.go counts them): of an empty pool, or of the
//     nodes, CPU and memory a test says its nodes provide (pools).
func (c *claimedCluster) karpenter(ctx context.Context) {
	classes, err := c.dyn.Resource(ec2NodeClassGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return // the chart has not installed the CRDs yet
	}
	claims, claimsErr := c.dyn.Resource(nodeClaimGVR).List(ctx, metav1.ListOptions{})
	for i := range classes.Items {
		class := &classes.Items[i]
		r := c.dyn.Resource(ec2NodeClassGVR)
		finalizers := class.GetFinalizers()
		switch {
		case class.GetDeletionTimestamp() != nil && claimsErr != nil:
			// Karpenter's finalize fails when it cannot list the NodeClaims: it keeps the class.
		case class.GetDeletionTimestamp() != nil:
			// Karpenter lists the NodeClaims whose spec.nodeClassRef names the class by group,
			// kind and name (sigs.k8s.io/karpenter v1.15.0 pkg/utils/nodeclaim, ForNodeClass).
			used := slices.ContainsFunc(claims.Items, func(nc unstructured.Unstructured) bool {
				ref, _, _ := unstructured.NestedStringMap(nc.Object, "spec", "nodeClassRef")
				return ref["group"] == ec2NodeClassGVR.Group && ref["kind"] == "EC2NodeClass" && ref["name"] == class.GetName()
			})
			if !used && slices.Contains(finalizers, karpenterClassFinalizer) {
				class.SetFinalizers(slices.DeleteFunc(finalizers, func(f string) bool { return f == karpenterClassFinalizer }))
				_, _ = r.Update(ctx, class, metav1.UpdateOptions{})
			}
		case !slices.Contains(finalizers, karpenterClassFinalizer):
			class.SetFinalizers(append(finalizers, karpenterClassFinalizer))
			_, _ = r.Update(ctx, class, metav1.UpdateOptions{})
		case !readyFor(class):
			class.Object["status"] = map[string]any{"conditions": karpenterConditions(class,
				"AMIsReady", "SubnetsReady", "SecurityGroupsReady", "InstanceProfileReady", "ValidationSucceeded", "PlacementGroupReady",
				"CapacityReservationsReady")}
			_, _ = r.UpdateStatus(ctx, class, metav1.UpdateOptions{})
		}
	}
	pools, err := c.dyn.Resource(nodePoolGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range pools.Items {
		pool := &pools.Items[i]
		report := poolReport{cpu: "0", memory: "0"}
		if r, ok := c.pools.Load(pool.GetName()); ok {
			report = r.(poolReport)
		}
		// The counter's BaseResources, with what the pool's nodes provide
		// (pkg/controllers/nodepool/counter/controller.go).
		resources := map[string]any{"cpu": report.cpu, "memory": report.memory, "nodes": fmt.Sprint(report.nodes),
			"pods": "0", "ephemeral-storage": "0"}
		reported, _, _ := unstructured.NestedMap(pool.Object, "status", "resources")
		if pool.GetDeletionTimestamp() != nil || readyFor(pool) && maps.Equal(reported, resources) {
			continue
		}
		pool.Object["status"] = map[string]any{"nodes": report.nodes, "resources": resources,
			"conditions": karpenterConditions(pool, "ValidationSucceeded", "NodeClassReady")}
		_, _ = c.dyn.Resource(nodePoolGVR).UpdateStatus(ctx, pool, metav1.UpdateOptions{})
	}
}

const karpenterClassFinalizer = "karpenter.k8s.aws/termination"

// readyFor tells whether o's Ready condition is True for its generation.
func readyFor(o *unstructured.Unstructured) bool {
	cond := condition(o, "Ready")
	gen, _, _ := unstructured.NestedInt64(cond, "observedGeneration")
	return cond != nil && cond["status"] == "True" && gen == o.GetGeneration()
}

// karpenterConditions are the given conditions and Ready, all True for o's generation, as
// Karpenter's status.Condition writes them.
func karpenterConditions(o *unstructured.Unstructured, types ...string) []any {
	now := time.Now().UTC().Format(time.RFC3339)
	var out []any
	for _, t := range append(types, "Ready") {
		out = append(out, map[string]any{"type": t, "status": "True", "reason": t, "message": "",
			"observedGeneration": o.GetGeneration(), "lastTransitionTime": now})
	}
	return out
}

// installedByFlux checks, with c Ready, what the claimed cluster's Flux did of it: helm-controller
// installed Karpenter's chart of the version c runs, with the values the function composed (its
// ServiceAccount, cluster and queue reached the controller's environment), and the controller's
// Deployment is Available, one replica per system node; kustomize-controller applied the pools
// and the monitoring, which their CRDs admitted, and the observe-only Objects read the pools
// back, so PoolsWithinLimits is known.
func installedByFlux(t *testing.T, c *karpenter, claimed *claimedCluster) {
	t.Helper()
	ctx := t.Context()
	input := platformInput(t, c.api)
	ns, _, _ := unstructured.NestedString(input, "podIdentity", "namespace")
	sa, _, _ := unstructured.NestedString(input, "podIdentity", "serviceAccount")
	resources, _ := c.composed()
	version := builtFor(resources["controller-kustomization"])

	hr, err := claimed.dyn.Resource(helmReleaseGVR).Namespace(ns).Get(ctx, "karpenter", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the claimed cluster %s holds no HelmRelease %s/karpenter: %v", claimed.name, ns, err)
	}
	history, _, _ := unstructured.NestedSlice(hr.Object, "status", "history")
	var last map[string]any
	if len(history) > 0 {
		last, _ = history[0].(map[string]any)
	}
	// helm-controller records a chart from an OCIRepository as <version>+<the first 12 hex of
	// its digest> (v1.6.2 internal/controller/helmrelease_controller.go,
	// mutateChartWithSourceRevision).
	chart, _ := last["chartVersion"].(string)
	if conditionStatus(hr, "Ready") != "True" || !strings.HasPrefix(chart, version+"+") || last["status"] != "deployed" {
		t.Errorf("HelmRelease %s/karpenter: Ready %s, last release %v; want Ready, chart %s+<digest> deployed", ns, conditionStatus(hr, "Ready"), last, version)
	}
	// Available, waited for: after the claimed cluster's API server was down a minute (the
	// faults), kube-controller-manager's node lifecycle controller marks the nodes whose kwok
	// heartbeats lapsed past its grace period (50 s: k8s.io/kubernetes v1.35.4
	// pkg/controller/nodelifecycle/config/v1alpha1/defaults.go) not ready, and their pods with
	// them, until kwok reports again.
	var d *appsv1.Deployment
	var getErr error
	err = waitFor(ctx, 3*time.Minute, "Deployment "+ns+"/karpenter available", func() (bool, error) {
		d, getErr = claimed.kube.AppsV1().Deployments(ns).Get(ctx, "karpenter", metav1.GetOptions{})
		return getErr == nil && d.Spec.Replicas != nil && d.Status.AvailableReplicas == *d.Spec.Replicas, nil
	})
	if getErr != nil || d == nil {
		t.Fatalf("helm-controller installed no Deployment %s/karpenter: %v", ns, getErr)
	}
	env := map[string]string{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	queue, _, _ := unstructured.NestedString(c.get().Object, "status", "queue", "name")
	if d.Spec.Template.Spec.ServiceAccountName != sa || env["CLUSTER_NAME"] != claimed.name || env["INTERRUPTION_QUEUE"] != queue {
		t.Errorf("Deployment %s/karpenter: ServiceAccount %q, CLUSTER_NAME %q, INTERRUPTION_QUEUE %q; want %q, %q, %q (the composed values)",
			ns, d.Spec.Template.Spec.ServiceAccountName, env["CLUSTER_NAME"], env["INTERRUPTION_QUEUE"], sa, claimed.name, queue)
	}
	if err != nil {
		var want any = "unset"
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		t.Errorf("Deployment %s/karpenter: %d of %v replicas available: %v", ns, d.Status.AvailableReplicas, want, err)
	}
	pods, err := claimed.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=karpenter"})
	nodes := map[string]bool{}
	for _, p := range pods.Items {
		nodes[p.Spec.NodeName] = true
	}
	// The function's anti-affinity and zone spread are preferred, not required: the first rollout
	// puts a replica on each system node, but a rolling update (the chart's maxUnavailable 1)
	// schedules a new replica while both old ones still run, and the scheduler may put both new
	// ones on one node. After an upgrade, every replica is on a system node, spread or not.
	spread := len(nodes) == len(systemZones)
	if d.Annotations["deployment.kubernetes.io/revision"] != "1" {
		spread = len(nodes) > 0 && len(nodes) <= len(systemZones)
	}
	for n := range nodes {
		spread = spread && strings.HasPrefix(n, "system-")
	}
	if err != nil || !spread {
		t.Errorf("the controller's pods run on %v, want one on each system node on the first rollout, on system nodes after (%v)", sortedKeys(nodes), err)
	}

	// Every observe-only Object of a pool or class reads what kustomize-controller applied (the
	// real provider-kubernetes re-reads an Object it found nothing for every 30s ± 10%: the
	// request got Ready before they did, as NodePoolsReady waits on the Kustomization alone).
	// When the provider reads a NodePool in the moment after kustomize-controller applied it and
	// before Karpenter (its stand-in, every 500 ms) wrote its status, the Object is Ready with no
	// status to show, and the provider reads it again only after its poll (a run with four
	// shards on two cores saw it, prod-us's public pool): status.pools shows that pool as late.
	pools := 0
	for _, o := range resources {
		if kind, _, _ := unstructured.NestedString(o.Object, "spec", "forProvider", "manifest", "kind"); observeOnly(o) && kind == "NodePool" {
			pools++
		}
	}
	// Crossplane writes what the function returns of the status (status.pools) and the
	// conditions it returns in two calls, a server-side apply then an update (crossplane v2.4.2
	// internal/controller/apiextensions/composite: composition_functions.go applies the desired
	// status, reconciler.go sets the function's conditions and updates): status.pools can show
	// the pools a moment before PoolsWithinLimits says so. Both are waited for, read together.
	c.wait(2*time.Minute+claimed.poll, fmt.Sprintf("status.pools to show the %d pools and %s True/WithinLimits", pools, poolsCondition), func() (bool, error) {
		u := c.get()
		got, _, _ := unstructured.NestedMap(u.Object, "status", "pools")
		cond := condition(u, poolsCondition)
		return len(got) == pools && cond != nil && cond["status"] == "True" && cond["reason"] == "WithinLimits", nil
	})
	resources, _ = c.composed()
	for name, o := range resources {
		kind, _, _ := unstructured.NestedString(o.Object, "spec", "forProvider", "manifest", "kind")
		if !observeOnly(o) || kind != "NodePool" && kind != "EC2NodeClass" {
			continue
		}
		remote, err := claimed.remote(ctx, o)
		uid, _, _ := unstructured.NestedString(o.Object, "status", "atProvider", "manifest", "metadata", "uid")
		if err != nil || remote == nil || uid != string(remote.GetUID()) {
			t.Errorf("%s: observes uid %q; the claimed cluster's %s %v (%v)", name, uid, kind, remote != nil, err)
		}
	}
	if got, _, _ := unstructured.NestedMap(c.get().Object, "status", "pools"); len(got) != pools || pools == 0 {
		t.Errorf("status.pools: want the %d pools applied, got %v", pools, got)
	}
	monitoring, _, _ := unstructured.NestedString(input, "monitoring", "namespace")
	if monitoring == "" {
		monitoring = ns
	}
	for _, gvr := range []schema.GroupVersionResource{podMonitorGVR, prometheusRuleGVR} {
		if l, err := claimed.dyn.Resource(gvr).Namespace(monitoring).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) == 0 {
			t.Errorf("the monitoring Kustomization applied no %s in %s (%v)", gvr.Resource, monitoring, err)
		}
	}
	t.Logf("Flux installed Karpenter's chart %s (Deployment %d/%d available on %v), applied %d NodePools and the monitoring",
		version, d.Status.AvailableReplicas, *d.Spec.Replicas, sortedKeys(nodes), pools)
}

// uninstalledSelector is what of gvr must be gone from a claimed cluster once a request is
// uninstalled: all of it, but of pods only the controller's, which Flux installed.
func uninstalledSelector(gvr schema.GroupVersionResource) string {
	if gvr == podGVR {
		return "app.kubernetes.io/name=karpenter"
	}
	return ""
}

var (
	ociRepositoryGVR  = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "ocirepositories"}
	podMonitorGVR     = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "podmonitors"}
	prometheusRuleGVR = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheusrules"}
)

// uninstalledByFlux checks that the claimed cluster's Flux removed everything it had installed
// for the request: its Kustomizations, the chart's OCIRepository, the HelmRelease (helm-controller
// uninstalled the release: no Deployment, no pods of the controller), the pools, classes, alert
// rules and PodMonitor. Karpenter's CRDs stay, as Helm leaves a chart's crds/ on uninstall.
func uninstalledByFlux(t *testing.T, claimed *claimedCluster) {
	t.Helper()
	left, err := installedLeft(t.Context(), claimed)
	if err != nil {
		t.Error(err)
	}
	for _, o := range left {
		t.Errorf("uninstalled, the claimed cluster %s still holds %s", claimed.name, o)
	}
}

// installedLeft lists what the claimed cluster still holds of what Flux installs for a request
// (uninstalledByFlux).
func installedLeft(ctx context.Context, claimed *claimedCluster) ([]string, error) {
	var left []string
	for _, gvr := range []schema.GroupVersionResource{kustomizationGVR, ociRepositoryGVR, helmReleaseGVR, nodePoolGVR, ec2NodeClassGVR,
		podMonitorGVR, prometheusRuleGVR, {Group: "apps", Version: "v1", Resource: "deployments"}, podGVR} {
		l, err := claimed.dyn.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: uninstalledSelector(gvr)})
		if apierrors.IsNotFound(err) {
			continue // a kind the cluster does not serve (Karpenter's, before its chart was first installed)
		}
		if err != nil {
			return left, fmt.Errorf("cannot list %s in %s: %w", gvr.Resource, claimed.name, err)
		}
		for _, o := range l.Items {
			left = append(left, fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName()))
		}
	}
	return left, nil
}

// holdByNodeClaim gives the claimed cluster a NodeClaim of the private pool's class, and returns a
// wait for what follows once the request is deleted: the class is deleted, and Karpenter's
// finalizer keeps it while the NodeClaim refers to it (the stand-in, as Karpenter's finalize
// does). Two deletions reach the class, and either can come first: its observe-only Object's
// (managementPolicies [Observe, Delete]: internal/poolstatus), which provider-kubernetes carries
// out, and the nodes Kustomization's prune (WaitForTermination). Under load, provider-kubernetes
// deleted the class two minutes before Crossplane deleted the nodes Kustomization's Object (the
// claimed cluster's audit log). For hold, the nodes Kustomization stays (being deleted or not
// yet), and the controller stays installed (its Kustomization, HelmRelease and Deployment there,
// none being deleted), and so do the request
// and what the instances need in Crossplane's cluster (the controller's role and association, the
// queue, the rules and targets, the final check, the monitoring); then the node is gone
// (the test deletes the NodeClaim) and the uninstall goes on. The NodeClaim is what Karpenter's
// finalize matches on, nothing more: Karpenter's own would also carry its NodePool's label and an
// ownerReference to it, through which the garbage collector deletes it with the pool; this one
// has none, so the pool's deletion does not take it. The wait is also a cleanup of t.
func holdByNodeClaim(t *testing.T, c *karpenter, claimed *claimedCluster, hold time.Duration) (wait func()) {
	t.Helper()
	ctx := t.Context()
	input := platformInput(t, c.api)
	ns, _, _ := unstructured.NestedString(input, "podIdentity", "namespace")
	resources, _ := c.composed()
	claim := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": nodeClaimGVR.GroupVersion().String(), "kind": "NodeClaim",
		"metadata": map[string]any{"name": "private-e2e01"},
		"spec": map[string]any{
			"nodeClassRef": map[string]any{"group": ec2NodeClassGVR.Group, "kind": "EC2NodeClass", "name": "private"},
			"requirements": []any{map[string]any{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []any{"on-demand"}}},
		},
	}}
	claims := claimed.dyn.Resource(nodeClaimGVR)
	if _, err := claims.Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatalf("cannot create a NodeClaim of the private class in %s: %v", claimed.name, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The node goes in the end, whatever happened: a held class would hold the uninstall.
		defer func() { _ = claims.Delete(context.Background(), claim.GetName(), metav1.DeleteOptions{}) }()
		classes := claimed.dyn.Resource(ec2NodeClassGVR)
		err := waitFor(ctx, 5*time.Minute, "the private EC2NodeClass being deleted", func() (bool, error) {
			class, err := classes.Get(ctx, "private", metav1.GetOptions{})
			return err == nil && class.GetDeletionTimestamp() != nil, nil
		})
		if err == nil {
			select {
			case <-ctx.Done():
			case <-time.After(hold):
			}
		}
		if ctx.Err() != nil {
			return // the test ended (failed) first: nothing to report to it
		}
		if err != nil {
			t.Error(err)
			return
		}
		if class, err := classes.Get(ctx, "private", metav1.GetOptions{}); err != nil || !slices.Contains(class.GetFinalizers(), karpenterClassFinalizer) {
			t.Errorf("after %s with a NodeClaim, the private EC2NodeClass is gone or lost Karpenter's finalizer (%v)", hold, err)
		}
		if got, err := claimed.remote(ctx, resources["nodes-kustomization"]); err != nil || got == nil {
			t.Errorf("with a NodeClaim of the private class, the nodes Kustomization is gone (%v)", err)
		}
		if got, err := claimed.remote(ctx, resources["controller-kustomization"]); err != nil || got == nil || got.GetDeletionTimestamp() != nil {
			t.Errorf("with a NodeClaim of the private class, the controller's Kustomization is gone or being deleted (%v)", err)
		}
		for _, gvr := range []schema.GroupVersionResource{helmReleaseGVR, {Group: "apps", Version: "v1", Resource: "deployments"}} {
			got, err := claimed.dyn.Resource(gvr).Namespace(ns).Get(ctx, "karpenter", metav1.GetOptions{})
			if err != nil || got.GetDeletionTimestamp() != nil {
				t.Errorf("with a NodeClaim of the private class, %s %s/karpenter went or is being deleted (%v)", gvr.Resource, ns, err)
			}
		}
		// In Crossplane's cluster, the request and everything the instances need stay.
		all, err := composedOf(ctx, cp, c.xr)
		for _, n := range []string{"controller-kustomization", "controller-role", "controller-role-policy", "pod-identity-association",
			"final-check", "interruption-queue", "interruption-queue-policy", "rule-health", "target-health", "monitoring-kustomization"} {
			if r, ok := all[n]; err != nil || !ok || r.GetDeletionTimestamp() != nil {
				t.Errorf("with a NodeClaim of the private class, %s is gone or being deleted (%v)", n, err)
			}
		}
		if !c.exists() {
			t.Errorf("%s is gone while a NodeClaim holds its uninstall: the tenant cannot see it", c)
		}
		t.Logf("a NodeClaim held the private EC2NodeClass, the nodes Kustomization and so the controller, for %s; the node goes", hold)
	}()
	wait = func() { <-done }
	t.Cleanup(wait)
	return wait
}

// upgradeVersions are the versions the namespaced request walks through against the real Flux:
// the newest known release of the minor before the newest, then the newest known release.
func upgradeVersions() (from, to string) {
	to = versions.All[len(versions.All)-1].Version
	minor := func(v string) string { return v[:strings.LastIndex(v, ".")] }
	for _, v := range versions.All {
		if minor(v.Version) != minor(to) {
			from = v.Version
		}
	}
	return from, to
}

// deployedChart is the chart version of a HelmRelease's last release when it is deployed, without
// the digest helm-controller appends to a chart from an OCIRepository ("" otherwise).
func deployedChart(hr *unstructured.Unstructured) string {
	history, _, _ := unstructured.NestedSlice(hr.Object, "status", "history")
	if len(history) == 0 {
		return ""
	}
	last, _ := history[0].(map[string]any)
	chart, _ := last["chartVersion"].(string)
	if last["status"] != "deployed" {
		return ""
	}
	return strings.SplitN(chart, "+", 2)[0]
}

// upgradedByFlux upgrades a request Ready and installed at one Karpenter version to the version
// to, with the real Flux (movedByFlux), then tries the way back. A downgrade across minors is
// refused and the claimed cluster keeps the new release. A rollback within to's minor to a release
// with the same CRDs (rollbackOf) then completes as the upgrade did, controller first, then the
// node pools. Nothing composed is deleted or re-created, nor is the controller's Deployment or a
// pool in the claimed cluster.
func upgradedByFlux(t *testing.T, c *karpenter, claimed *claimedCluster, to string) {
	t.Helper()
	ctx := t.Context()
	ns, _, _ := unstructured.NestedString(platformInput(t, c.api), "podIdentity", "namespace")
	before, _ := c.composed()
	from := builtFor(before["controller-kustomization"])
	releases := claimed.dyn.Resource(helmReleaseGVR).Namespace(ns)
	deployments := claimed.kube.AppsV1().Deployments(ns)
	deployment, err := deployments.Get(ctx, "karpenter", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no controller Deployment before the upgrade: %v", err)
	}
	pools, err := claimed.dyn.Resource(nodePoolGVR).List(ctx, metav1.ListOptions{})
	if err != nil || len(pools.Items) == 0 {
		t.Fatalf("no NodePool in %s before the upgrade (%v)", claimed.name, err)
	}
	// survived: the last releases of the HelmRelease, newest first, are want; nothing composed
	// went, nor the controller's Deployment or a pool in the claimed cluster.
	survived := func(by string, want ...string) {
		t.Helper()
		hr, err := releases.Get(ctx, "karpenter", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		history, _, _ := unstructured.NestedSlice(hr.Object, "status", "history")
		var charts []string
		for _, h := range history[:min(len(history), len(want))] {
			m, _ := h.(map[string]any)
			chart, _ := m["chartVersion"].(string)
			charts = append(charts, fmt.Sprintf("%s %v", strings.SplitN(chart, "+", 2)[0], m["status"]))
		}
		if !slices.Equal(charts, want) {
			t.Errorf("%s: HelmRelease %s/karpenter's last releases are %v, want %v", by, ns, charts, want)
		}
		after, _ := c.composed()
		checkSurvived(t, by, before, after)
		if d, err := deployments.Get(ctx, "karpenter", metav1.GetOptions{}); err != nil || d.UID != deployment.UID {
			t.Errorf("the controller's Deployment was re-created or lost %s (%v)", by, err)
		}
		for _, p := range pools.Items {
			if got, err := claimed.dyn.Resource(nodePoolGVR).Get(ctx, p.GetName(), metav1.GetOptions{}); err != nil || got.GetUID() != p.GetUID() {
				t.Errorf("NodePool %s was re-created or lost %s (%v)", p.GetName(), by, err)
			}
		}
		installedByFlux(t, c, claimed)
	}

	movedByFlux(t, c, claimed, from, to, func() error { return c.setVersion(to) })
	survived("by the upgrade", to+" deployed", from+" superseded")

	// Back to from: refused at spec.version, and the claimed cluster keeps to's release.
	if err := c.setVersion(from); err != nil {
		t.Fatalf("cannot change the request: %v", err)
	}
	// Three minutes: with Crossplane's watch circuit breaker open for this XR (many composed
	// resources), its change may wait for the breaker's periodic event or the function's requeue.
	c.waitCondition("Accepted", "False", 3*time.Minute, "spec.version: Forbidden: a downgrade from "+to)
	time.Sleep(10 * time.Second)
	refused, _ := c.composed()
	for _, n := range []string{"controller-kustomization", "nodes-kustomization"} {
		if v := builtFor(refused[n]); v != to {
			t.Errorf("after a refused downgrade %s carries %q, want %s", n, v, to)
		}
	}
	if hr, err := releases.Get(ctx, "karpenter", metav1.GetOptions{}); err != nil || deployedChart(hr) != to {
		t.Errorf("after a refused downgrade the claimed cluster's release is not %s deployed (%v)", to, err)
	}

	// The rollback the platform may make: within to's minor, to a release with the same CRDs, in
	// the upgrade's order. (A refusal leaves Ready as it was: Accepted comes back with the move.)
	back := rollbackOf(to)
	if back == "" {
		t.Fatalf("internal/versions knows no release %s may be rolled back to: the suite proves a rollback", to)
	}
	movedByFlux(t, c, claimed, to, back, func() error { return c.setVersion(back) })
	c.waitCondition("Accepted", "True", 3*time.Minute)
	survived("by the rollback", back+" deployed", to+" superseded")
}

// rollbackOf is the newest release before to that a part built for to may move back to
// (versions.CheckUpgrade: the same minor, the same CRDs), or "".
func rollbackOf(to string) string {
	back := ""
	for _, v := range versions.All {
		if versions.Compare(v.Version, to) < 0 && versions.CheckUpgrade(to, v.Version) == nil {
			back = v.Version
		}
	}
	return back
}

// movedByFlux moves a request Ready and installed at Karpenter version from to version to (an
// upgrade, or a rollback within a minor) by move (a tenant's spec.version, or a platform's pin),
// with the real Flux: the function changes the
// controller's Kustomization, source-controller pulls the chart, helm-controller upgrades the
// release (CRDs included, CreateReplace), and only once that release is deployed does the
// function move the node pools to it. Meanwhile the request is not Ready and says so.
func movedByFlux(t *testing.T, c *karpenter, claimed *claimedCluster, from, to string, move func() error) {
	t.Helper()
	ctx := t.Context()
	start := time.Now()
	ns, _, _ := unstructured.NestedString(platformInput(t, c.api), "podIdentity", "namespace")
	releases := claimed.dyn.Resource(helmReleaseGVR).Namespace(ns)

	// Every second until the pools have moved, one read of the HelmRelease then one of the
	// composed resources: when helm-controller had deployed the new chart, when the function had
	// moved the node pools' Kustomization, and whether one read saw the chart deployed and then
	// the pools not yet moved. Both only ever go one way, so that read proves the order.
	var deployedAt, poolsAt time.Time
	var inOrder bool
	stop, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		// Once stop is closed (the test saw the pools move), one last read: the loop may have
		// been asleep when they moved.
		for final := false; poolsAt.IsZero(); {
			hr, err := releases.Get(ctx, "karpenter", metav1.GetOptions{})
			deployed := err == nil && deployedChart(hr) == to
			if deployed && deployedAt.IsZero() {
				deployedAt = time.Now()
			}
			got, err := composedOf(ctx, cp, c.xr)
			moved := err == nil && got["nodes-kustomization"] != nil && builtFor(got["nodes-kustomization"]) == to
			switch {
			case moved:
				poolsAt = time.Now()
			case deployed:
				inOrder = true
			}
			if final {
				return
			}
			select {
			case <-stop:
				final = true
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	if err := move(); err != nil {
		close(stop)
		t.Fatalf("cannot move to %s: %v", to, err)
	}
	// While helm-controller upgrades the chart, the request says so (VersionReady Upgrading, from
	// → to, waiting for the controller's Kustomization at to) and is not Ready: both read from
	// one read of the request.
	var upgrading *unstructured.Unstructured
	c.wait(3*time.Minute, "VersionReady=False/Upgrading "+from+" → "+to, func() (bool, error) {
		upgrading = c.get()
		cond := condition(upgrading, "VersionReady")
		msg, _ := cond["message"].(string)
		return cond["status"] == "False" && containsAll(msg, from+" → "+to, "waiting for controller-kustomization to be Ready at "+to), nil
	})
	if r := condition(upgrading, "VersionReady")["reason"]; r != "Upgrading" || conditionStatus(upgrading, "Ready") == "True" {
		t.Errorf("upgrading, VersionReady's reason is %v and the request Ready %s: want Upgrading, not Ready", r, conditionStatus(upgrading, "Ready"))
	}
	c.waitBuiltFor("controller-kustomization", to, 3*time.Minute)
	c.waitBuiltFor("nodes-kustomization", to, 8*time.Minute)
	close(stop)
	<-watched
	switch {
	case poolsAt.IsZero() || deployedAt.IsZero():
		t.Errorf("the watch saw the chart deployed at %v and the pools moved at %v: want both", deployedAt, poolsAt)
	case !inOrder:
		t.Errorf("no read saw %s's chart deployed before the node pools moved to it (deployed %.0fs, moved %.0fs after the change)",
			to, deployedAt.Sub(start).Seconds(), poolsAt.Sub(start).Seconds())
	}
	c.waitCondition("VersionReady", "True", 3*time.Minute, "Karpenter "+to)
	c.waitCondition("Ready", "True", 3*time.Minute)
	t.Logf("moved %s → %s by the real Flux in %.0fs: chart deployed after %.0fs, node pools moved after %.0fs",
		from, to, time.Since(start).Seconds(), deployedAt.Sub(start).Seconds(), poolsAt.Sub(start).Seconds())
}
