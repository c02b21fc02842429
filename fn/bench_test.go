package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/do-now/function-karpenter/internal/cache"
)

// A benchState is what Crossplane observes for the example claim at one
// point of its life, reached by walking the fake providers.
type benchState struct {
	name     string
	observed map[resource.Name]map[string]any
	// conds are the conditions the XR shows: those the function set when
	// it answered this state, as Crossplane writes them to the XR.
	conds []any
}

// onto adds the state to a request: what is observed and the XR's
// conditions.
func (s benchState) onto(r *requestBuilder) *requestBuilder {
	r.xrConds = slices.Clone(s.conds)
	return r.observing(s.observed)
}

// xrConditions are a response's conditions as Crossplane writes them to the
// XR's status.
func xrConditions(rsp *fnv1.RunFunctionResponse) []any {
	status := map[fnv1.Status]string{fnv1.Status_STATUS_CONDITION_TRUE: "True", fnv1.Status_STATUS_CONDITION_FALSE: "False",
		fnv1.Status_STATUS_CONDITION_UNKNOWN: "Unknown"}
	var out []any
	for _, c := range rsp.GetConditions() {
		out = append(out, map[string]any{"type": c.GetType(), "status": status[c.GetStatus()], "reason": c.GetReason(), "message": c.GetMessage()})
	}
	return out
}

// benchStates walks the example claim with the fake providers answering at
// once, and keeps three states: nothing observed; mid-sequence (steps one
// and two Ready, the controller's namespace Ready, its ServiceAccount and
// access check not yet); and everything Ready — every step, every Usage,
// the status — checked as the function itself reports it.
func benchStates(b testing.TB) []benchState {
	b.Helper()
	aws := fakeProviders{t: b, account: account}
	var mid, all *benchState
	var observed map[resource.Name]map[string]any
	for round := 0; all == nil; round++ {
		if round > 20 {
			b.Fatal("the example claim did not get Ready in 20 rounds")
		}
		rsp := run(b, settled(aRequest(b)).observing(observed).build())
		conds := conditionsOf(rsp)
		switch {
		case mid == nil && conds["InterruptionWiringReady"].Status == fnv1.Status_STATUS_CONDITION_TRUE &&
			conds["AccessCheckReady"].Status == fnv1.Status_STATUS_CONDITION_FALSE && observedReady(observed["controller-namespace"]) &&
			observed["access-check"] == nil:
			mid = &benchState{"MidSequence", observed, xrConditions(rsp)}
		case rsp.GetDesired().GetComposite().GetReady() != fnv1.Ready_READY_FALSE && len(observed) == len(rsp.GetDesired().GetResources()):
			all = &benchState{"AllReady", observed, xrConditions(rsp)}
		}
		observed = aws.observe(rsp, true)
	}
	if mid == nil {
		b.Fatal("the walk never reached the mid-sequence state")
	}
	return []benchState{{name: "Nothing"}, *mid, *all}
}

// settled answers the function's requirements as Crossplane v2.4 does on a
// reconcile after the first: with what it found the last time (here,
// nothing: no other XR holds the cluster).
func settled(b *requestBuilder) *requestBuilder { return b.requiring() }

// BenchmarkRunFunction is one in-process call for each state, with the
// requirements already answered: ns/op, B/op, allocs/op, and how many
// composed resources the call observed and answered. "Composed" is the
// function without its cache: what a request it has not seen costs.
// "Served" is the function as it serves (main.go), called again with the
// same request, as Crossplane calls a claim whose state has not changed: a
// settled claim's answer comes from the cache; a waiting claim's, paced by
// the clock, is composed every time.
func BenchmarkRunFunction(b *testing.B) {
	for _, s := range benchStates(b) {
		for _, fn := range []struct {
			name string
			f    *Function
		}{
			{"Composed", &Function{log: logging.NewNopLogger()}},
			{"Served", &Function{log: logging.NewNopLogger(), cache: cache.New(1000)}},
		} {
			b.Run(s.name+"/"+fn.name, func(b *testing.B) {
				req := s.onto(settled(aRequest(b))).build()
				rsp := mustRun(b, fn.f, req)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := fn.f.RunFunction(context.Background(), req); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(req.GetObserved().GetResources())), "observed")
				b.ReportMetric(float64(len(rsp.GetDesired().GetResources())), "desired")
			})
		}
	}
}

// BenchmarkCacheMemory is what the cache holds for each settled XR: the
// heap still in use, after a collection, once 100 settled XRs' answers are
// cached, per XR (retained-B/XR). Each request is encoded, decoded by the
// function's gRPC codec and answered, as the served function answers it
// (its desired resources kept encoded: setDesiredEncoded), then dropped, as
// gRPC drops it, so only what the function keeps is counted.
func BenchmarkCacheMemory(b *testing.B) {
	all := benchStates(b)[2]
	const xrs = 100
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var retained uint64
	for b.Loop() {
		before := heap()
		f := &Function{log: logging.NewNopLogger(), cache: cache.New(1000)}
		w := wire{f: f, proto: encoding.GetCodecV2("proto")}
		for i := range xrs {
			r := all.onto(settled(aRequest(b)))
			r.xr["metadata"] = map[string]any{"name": fmt.Sprintf("team-a-karpenter-%03d", i)}
			raw, err := proto.Marshal(r.build())
			if err != nil {
				b.Fatal(err)
			}
			req := &fnv1.RunFunctionRequest{}
			if err := w.Unmarshal(mustBuffer(raw), req); err != nil {
				b.Fatal(err)
			}
			if _, apart := f.decoded.Load(req); !apart {
				b.Fatal("the codec did not decode the request apart, as it does a tagged request it has no answer for")
			}
			mustRun(b, f, req)
		}
		if f.cache.Len() != xrs {
			b.Fatalf("%d XRs cached, want %d", f.cache.Len(), xrs)
		}
		retained = heap() - before
		runtime.KeepAlive(f)
	}
	b.ReportMetric(float64(retained)/xrs, "retained-B/XR")
}

// BenchmarkGRPCReconcile is one reconcile against the real server, built
// from this package and run as its own process on loopback. For the settled
// claim: "Asked" is Crossplane's first reconcile, where the function asks
// for its requirements and is called again with the answer (two calls);
// "Prefilled" is a later one, answered from the start (one call). Each
// repeats the same request, as Crossplane does for a claim whose state has
// not changed. "MidSequence" is a claim on its way, prefilled.
// cpu-ms/reconcile is the function process's own CPU (user and system), read
// from /proc; ns/op includes the client's encoding.
func BenchmarkGRPCReconcile(b *testing.B) {
	states := benchStates(b)
	all := states[len(states)-1]
	client, cpu := serveFunction(b)
	for _, tc := range []struct {
		name string
		req  *fnv1.RunFunctionRequest
	}{
		{"Asked", all.onto(aRequest(b)).build()},
		{"Prefilled", all.onto(settled(aRequest(b))).build()},
		// A claim on its way: composed on every call (its TTL is paced
		// by the clock).
		{"MidSequence", states[1].onto(settled(aRequest(b))).build()},
		// The settled claim, changed on every call: decoded whole and
		// composed (the composed path).
		{"Changed", nil},
	} {
		b.Run(tc.name, func(b *testing.B) {
			reqs := []*fnv1.RunFunctionRequest{tc.req}
			if tc.req == nil {
				reqs = changedRequests(b, all)
			}
			calls, err := reconcile(client, reqs[0])
			if err != nil {
				b.Fatal(err)
			}
			before, i := cpu(), 0
			b.ReportAllocs()
			for b.Loop() {
				i++
				if _, err := reconcile(client, reqs[i%len(reqs)]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpu()-before)/float64(b.N)/1e6, "cpu-ms/reconcile")
			b.ReportMetric(float64(calls), "calls/reconcile")
		})
	}
}

// changedRequests are two requests of the settled claim that differ only as
// two of Crossplane's reconciles of it do after a status write: in the XR's
// resourceVersion. Called in turn, each misses the cache (an XR's slot keeps
// its last answer) and is decoded whole and composed, as every request of a
// claim that changes, and every claim's first after a restart, is.
func changedRequests(b testing.TB, s benchState) []*fnv1.RunFunctionRequest {
	reqs := make([]*fnv1.RunFunctionRequest, 2)
	for i := range reqs {
		r := s.onto(settled(aRequest(b)))
		r.xr["metadata"].(map[string]any)["resourceVersion"] = strconv.Itoa(1000 + i)
		reqs[i] = r.build()
	}
	return reqs
}

// BenchmarkWire is the function's side of one gRPC call, in process: the
// request decoded by the codec the function serves with (wire), answered,
// and the answer encoded, all on this goroutine, as a profile of the served
// path sees it (-cpuprofile). "Changed" is the settled claim with a
// changed request on every call (changedRequests): the composed path;
// "Settled" is the same request again: the cache.
func BenchmarkWire(b *testing.B) {
	changed := changedRequests(b, benchStates(b)[2])
	for _, tc := range []struct {
		name string
		reqs []*fnv1.RunFunctionRequest
	}{{"Changed", changed}, {"Settled", changed[:1]}} {
		b.Run(tc.name, func(b *testing.B) {
			f := &Function{log: logging.NewNopLogger(), cache: cache.New(1000)}
			w := wire{f: f, proto: encoding.GetCodecV2("proto")}
			raws := make([][]byte, len(tc.reqs))
			for i, req := range tc.reqs {
				raw, err := proto.Marshal(req)
				if err != nil {
					b.Fatal(err)
				}
				raws[i] = raw
			}
			serve := func(raw []byte) {
				req := &fnv1.RunFunctionRequest{}
				if err := w.Unmarshal(mem.BufferSlice{mem.SliceBuffer(raw)}, req); err != nil {
					b.Fatal(err)
				}
				rsp, err := f.RunFunction(context.Background(), req)
				if err != nil || fatal(rsp) != "" {
					b.Fatalf("%v %s", err, fatal(rsp))
				}
				out, err := w.Marshal(rsp)
				if err != nil {
					b.Fatal(err)
				}
				out.Free()
			}
			serve(raws[0])
			i, before := 0, processCPU(b)
			b.ReportAllocs()
			for b.Loop() {
				i++
				serve(raws[i%len(raws)])
			}
			b.ReportMetric(float64(processCPU(b)-before)/float64(b.N)/1e6, "cpu-ms/op")
			b.ReportMetric(float64(len(raws[0])), "request-B")
		})
	}
}

// processCPU is this process's user and system CPU time in nanoseconds,
// its garbage collector's included: the cost of a call is not its wall
// time on a shared machine.
func processCPU(b *testing.B) int64 {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return u.Utime.Nano() + u.Stime.Nano()
}

// BenchmarkGRPCConcurrent serves 1, 10 and 100 settled claims at once from
// one function process: one op is every claim reconciled once,
// concurrently, each call prefilled.
func BenchmarkGRPCConcurrent(b *testing.B) {
	states := benchStates(b)
	all := states[len(states)-1]
	client, cpu := serveFunction(b)
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("claims=%d", n), func(b *testing.B) {
			reqs := make([]*fnv1.RunFunctionRequest, n)
			for i := range reqs {
				r := all.onto(settled(aRequest(b)))
				r.xr["metadata"] = map[string]any{"name": fmt.Sprintf("team-a-karpenter-%03d", i)}
				reqs[i] = r.build()
			}
			// Every claim reconciled once already: settled, as Crossplane
			// finds them after the first reconcile.
			for _, req := range reqs {
				if _, err := reconcile(client, req); err != nil {
					b.Fatal(err)
				}
			}
			before, start := cpu(), time.Now()
			for b.Loop() {
				var wg sync.WaitGroup
				for _, req := range reqs {
					wg.Go(func() {
						if _, err := reconcile(client, req); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
			}
			reconciles := float64(b.N * n)
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/reconciles, "ns/reconcile")
			b.ReportMetric(float64(cpu()-before)/reconciles/1e6, "cpu-ms/reconcile")
		})
	}
}

// reconcile calls the function over gRPC as Crossplane does in one
// reconcile (see fetching), and returns how many calls it took.
func reconcile(client fnv1.FunctionRunnerServiceClient, req *fnv1.RunFunctionRequest) (int, error) {
	rsp, calls, err := fetching(context.Background(), func(ctx context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
		return client.RunFunction(ctx, req)
	}, req)
	if msg := fatal(rsp); err == nil && msg != "" {
		err = fmt.Errorf("fatal result: %s", msg)
	}
	return calls, err
}

// serveFunction builds this package, serves it on loopback without TLS for
// the rest of the benchmark, and returns a client and a reader of the
// process's CPU time in nanoseconds.
func serveFunction(b *testing.B) (fnv1.FunctionRunnerServiceClient, func() int64) {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "function")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("cannot build the function: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cmd := exec.Command(bin, "--insecure", "--address", addr)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	client := fnv1.NewFunctionRunnerServiceClient(conn)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := client.RunFunction(ctx, aRequest(b).build())
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the function did not answer on %s: %v", addr, err)
		}
	}
	stat := fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid)
	return client, func() int64 {
		raw, err := os.ReadFile(stat)
		if err != nil {
			b.Fatal(err)
		}
		// Fields after the command's closing parenthesis; utime and stime
		// are the 14th and 15th fields, in clock ticks (100 a second).
		fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
		utime, _ := strconv.ParseInt(fields[11], 10, 64)
		stime, _ := strconv.ParseInt(fields[12], 10, 64)
		return (utime + stime) * int64(10*time.Millisecond)
	}
}

func mustRun(b testing.TB, f *Function, req *fnv1.RunFunctionRequest) *fnv1.RunFunctionResponse {
	b.Helper()
	rsp, err := f.RunFunction(context.Background(), req)
	if err != nil || fatal(rsp) != "" {
		b.Fatalf("cannot set up: %v %s", err, fatal(rsp))
	}
	return rsp
}
