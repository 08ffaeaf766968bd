package platform

import (
	"context"
	"fmt"
	"time"

	"github.com/kiln-ml/kiln/e2e/internal/platform/chart"
	"github.com/kiln-ml/kiln/e2e/internal/platform/cluster"
)

// The chart's release (package chart), as the tests know it.
const (
	// ReleaseName is the chart's release, in APIServerNamespace.
	ReleaseName = chart.ReleaseName
	// ChartQueue names the chart's default ResourceFlavor, ClusterQueue and LocalQueue on
	// the local platform.
	ChartQueue = chart.Queue
)

// chart is Kiln's chart as this platform installs it: in APIServerNamespace, its pods on
// the real node, the API server forwarded to where the processes install serves it.
func (p *Platform) chart() chart.Release {
	return chart.Release{
		Root:           p.Root,
		BinDir:         p.BinDir,
		StateDir:       p.StateDir,
		ConfigDir:      p.ConfigDir(),
		Kubeconfig:     p.Kubeconfig(),
		RunDir:         p.RunDir(),
		LogsDir:        p.LogsDir(),
		PKI:            p.PKI(),
		Namespace:      APIServerNamespace,
		QueueNamespace: DefaultNamespace,
		APIPort:        p.KilnAPIPort,
		APITLSPort:     p.KilnAPITLSPort,
		QPS:            p.Controller.QPS,
		Burst:          p.Controller.Burst,
		Concurrency:    p.Controller.Concurrency,
		Registry:       p.RegistryHost(),
		PushImage:      p.PushImage,
		From:           p.ChartFrom,
	}
}

// chartUp installs (or upgrades) the chart and gives the demo user its client configuration.
func (p *Platform) chartUp(ctx context.Context, cs *cluster.Clients) error {
	if p.RealNodes == 0 {
		return fmt.Errorf("%s=%s runs Kiln's pods on the real node: set %s=1", EnvInstall, InstallChart, EnvRealNodes)
	}
	start := time.Now()
	if err := p.chart().Up(ctx, cs); err != nil {
		return err
	}
	if err := p.demoUser(ctx, cs); err != nil {
		return err
	}
	chartName := "charts/kiln"
	if p.ChartFrom != "" {
		chartName = "of release " + p.ChartFrom
	}
	p.logf("kiln: chart %s installed as release %s in %s in %s: operator and API server run on %s; API server at %s (h2c http://127.0.0.1:%d), user %s in namespace %s (client config %s)",
		chartName, ReleaseName, APIServerNamespace, time.Since(start).Round(100*time.Millisecond), RealNodeName, p.KilnAPIURL(), p.KilnAPIPort, DemoUser, DemoNamespace, p.ClientConfigFile())
	return nil
}

// Helm runs bin/helm against the platform, its state under the platform's directory.
func (p *Platform) Helm(ctx context.Context, args ...string) (string, error) {
	return p.chart().Helm(ctx, args...)
}

// UpgradeVersion is the version this clone's chart and images are pushed as when the
// platform installs a release (ChartFrom): the version an upgrade goes to.
func (p *Platform) UpgradeVersion() (string, error) {
	return p.chart().UpgradeVersion()
}
