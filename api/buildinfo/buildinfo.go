// Package buildinfo is the kiln_build_info metric of Kiln's servers (a package of its own, so
// that the CLI, which reads api/version too, does not link Prometheus' client).
package buildinfo

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kiln-ml/kiln/api/version"
)

// Collector is the kiln_build_info gauge of one component (operator, apiserver): always 1,
// labelled with the version and the Go version it was built with, as Prometheus' own
// prometheus_build_info. Dashboards find Kiln's scrape jobs by it.
func Collector(component string) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "kiln_build_info",
		Help:        "Always 1: the component (operator, apiserver), its version and the Go version it was built with.",
		ConstLabels: prometheus.Labels{"component": component, "version": version.Version, "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}
