// Command monitoringgen writes the GitOps base of Karpenter's monitoring
// (examples/gitops/monitoring) from internal/monitoring: the alert rules,
// the PodMonitor and the Grafana dashboards' ConfigMaps.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/do-now/function-karpenter/internal/flux"
	"github.com/do-now/function-karpenter/internal/monitoring"
)

func main() {
	out := flag.String("out", "", "directory to write the base into")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "monitoringgen:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	if out == "" {
		return fmt.Errorf("-out is required")
	}
	files, err := monitoring.Base(flux.ControllerLabels)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
