//go:build e2e

package e2e

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// binaries are the programs the suite runs, built by hack/e2e.mk and passed in the environment.
type binaries struct {
	etcd, apiserver, controllerManager, scheduler, crossplane, function string
}

func binariesFromEnv() (binaries, error) {
	b := binaries{
		etcd:              os.Getenv("E2E_ETCD"),
		apiserver:         os.Getenv("E2E_KUBE_APISERVER"),
		controllerManager: os.Getenv("E2E_KUBE_CONTROLLER_MANAGER"),
		scheduler:         os.Getenv("E2E_KUBE_SCHEDULER"),
		crossplane:        os.Getenv("E2E_CROSSPLANE"),
		function:          os.Getenv("E2E_FUNCTION"),
	}
	for name, p := range map[string]string{"E2E_ETCD": b.etcd, "E2E_KUBE_APISERVER": b.apiserver,
		"E2E_KUBE_CONTROLLER_MANAGER": b.controllerManager, "E2E_KUBE_SCHEDULER": b.scheduler, "E2E_CROSSPLANE": b.crossplane, "E2E_FUNCTION": b.function} {
		if p == "" {
			return b, fmt.Errorf("%s is not set: run the suite with `make e2e-test`", name)
		}
		if _, err := os.Stat(p); err != nil {
			return b, fmt.Errorf("%s: %w", name, err)
		}
	}
	return b, nil
}

// controlPlane is everything the suite started, on 127.0.0.1.
type controlPlane struct {
	dir    string // temporary root: data, certificates, logs
	logDir string
	bins   binaries
	ca     *testCA
	procs  []*proc // in start order; stopped in reverse
	// nodes: the cluster has nodes, so kube-controller-manager runs the node lifecycle
	// controller too (a claimed cluster's).
	nodes bool
	// kcmFlags are more flags for kube-controller-manager: the hub's come from E2E_KCM_FLAGS.
	kcmFlags []string

	kubeconfig string // admin (system:masters)
	cfg        *rest.Config
	kube       kubernetes.Interface
	dyn        dynamic.Interface
	mapper     *restmapper.DeferredDiscoveryRESTMapper

	functionAddr string
	// crossplaneMetrics is Crossplane core's Prometheus endpoint, crossplaneReadyz its readiness.
	crossplaneMetrics, crossplaneReadyz string
	// functionMetrics is the function's Prometheus endpoint.
	functionMetrics string
	// kubeconfigSecrets: for each cluster the tenancy declares, the Secret in crossplane-system
	// (key kubeconfig) its provider-kubernetes configs name (installDelivery).
	kubeconfigSecrets map[string]string
	// aws is the hub's AWS, the emulator the fake provider-aws makes its resources in (nil in a
	// claimed cluster's control plane).
	aws     *emulatedAWS
	timings []string
}

func (c *controlPlane) timed(what string, start time.Time) {
	c.timings = append(c.timings, fmt.Sprintf("%-44s %6.1fs", what, time.Since(start).Seconds()))
}

// startKubernetes starts etcd, kube-apiserver and kube-controller-manager and waits for the API
// server to be ready.
func (c *controlPlane) startKubernetes(ctx context.Context) error {
	start := time.Now()
	var err error
	if c.ca, err = newTestCA(); err != nil {
		return err
	}
	pki := filepath.Join(c.dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return err
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]

	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPeer)
	etcd, err := startProc(c.logDir, "etcd", nil, c.bins.etcd,
		"--name=e2e", "--data-dir="+filepath.Join(c.dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=e2e="+peerURL, "--unsafe-no-fsync", "--log-level=warn")
	if err != nil {
		return err
	}
	c.procs = append(c.procs, etcd.asKubelet())
	if err := waitHealthy(ctx, 30*time.Second, "etcd healthy", etcd, etcdURL+"/health"); err != nil {
		return err
	}
	c.timed("etcd healthy", start)

	loopback := []net.IP{net.ParseIP("127.0.0.1")}
	serving, err := c.ca.issue("kube-apiserver", nil, loopback, []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"})
	if err != nil {
		return err
	}
	admin, err := c.ca.issue("e2e-admin", []string{"system:masters"}, nil, nil)
	if err != nil {
		return err
	}
	caFile := filepath.Join(pki, "ca.crt")
	files := map[string][]byte{"ca.crt": c.ca.certPEM, "apiserver.crt": serving.certPEM, "apiserver.key": serving.keyPEM}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(pki, name), b, 0o600); err != nil {
			return err
		}
	}
	saPub, saKey, err := serviceAccountKeys(pki)
	if err != nil {
		return err
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	c.kubeconfig = filepath.Join(pki, "admin.kubeconfig")
	if err := os.WriteFile(c.kubeconfig, kubeconfig(server, c.ca.certPEM, admin), 0o600); err != nil {
		return err
	}

	// Every write, at metadata level, for reading a failure back (who created, patched or
	// deleted what, and what the API server answered).
	auditPolicy := filepath.Join(pki, "audit-policy.yaml")
	if err := os.WriteFile(auditPolicy, []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  verbs: [get, list, watch]
- level: None
  resources: [{group: coordination.k8s.io, resources: [leases]}, {group: "", resources: [events]}]
- level: Metadata
`), 0o600); err != nil {
		return err
	}

	apiserver, err := startProc(c.logDir, "kube-apiserver", nil, c.bins.apiserver,
		"--audit-policy-file="+auditPolicy, "--audit-log-path="+filepath.Join(c.logDir, auditLog+".log"),
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(apiPort),
		"--tls-cert-file="+filepath.Join(pki, "apiserver.crt"), "--tls-private-key-file="+filepath.Join(pki, "apiserver.key"),
		"--client-ca-file="+caFile, "--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+saPub, "--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.0.0.0/24", "--endpoint-reconciler-type=none",
		"--cert-dir="+filepath.Join(c.dir, "apiserver-certs"),
		// E2E_PROFILING=1 serves /debug/pprof (docs/performance.md says how to take a profile).
		"--profiling="+strconv.FormatBool(os.Getenv("E2E_PROFILING") != ""))
	if err != nil {
		return err
	}
	c.procs = append(c.procs, apiserver.asKubelet())

	if c.cfg, err = clientcmd.BuildConfigFromFlags("", c.kubeconfig); err != nil {
		return err
	}
	c.cfg.QPS, c.cfg.Burst = 200, 400
	c.cfg.WarningHandler = rest.NoWarnings{}
	if c.kube, err = kubernetes.NewForConfig(c.cfg); err != nil {
		return err
	}
	if c.dyn, err = dynamic.NewForConfig(c.cfg); err != nil {
		return err
	}
	if err := c.apiserverReady(ctx, apiserver, 90*time.Second); err != nil {
		return err
	}
	c.timed("kube-apiserver ready", start)

	// Without the garbage collector, deleting a claim orphans everything it composed; without the
	// namespace controller a deleted namespace never goes away. Nodes need the node lifecycle
	// controller: the API server taints every new node not-ready (its TaintNodesByCondition
	// admission), and only that controller lifts the taint once the node reports Ready; the final
	// check is a Deployment, which needs the deployment and replicaset controllers for a Pod.
	controllers := "garbagecollector,namespace"
	if c.nodes {
		controllers += ",nodelifecycle,deployment,replicaset"
	}
	kcm, err := startProc(c.logDir, "kube-controller-manager", nil, c.bins.controllerManager,
		append([]string{"--kubeconfig=" + c.kubeconfig, "--controllers=" + controllers,
			"--leader-elect=false", "--secure-port=0"}, c.kcmFlags...)...)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, kcm.asKubelet())
	return nil
}

// apiserverReady returns once the control plane's kube-apiserver, p, answers /readyz "ok",
// within timeout; it gives up at once if p exited and the kubelet's part will not start it again.
func (c *controlPlane) apiserverReady(ctx context.Context, p *proc, timeout time.Duration) error {
	return waitFor(ctx, timeout, "kube-apiserver ready", func() (bool, error) {
		if done, err := p.gone(); done {
			return false, fmt.Errorf("kube-apiserver exited: %v", err)
		}
		body, err := c.kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
}

// stop ends every process the suite started, in reverse order, by PID. None is started again
// by the kubelet's part (proc.asKubelet) once the first is stopped.
func (c *controlPlane) stop() {
	for _, p := range c.procs {
		p.hold()
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		// kube-apiserver can take a minute to drain on TERM; nothing here needs a clean exit.
		p.stop(10 * time.Second)
	}
}

// report prints where every process's log is and, when the run failed, the end of each.
func (c *controlPlane) report(failed bool) {
	fmt.Println("e2e: logs in", c.logDir)
	for _, p := range c.procs {
		fmt.Printf("e2e:   %-24s %s\n", p.name, p.log)
	}
	fmt.Printf("e2e:   %-24s %s\n", "API writes (audit)", filepath.Join(c.logDir, auditLog+"*.log"))
	if !failed {
		return
	}
	// Every process's log, a claimed cluster's (in a folder of its own) too.
	_ = filepath.WalkDir(c.logDir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || strings.HasPrefix(e.Name(), auditLog) {
			return nil
		}
		fmt.Printf("\n===== %s (last 40 lines) =====\n%s\n", path, tail(path, 40))
		return nil
	})
}

// waitFor polls cond every 500ms until it is true or timeout passes. An error from cond ends
// the wait at once; a condition not met yet returns false and a nil error. (Most conditions
// list every composed kind of an XR: polled every 200ms, with the fake's own polls, they kept
// the hub's API server the busiest process of a run, on two cores the shards share.)
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// auditLog names the hub's audit log: <logs>/kube-apiserver-audit.log, and its older parts, which
// kube-apiserver's log writer renames kube-apiserver-audit-<time>.log at 100 MB (k8s.io/apiserver
// v0.35.4 pkg/server/options/audit.go leaves lumberjack's MaxSize 0 without
// --audit-log-maxsize; gopkg.in/natefinch/lumberjack.v2 defaultMaxSize = 100).
const auditLog = "kube-apiserver-audit"

// write is what a write to the API server was: the program that sent it (its user agent up to
// the first "/", e.g. crossplane-core-v2.4.2), its verb and the resource it wrote (with the
// subresource, e.g. objects/status).
type write struct{ agent, verb, resource string }

// apiWrites are writes counted by what they were.
type apiWrites map[write]int

// writes counts the writes the hub's API server received from from until to, read from its audit
// log (auditEvents).
func (c *controlPlane) writes(from, to time.Time) (apiWrites, error) {
	w := apiWrites{}
	err := c.auditEvents(from, to, func(e *auditv1.Event) {
		resource := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			resource += "/" + e.ObjectRef.Subresource
		}
		agent, _, _ := strings.Cut(e.UserAgent, "/")
		w[write{agent, e.Verb, resource}]++
	})
	return w, err
}

// auditEvents calls f with each event of the hub's audit log that names an object and was
// received from from until to, the log's older parts first. The suite's policy puts every write
// there at metadata level (audit.k8s.io/v1 Events, decoded with k8s.io/apiserver's
// pkg/apis/audit/v1 types: v0.35.0 here, where the other modules have it,
// hack/check-module-versions.sh; the API version kube-apiserver v1.35.4 writes).
func (c *controlPlane) auditEvents(from, to time.Time, f func(*auditv1.Event)) error {
	// The older parts are named kube-apiserver-audit-<time>.log: they sort before the current one.
	files, err := filepath.Glob(filepath.Join(c.logDir, auditLog+"*.log"))
	if err != nil {
		return err
	}
	for _, name := range files {
		if err := readAudit(name, from, to, f); err != nil {
			return err
		}
	}
	return nil
}

func readAudit(name string, from, to time.Time, f func(*auditv1.Event)) error {
	file, err := os.Open(name)
	if err != nil {
		return err
	}
	defer file.Close()
	lines := bufio.NewScanner(file)
	lines.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for lines.Scan() {
		var e auditv1.Event
		if err := json.Unmarshal(lines.Bytes(), &e); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		at := e.RequestReceivedTimestamp.Time
		if e.ObjectRef == nil || at.Before(from) || !at.Before(to) {
			continue
		}
		f(&e)
	}
	return lines.Err()
}

// String says how many writes there were, each program's share, and the twelve most frequent
// kinds of write, one a line: "60762 writes: crossplane-core-v2.4.2 74%, e2e.test 13%, …" then
// "  5751  9%  crossplane-core-v2.4.2 patch clusterusages".
func (w apiWrites) String() string {
	total, agents := 0, map[string]int{}
	for k, n := range w {
		total += n
		agents[k.agent] += n
	}
	share := func(n int) float64 { return 100 * float64(n) / float64(total) }
	var by []string
	for _, a := range slices.SortedFunc(maps.Keys(agents), func(a, b string) int { return cmp.Or(cmp.Compare(agents[b], agents[a]), strings.Compare(a, b)) }) {
		by = append(by, fmt.Sprintf("%s %.0f%%", a, share(agents[a])))
	}
	lines := []string{fmt.Sprintf("%d writes: %s", total, strings.Join(by, ", "))}
	kinds := slices.SortedFunc(maps.Keys(w), func(a, b write) int {
		return cmp.Or(cmp.Compare(w[b], w[a]), strings.Compare(a.agent, b.agent), strings.Compare(a.verb, b.verb), strings.Compare(a.resource, b.resource))
	})
	for _, k := range kinds[:min(len(kinds), 12)] {
		lines = append(lines, fmt.Sprintf("  %6d %3.0f%%  %s %s %s", w[k], share(w[k]), k.agent, k.verb, k.resource))
	}
	return strings.Join(lines, "\n")
}
