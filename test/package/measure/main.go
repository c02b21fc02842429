// Command measure reports what a user of the packages pays: the size of each runtime image
// and package (compressed, as pulled), and the function's cold start — from exec to the
// first answered RunFunction call, the call Crossplane makes — as the median of N runs.
//
//	measure -n 30 -binary BIN -xr examples/xr.yaml -composition apis/composition.yaml FILE.tar|FILE.xpkg...
//
// It prints Markdown for the README. Timings are reported, never asserted.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"gopkg.in/yaml.v3"
)

func main() {
	n := flag.Int("n", 30, "cold starts to measure")
	binary := flag.String("binary", "", "the function binary to start (built for this machine)")
	xr := flag.String("xr", "", "the composite resource sent in the first RunFunction call")
	comp := flag.String("composition", "", "the Composition whose first step's input is sent")
	flag.Parse()
	if *binary == "" || *xr == "" || *comp == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := sizes(flag.Args()); err != nil {
		fail(err)
	}
	req, err := request(*xr, *comp)
	if err != nil {
		fail(err)
	}
	if err := coldStarts(*binary, req, *n); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "measure:", err)
	os.Exit(1)
}

// sizes prints, per image tarball, the compressed size (layers and config, what a node pulls)
// and the uncompressed size of its layers.
func sizes(files []string) error {
	fmt.Println("| file | platform | compressed (pulled) | uncompressed |")
	fmt.Println("|---|---|---|---|")
	for _, f := range files {
		img, err := tarball.ImageFromPath(f, nil)
		if err != nil {
			return fmt.Errorf("cannot read %s: %w", f, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return err
		}
		m, err := img.Manifest()
		if err != nil {
			return err
		}
		compressed := m.Config.Size
		var uncompressed int64
		layers, err := img.Layers()
		if err != nil {
			return err
		}
		for _, l := range layers {
			s, err := l.Size()
			if err != nil {
				return err
			}
			compressed += s
			rc, err := l.Uncompressed()
			if err != nil {
				return err
			}
			u, err := io.Copy(io.Discard, rc)
			rc.Close()
			if err != nil {
				return err
			}
			uncompressed += u
		}
		platform := "—"
		if cf.OS != "" {
			platform = cf.OS + "/" + cf.Architecture
		}
		fmt.Printf("| %s | %s | %s | %s |\n", filepath.Base(f), platform, mib(compressed), mib(uncompressed))
	}
	fmt.Println()
	return nil
}

func mib(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// request is the first call Crossplane makes for the example claim: the XR observed, the
// Composition's input, nothing composed yet.
func request(xrFile, compFile string) (*fnv1.RunFunctionRequest, error) {
	xr, err := structFromYAML(xrFile, nil)
	if err != nil {
		return nil, err
	}
	input, err := structFromYAML(compFile, []string{"spec", "pipeline", "0", "input"})
	if err != nil {
		return nil, err
	}
	return &fnv1.RunFunctionRequest{
		Meta:     &fnv1.RequestMeta{Tag: "coldstart"},
		Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: xr}},
		Input:    input,
	}, nil
}

// structFromYAML reads a YAML file's value at a path (map keys, list indexes) as a Struct.
func structFromYAML(file string, path []string) (*structpb.Struct, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("cannot parse %s: %w", file, err)
	}
	for _, k := range path {
		switch c := v.(type) {
		case map[string]any:
			v = c[k]
		case []any:
			var i int
			if _, err := fmt.Sscan(k, &i); err != nil || i >= len(c) {
				return nil, fmt.Errorf("%s: no %v", file, path)
			}
			v = c[i]
		default:
			return nil, fmt.Errorf("%s: no %v", file, path)
		}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: %v is not an object", file, path)
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		return nil, err
	}
	// Round-trip through JSON to make sure it is what Crossplane would send.
	j, err := protojson.Marshal(s)
	if err != nil {
		return nil, err
	}
	out := &structpb.Struct{}
	return out, protojson.Unmarshal(j, out)
}

// coldStarts starts the binary n times and prints the median, min and max time to the
// first answered RunFunction.
func coldStarts(binary string, req *fnv1.RunFunctionRequest, n int) error {
	var ds []time.Duration
	for range n {
		d, err := coldStart(binary, req)
		if err != nil {
			return err
		}
		ds = append(ds, d)
	}
	slices.Sort(ds)
	fmt.Printf("cold start of %s (exec → first RunFunction answered), %d runs: median %s, min %s, max %s\n",
		filepath.Base(binary), n, ds[len(ds)/2].Round(100*time.Microsecond), ds[0].Round(100*time.Microsecond),
		ds[len(ds)-1].Round(100*time.Microsecond))
	return nil
}

func coldStart(binary string, req *fnv1.RunFunctionRequest) (time.Duration, error) {
	addr, err := freeAddress()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.Command(binary, "--insecure", "--address", addr)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	// Poll the port first: a gRPC client that fails to connect backs off for a second.
	for {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("%s never listened on %s", binary, addr)
		}
		time.Sleep(200 * time.Microsecond)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	rsp, err := fnv1.NewFunctionRunnerServiceClient(conn).RunFunction(ctx, req, grpc.WaitForReady(true))
	if err != nil {
		return 0, fmt.Errorf("RunFunction: %w", err)
	}
	d := time.Since(start)
	if rsp.GetMeta().GetTag() != req.GetMeta().GetTag() {
		return 0, fmt.Errorf("RunFunction answered tag %q, want %q", rsp.GetMeta().GetTag(), req.GetMeta().GetTag())
	}
	return d, nil
}

func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
