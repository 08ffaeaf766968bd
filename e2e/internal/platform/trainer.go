package platform

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/kiln-ml/kiln/e2e/internal/platform/upstream"
)

// Trainer names the TrainJob controller a platform runs.
type Trainer string

const (
	// TrainerKiln is Kiln's operator with Kiln's CRDs and runtime catalog (the default).
	TrainerKiln Trainer = "kiln"
	// TrainerUpstream is Kubeflow Trainer v2.3.0's controller manager, built from
	// tools/trainer, with its own CRDs, webhooks and runtimes: the benchmarks' baseline.
	TrainerUpstream Trainer = "upstream"
)

// upstream is upstream Kubeflow Trainer on this platform, on the operator's ports and
// with its client budget.
func (p *Platform) upstream() upstream.Trainer {
	return upstream.Trainer{
		Binary:       p.Bin("trainer-controller-manager"),
		Dir:          filepath.Join(p.StateDir, "upstream-trainer"),
		ManifestsDir: p.ManifestsDir(),
		Kubeconfig:   p.Kubeconfig(),
		RunDir:       p.RunDir(),
		LogsDir:      p.LogsDir(),
		PKI:          p.PKI(),
		HealthPort:   p.OperatorHealth,
		MetricsPort:  p.OperatorMetrics,
		WebhookPort:  p.OperatorWebhook,
		QPS:          p.Controller.QPS,
		Burst:        p.Controller.Burst,
		Concurrency:  p.Controller.Concurrency,
		Timeout:      p.ComponentTimeout,
		Out:          p.Out,
	}
}

// UpstreamProcess is upstream Kubeflow Trainer's controller manager as a local process.
func (p *Platform) UpstreamProcess() Process { return p.upstream().Process() }

// TrainerProcess is the TrainJob controller the platform runs.
func (p *Platform) TrainerProcess() Process {
	if p.Trainer == TrainerUpstream {
		return p.UpstreamProcess()
	}
	return p.OperatorProcess()
}

// RestartTrainer stops the TrainJob controller and starts it again with another client
// budget; its webhooks answer again once it is ready. Nothing may create or change
// TrainJobs in between.
func (p *Platform) RestartTrainer(ctx context.Context, budget ControllerBudget) error {
	if err := p.TrainerProcess().Stop(30 * time.Second); err != nil {
		return err
	}
	p.Controller = budget
	if p.Trainer == TrainerUpstream {
		if err := p.upstream().WriteConfig(); err != nil {
			return err
		}
	}
	return p.TrainerProcess().StartReady(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", p.OperatorHealth), p.ComponentTimeout, p.Out)
}
