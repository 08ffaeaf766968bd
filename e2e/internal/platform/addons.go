package platform

import (
	"context"

	"github.com/kiln-ml/kiln/e2e/internal/platform/addons"
	"github.com/kiln-ml/kiln/e2e/internal/platform/cluster"
)

// addons are JobSet and Kueue as local processes (processes install only).
func (p *Platform) addons() addons.Controllers {
	return addons.Controllers{
		BinDir:          p.BinDir,
		ManifestsDir:    p.ManifestsDir(),
		ConfigDir:       p.ConfigDir(),
		StateDir:        p.StateDir,
		Kubeconfig:      p.Kubeconfig(),
		RunDir:          p.RunDir(),
		LogsDir:         p.LogsDir(),
		PKI:             p.PKI(),
		JobSetWebhook:   p.JobSetWebhook,
		JobSetHealth:    p.JobSetHealth,
		KueueWebhook:    p.KueueWebhook,
		KueueHealth:     p.KueueHealth,
		Timeout:         p.ComponentTimeout,
		IssueKubeconfig: p.issueKubeconfig,
		MultiKueue:      p.multiKueueConfig(),
		Out:             p.Out,
	}
}

// addonsUp installs JobSet's and Kueue's CRDs and webhooks, then the TrainJob controller's
// CRDs, then starts both.
func (p *Platform) addonsUp(ctx context.Context, cs *cluster.Clients) error {
	a := p.addons()
	if err := a.Install(ctx, cs); err != nil {
		return err
	}
	// Kueue sets up its TrainJob integration once the TrainJob CRD exists; it polls with a
	// growing backoff, so the CRDs go in before Kueue starts.
	applyCRDs := p.applyKilnCRDs
	if p.Trainer == TrainerUpstream {
		applyCRDs = p.upstream().ApplyCRDs
	}
	if err := applyCRDs(ctx, cs); err != nil {
		return err
	}
	return a.Start(ctx)
}
