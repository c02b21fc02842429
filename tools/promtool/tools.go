//go:build tools

// Package tools pins the version of promtool, built with
// `go build -tags remove_all_sd -o BIN github.com/prometheus/prometheus/cmd/promtool` from this
// folder (see hack/tools.mk): checking and unit-testing rules needs none of Prometheus' service
// discovery SDKs, which the tag leaves out (a quarter of the build time).
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
