// Command function-karpenter is the gRPC edge of the function: it parses the
// conventional flags and serves RunFunction. The logic lives in internal/.
package main

import (
	"github.com/alecthomas/kong"
	"github.com/crossplane/function-sdk-go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/do-now/function-karpenter/internal/cache"
)

// CLI holds the flags every Crossplane function takes.
type CLI struct {
	Debug bool `help:"Emit debug logs in addition to info logs." short:"d"`

	Network     string `default:"tcp" help:"Network on which to listen for gRPC connections."`
	Address     string `default:":9443" help:"Address at which to listen for gRPC connections."`
	TLSCertsDir string `env:"TLS_SERVER_CERTS_DIR" help:"Directory containing server certs (tls.key, tls.crt) and the CA used to verify client certificates (ca.crt)"`
	Insecure    bool   `help:"Run without mTLS credentials. If you supply this flag --tls-certs-dir will be ignored."`
	// MaxRecvMessageSize bounds a request: Crossplane v2.4.2 dials the
	// function with no send limit of its own (internal/xfn/function_runner.go),
	// so grpc-go's client default, math.MaxInt32 (clientconn.go,
	// defaultClientMaxSendMessageSize), and this server's limit decide. A
	// request over it never reaches the function: the XR's reconcile fails
	// with ResourceExhausted, and its claim says nothing.
	MaxRecvMessageSize int    `default:"64" help:"Maximum size of received messages in MB. A request carries every object labelled as a lease or controller role for the XR's cluster in the namespaces the platform gives it to: tenants there can inflate it (docs/platform.md, \"Who is trusted with what\")."`
	MetricsAddress     string `default:":8080" help:"Address at which to serve Prometheus metrics (the SDK's gRPC server metrics and function_karpenter_answers_total); empty: none."`
	CachedXRs          int    `default:"1000" help:"How many XRs' last answers to keep, to answer a settled XR's unchanged request without composing it again (0: no cache)."`
}

// Run serves the function until the process is stopped.
func (c *CLI) Run() error {
	log, err := function.NewLogger(c.Debug)
	if err != nil {
		return err
	}
	f := &Function{log: log, debug: c.Debug}
	if c.CachedXRs > 0 {
		// An XR holds at most two answers: its composed one, and its first
		// call's when Crossplane asks twice in a reconcile.
		f.cache = cache.New(2 * c.CachedXRs)
	}
	if c.MetricsAddress != "" {
		f.answers = answersMetric()
		prometheus.MustRegister(f.answers)
	}
	serveWire(f)
	return function.Serve(f,
		function.WithMetricsServer(c.MetricsAddress),
		function.Listen(c.Network, c.Address),
		function.MTLSCertificates(c.TLSCertsDir),
		function.Insecure(c.Insecure),
		function.MaxRecvMessageSize(c.MaxRecvMessageSize*1024*1024))
}

func main() {
	ctx := kong.Parse(&CLI{}, kong.Description("A Crossplane composition function that installs Karpenter on EKS, one Ready step at a time."))
	ctx.FatalIfErrorf(ctx.Run())
}
