package main

import (
	"context"
	"testing"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// BenchmarkRunFunctionAllReady measures the steady state: every step is
// observed Ready, which is what every reconcile of a settled claim costs.
func BenchmarkRunFunctionAllReady(b *testing.B) {
	aws := fakeProviders{t: b, account: account}
	f := &Function{log: logging.NewNopLogger()}
	identity := aws.observe(mustRun(b, f, aRequest(b).build()), true)
	all := aws.observe(mustRun(b, f, aRequest(b).observing(identity).build()), true)
	req := aRequest(b).observing(all).build()

	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.RunFunction(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

func mustRun(b *testing.B, f *Function, req *fnv1.RunFunctionRequest) *fnv1.RunFunctionResponse {
	b.Helper()
	rsp, err := f.RunFunction(context.Background(), req)
	if err != nil || fatal(rsp) != "" {
		b.Fatalf("cannot set up: %v %s", err, fatal(rsp))
	}
	return rsp
}
