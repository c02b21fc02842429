// Command etcd is etcd v3.6.5's server, built from the Go module proxy for the end-to-end tests
// (see hack/e2e.mk).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
