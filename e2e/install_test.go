//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"github.com/do-now/function-karpenter/internal/scope"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// providerAWSCRDs are the provider-aws v2.5.0 CRDs of every kind the function composes in both
// APIs (internal/scope): cluster-scoped *.aws.upbound.io for the claim's XR, namespaced
// *.aws.m.upbound.io for the namespaced XR. The function asks Crossplane for the controller Roles
// of both scopes for either API (one Karpenter per cluster), so a claim needs the namespaced
// Role's CRD too. And the provider configs those managed resources name, which the fake provider
// reads as the real one does: the cluster-scoped ProviderConfig, and the namespaced kinds'
// ClusterProviderConfig and (namespaced, a tenant could create one) ProviderConfig.
// providerKubernetesCRDs likewise: provider-kubernetes v1.3.1's Object in both scopes, what an
// Object names, and where the provider records that it does.
var providerAWSCRDs, providerKubernetesCRDs = func() (aws, kubernetes []string) {
	configs := map[string]bool{}
	for _, k := range composedKinds {
		if k.configs == "" {
			continue // a Usage: Crossplane's own
		}
		file := scope.CRDFile(k.gvr.Group, k.gvr.Resource)
		if k.kind == scope.ObjectKind {
			kubernetes = append(kubernetes, file)
		} else {
			aws = append(aws, file)
		}
		if configs[k.configs] {
			continue
		}
		configs[k.configs] = true
		names := []string{scope.CRDFile(k.configs, "providerconfigs")}
		if k.namespaced {
			names = append(names, scope.CRDFile(k.configs, "clusterproviderconfigs"))
		}
		if k.kind == scope.ObjectKind {
			// The real provider-kubernetes (realClaimedClusters) records each Object's use
			// of its provider config in a ProviderConfigUsage of the config's group, and fails
			// to connect without that CRD.
			kubernetes = append(kubernetes, append(names, scope.CRDFile(k.configs, "providerconfigusages"))...)
		} else {
			aws = append(aws, names...)
		}
	}
	return aws, kubernetes
}()

// readObjects decodes every document of a YAML stream.
func readObjects(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := d.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("cannot decode %s: %w", path, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// gvr maps an object's kind to its resource through discovery, refreshed when a kind is not
// known yet (CRDs appear during the run).
func (c *controlPlane) gvr(u *unstructured.Unstructured) (schema.GroupVersionResource, bool, error) {
	gvk := u.GroupVersionKind()
	for attempt := 0; ; attempt++ {
		if c.mapper == nil {
			c.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.kube.Discovery()))
		}
		m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err == nil {
			return m.Resource, m.Scope.Name() == "namespace", nil
		}
		if attempt == 1 {
			return schema.GroupVersionResource{}, false, fmt.Errorf("cannot map %s: %w", gvk, err)
		}
		c.mapper.Reset()
	}
}

// apply server-side applies an object as the test's field manager.
func (c *controlPlane) apply(ctx context.Context, u *unstructured.Unstructured) error {
	gvr, namespaced, err := c.gvr(u)
	if err != nil {
		return err
	}
	ri := c.dyn.Resource(gvr)
	if namespaced {
		_, err = ri.Namespace(u.GetNamespace()).Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "e2e", Force: true})
	} else {
		_, err = ri.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "e2e", Force: true})
	}
	if err != nil {
		return fmt.Errorf("cannot apply %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// installCRDs applies every CRD of the given files and waits until all are established.
func (c *controlPlane) installCRDs(ctx context.Context, files ...string) error {
	var names []string
	for _, f := range files {
		objs, err := readObjects(f)
		if err != nil {
			return err
		}
		for _, u := range objs {
			if u.GetKind() != "CustomResourceDefinition" {
				return fmt.Errorf("%s: want only CustomResourceDefinitions, found %s", f, u.GetKind())
			}
			if err := withoutConversionWebhook(u); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			if _, err := c.dyn.Resource(crdGVR).Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "e2e", Force: true}); err != nil {
				return fmt.Errorf("cannot apply CRD %s from %s: %w", u.GetName(), f, err)
			}
			names = append(names, u.GetName())
		}
	}
	for _, n := range names {
		if err := waitFor(ctx, 60*time.Second, "CRD "+n+" established", func() (bool, error) {
			u, err := c.dyn.Resource(crdGVR).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			return conditionStatus(u, "Established") == "True", nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// withoutConversionWebhook serves a CRD that converts between versions through its provider's
// webhook (provider-kubernetes' Object: v1alpha1 and v1alpha2) at its storage version alone,
// with no conversion: the package manager would point the webhook at the provider's pod, and
// there is none here. Anything that asked for another version would now fail loudly instead of
// being converted.
func withoutConversionWebhook(crd *unstructured.Unstructured) error {
	strategy, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "strategy")
	if strategy != "Webhook" {
		return nil
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	storage := 0
	for _, v := range versions {
		m := v.(map[string]any)
		if m["storage"] == true {
			storage++
			continue
		}
		m["served"] = false
	}
	if storage != 1 {
		return fmt.Errorf("CRD %s: want one storage version, found %d", crd.GetName(), storage)
	}
	if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
		return err
	}
	return unstructured.SetNestedMap(crd.Object, map[string]any{"strategy": "None"}, "spec", "conversion")
}

// crdFiles lists the CRD files installed from the module zips the Makefile located.
func crdFiles() ([]string, error) {
	aws := os.Getenv("E2E_PROVIDER_AWS_CRDS")
	if aws == "" {
		return nil, errors.New("E2E_PROVIDER_AWS_CRDS is not set: run the suite with `make e2e-test`")
	}
	var files []string
	for _, f := range providerAWSCRDs {
		files = append(files, filepath.Join(aws, f))
	}
	k8s := os.Getenv("E2E_PROVIDER_KUBERNETES_CRDS")
	if k8s == "" {
		return nil, errors.New("E2E_PROVIDER_KUBERNETES_CRDS is not set: run the suite with `make e2e-test`")
	}
	for _, f := range providerKubernetesCRDs {
		files = append(files, filepath.Join(k8s, f))
	}
	// No Flux CRD: the Kustomizations go to the claimed cluster inside Objects, and Crossplane's
	// cluster needs no Flux at all.
	return files, nil
}

// startCrossplane runs `crossplane core init` until it succeeds (it races the establishment of
// its own CRDs), then starts the core controllers with packages not run (the function is served
// by the suite), the test CA's client certificate for functions, and the webhook server on
// loopback (without it Crossplane runs no Usage controller at all).
func (c *controlPlane) startCrossplane(ctx context.Context) error {
	start := time.Now()
	crds := os.Getenv("E2E_CROSSPLANE_CRDS")
	if crds == "" {
		return errors.New("E2E_CROSSPLANE_CRDS is not set: run the suite with `make e2e-test`")
	}
	if err := c.ensureNamespace(ctx, "crossplane-system"); err != nil {
		return err
	}
	env := []string{
		"KUBECONFIG=" + c.kubeconfig,
		"POD_NAMESPACE=crossplane-system",
		"CRDS_PATH=" + crds,
		"TLS_CA_SECRET_NAME=crossplane-root-ca",
		"TLS_CLIENT_SECRET_NAME=crossplane-tls-client",
	}
	var err error
	for attempt := 1; attempt <= 10; attempt++ {
		if err = runProc(c.logDir, "crossplane-init", env, 2*time.Minute, c.bins.crossplane, "core", "init", "--enable-webhooks=false"); err == nil {
			break
		}
		time.Sleep(2 * time.Second)
	}
	if err != nil {
		return fmt.Errorf("crossplane core init kept failing: %w", err)
	}
	c.timed("crossplane core init", start)

	clientDir := filepath.Join(c.dir, "crossplane-client-tls")
	if err := c.ca.writeTLSDir(clientDir, "crossplane"); err != nil {
		return err
	}
	// Crossplane's webhook server, which enforces Usages, on loopback with a serving certificate
	// from the test CA.
	serverDir := filepath.Join(c.dir, "crossplane-webhook-tls")
	if err := c.ca.writeTLSDir(serverDir, "crossplane-webhook", net.ParseIP("127.0.0.1")); err != nil {
		return err
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	metrics, health, webhook := ports[0], ports[1], ports[2]
	args := []string{"--debug", "core", "start",
		"--enable-webhooks=true", "--webhook-port=" + strconv.Itoa(webhook), "--package-runtime=External",
		"--xpkg-cache-dir=" + filepath.Join(c.dir, "xpkg-cache"),
		"--metrics-port=" + strconv.Itoa(metrics), "--health-probe-port=" + strconv.Itoa(health)}
	// E2E_CROSSPLANE_FLAGS (make's CROSSPLANE_FLAGS): more flags for core start, a platform's
	// settings under load (docs/platform.md#many-claims-on-one-control-plane).
	args = append(args, strings.Fields(os.Getenv("E2E_CROSSPLANE_FLAGS"))...)
	p, err := startProc(c.logDir, "crossplane", append(env, "TLS_CLIENT_CERTS_DIR="+clientDir, "TLS_SERVER_CERTS_DIR="+serverDir),
		c.bins.crossplane, args...)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p.asKubelet())
	c.crossplaneMetrics = fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics)
	c.crossplaneReadyz = fmt.Sprintf("http://127.0.0.1:%d/readyz", health)
	if err := waitHealthy(ctx, 60*time.Second, "crossplane ready (webhook server started)", p, c.crossplaneReadyz); err != nil {
		return err
	}
	c.timed("crossplane core started", start)
	return c.installUsageWebhook(ctx, crds, webhook)
}

// installUsageWebhook registers Crossplane's no-usages webhook, from the configuration its module
// ships, pointed at the loopback webhook server instead of an in-cluster Service: deleting an
// object labelled crossplane.io/in-use is then refused while a Usage of it exists.
func (c *controlPlane) installUsageWebhook(ctx context.Context, crds string, port int) error {
	objs, err := readObjects(filepath.Join(crds, "..", "webhookconfigurations", "usage.yaml"))
	if err != nil {
		return err
	}
	if len(objs) != 1 || objs[0].GetKind() != "ValidatingWebhookConfiguration" {
		return fmt.Errorf("want one ValidatingWebhookConfiguration in Crossplane's webhookconfigurations/usage.yaml, found %d objects", len(objs))
	}
	vwc := objs[0]
	hooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
	for i, h := range hooks {
		hook := h.(map[string]any)
		path, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "path")
		hook["clientConfig"] = map[string]any{
			"url":      fmt.Sprintf("https://127.0.0.1:%d%s", port, path),
			"caBundle": base64.StdEncoding.EncodeToString(c.ca.certPEM),
		}
		hooks[i] = hook
	}
	if err := unstructured.SetNestedSlice(vwc.Object, hooks, "webhooks"); err != nil {
		return err
	}
	return c.apply(ctx, vwc)
}

// startFunction serves the function binary on loopback with mTLS: its serving certificate
// (IP SAN 127.0.0.1) and Crossplane's client certificate come from the same test CA.
func (c *controlPlane) startFunction(ctx context.Context) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	dir := filepath.Join(c.dir, "function-tls")
	if err := c.ca.writeTLSDir(dir, "function-karpenter", net.ParseIP("127.0.0.1")); err != nil {
		return err
	}
	c.functionAddr = fmt.Sprintf("127.0.0.1:%d", ports[0])
	metrics := fmt.Sprintf("127.0.0.1:%d", ports[1])
	c.functionMetrics = "http://" + metrics + "/metrics"
	p, err := startProc(c.logDir, "function", nil, c.bins.function, "--debug", "--tls-certs-dir="+dir, "--address="+c.functionAddr,
		"--metrics-address="+metrics)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	return c.functionListening(ctx, p)
}

// functionListening waits until the function p accepts connections.
func (c *controlPlane) functionListening(ctx context.Context, p *proc) error {
	return waitFor(ctx, 30*time.Second, "function listening on "+c.functionAddr, func() (bool, error) {
		if done, err := p.exited(); done {
			return false, fmt.Errorf("function exited: %v", err)
		}
		conn, err := net.DialTimeout("tcp", c.functionAddr, time.Second)
		if err != nil {
			return false, nil
		}
		conn.Close()
		return true, nil
	})
}

// registerFunction makes Crossplane dial the suite's function: a paused Function and an active,
// paused FunctionRevision (so the package manager never tries to pull or run them) whose status
// carries the loopback endpoint.
func (c *controlPlane) registerFunction(ctx context.Context, name string) error {
	const pkg = "xpkg.crossplane.io/do-now/function-karpenter:v0.1.0"
	paused := map[string]any{"crossplane.io/paused": "true"}
	fn := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pkg.crossplane.io/v1", "kind": "Function",
		"metadata": map[string]any{"name": name, "annotations": paused},
		"spec":     map[string]any{"package": pkg},
	}}
	rev := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pkg.crossplane.io/v1", "kind": "FunctionRevision",
		"metadata": map[string]any{"name": name + "-e2e", "annotations": paused,
			"labels": map[string]any{"pkg.crossplane.io/package": name}},
		"spec": map[string]any{"desiredState": "Active", "image": pkg, "revision": int64(1)},
	}}
	for _, u := range []*unstructured.Unstructured{fn, rev} {
		if err := c.apply(ctx, u); err != nil {
			return err
		}
	}
	gvr, _, err := c.gvr(rev)
	if err != nil {
		return err
	}
	status := fmt.Appendf(nil, `{"status":{"endpoint":%q,"capabilities":["composition"]}}`, c.functionAddr)
	if _, err := c.dyn.Resource(gvr).Patch(ctx, rev.GetName(), types.MergePatchType, status, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("cannot patch FunctionRevision status: %w", err)
	}
	return nil
}

// installAPI applies, for every API, the XRD and the Composition from the files the
// Configuration package ships (crossplane.yaml packages apis/), and waits for Crossplane to serve
// them: the claim API's XR and claim, the namespaced XR. Both Compositions must call the same
// function, the one the suite registers.
func (c *controlPlane) installAPI(ctx context.Context, repo string) (functionName string, err error) {
	var xrds []*unstructured.Unstructured
	for _, a := range apis {
		xrd, comp, err := a.read(repo)
		if err != nil {
			return "", err
		}
		pipeline, _, _ := unstructured.NestedSlice(comp.Object, "spec", "pipeline")
		fn := ""
		for _, s := range pipeline {
			if n, _, _ := unstructured.NestedString(s.(map[string]any), "functionRef", "name"); n != "" {
				fn = n
			}
		}
		if len(pipeline) != 1 || fn == "" {
			return "", fmt.Errorf("%s: want a Composition with one function step, found %d steps", a.composition, len(pipeline))
		}
		if functionName != "" && fn != functionName {
			return "", fmt.Errorf("%s calls function %q, the other Composition %q", a.composition, fn, functionName)
		}
		functionName = fn
		for _, u := range []*unstructured.Unstructured{xrd, comp} {
			if err := c.apply(ctx, u); err != nil {
				return "", err
			}
		}
		xrds = append(xrds, xrd)
	}
	for _, xrd := range xrds {
		gvr, _, err := c.gvr(xrd)
		if err != nil {
			return "", err
		}
		// Only an XRD with claims offers one (Offered); a namespaced XR's XRD is Established alone.
		_, claims, _ := unstructured.NestedMap(xrd.Object, "spec", "claimNames")
		if err := waitFor(ctx, 90*time.Second, "XRD "+xrd.GetName()+" established (and its claim offered)", func() (bool, error) {
			u, err := c.dyn.Resource(gvr).Get(ctx, xrd.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			return conditionStatus(u, "Established") == "True" && (!claims || conditionStatus(u, "Offered") == "True"), nil
		}); err != nil {
			return "", err
		}
	}
	return functionName, nil
}

// installDelivery creates, for every cluster the shipped Compositions' tenancy declares, what the
// platform team sets up once per cluster so that Crossplane can reach it: the provider-kubernetes
// config every Object (step three's and the two Kustomizations') is applied through, the one
// credential of the cluster — a ProviderConfig for the claim's cluster-scoped Objects, a
// ClusterProviderConfig of the same name for the namespaced XR's Objects. Its name is the one the
// tenancy declares, else the documented default, the cluster's name. And once, the provider-aws
// configs the managed resources of both scopes name (input.providerConfigName, default
// "default"). The fake provider connects to nothing through them; it only requires them to
// exist, as the real provider would. In AWS, the emulator, it seeds what the platform's
// prerequisites hold for each cluster (emulatedAWS.seed).
func (c *controlPlane) installDelivery(ctx context.Context, repo string) ([]string, error) {
	var clusters []declaredCluster
	awsConfigs := map[string]bool{}
	for _, a := range apis {
		input, err := a.input(repo)
		if err != nil {
			return nil, err
		}
		declared := declaredClusters(input)
		if len(declared) == 0 {
			return nil, fmt.Errorf("%s: the input declares no tenancy.clusters", a.composition)
		}
		for _, cl := range declared {
			if !slices.ContainsFunc(clusters, func(c declaredCluster) bool { return c.name == cl.name && c.providerConfig == cl.providerConfig }) {
				clusters = append(clusters, cl)
			}
		}
		pc, _ := input["providerConfigName"].(string)
		if pc == "" {
			pc = "default"
		}
		awsConfigs[pc] = true
	}
	secret := func(name, key string) map[string]any {
		return map[string]any{"credentials": map[string]any{"source": "Secret",
			"secretRef": map[string]any{"namespace": "crossplane-system", "name": name, "key": key}}}
	}
	config := func(apiVersion, kind, name string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name}, "spec": spec,
		}}
	}
	var made []string
	c.kubeconfigSecrets = map[string]string{}
	for _, cl := range clusters {
		c.kubeconfigSecrets[cl.name] = cl.providerConfig + "-cluster"
		for _, u := range []*unstructured.Unstructured{
			config("kubernetes.crossplane.io/v1alpha1", "ProviderConfig", cl.providerConfig, secret(c.kubeconfigSecrets[cl.name], "kubeconfig")),
			config("kubernetes.m.crossplane.io/v1alpha1", "ClusterProviderConfig", cl.providerConfig, secret(c.kubeconfigSecrets[cl.name], "kubeconfig")),
		} {
			if err := c.apply(ctx, u); err != nil {
				return nil, err
			}
		}
		made = append(made, fmt.Sprintf("%s: ProviderConfig and ClusterProviderConfig %s", cl.name, cl.providerConfig))
	}
	if err := c.aws.seed(ctx, clusters...); err != nil {
		return nil, fmt.Errorf("cannot seed the AWS emulator: %w", err)
	}
	for _, cl := range clusters {
		made = append(made, fmt.Sprintf("%s: in AWS (moto, %s), node role %s, instance profile %s, EKS cluster %s (%s)",
			cl.name, c.aws.endpoint, cl.nodeRoleARN, cl.instanceProfile, cl.name, cl.region))
	}
	for _, pc := range sortedKeys(awsConfigs) {
		for _, u := range []*unstructured.Unstructured{
			config("aws.upbound.io/v1beta1", "ProviderConfig", pc, secret("aws-credentials", "credentials")),
			config("aws.m.upbound.io/v1beta1", "ClusterProviderConfig", pc, secret("aws-credentials", "credentials")),
		} {
			if err := c.apply(ctx, u); err != nil {
				return nil, err
			}
		}
		made = append(made, fmt.Sprintf("AWS: ProviderConfig and ClusterProviderConfig %s", pc))
	}
	return made, nil
}

func (c *controlPlane) ensureNamespace(ctx context.Context, name string) error {
	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name},
	}}
	_, err := c.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(ctx, ns, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// conditionStatus is the status of a condition of an object, or "" when it has none.
func conditionStatus(u *unstructured.Unstructured, typ string) string {
	c := condition(u, typ)
	if c == nil {
		return ""
	}
	s, _ := c["status"].(string)
	return s
}

func condition(u *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == typ {
			return m
		}
	}
	return nil
}
