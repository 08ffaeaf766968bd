package e2e

import (
	"context"
	"os"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/kiln-ml/kiln/e2e/internal/chaos"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
)

// The short chaos run of `make test` (`make chaos` runs the long one on a fresh platform):
// the operator, the API server, JobSet and Kueue killed with SIGKILL at random instants
// while jobs with deadlines and TTLs run and submissions go through the API server.
var _ = Describe("Chaos: components killed at random while jobs run", Serial, func() {
	It("misses, doubles and loses nothing, and lets no invalid TrainJob in", func(ctx context.Context) {
		if os.Getenv(platform.EnvInstall) == string(platform.InstallChart) || os.Getenv("KILN_ROOT") == "" {
			Skip("chaos kills the platform's processes: it runs with KILN_INSTALL=processes")
		}
		cfg := platform.DefaultConfig(os.Getenv("KILN_ROOT"))
		p := &platform.Platform{Config: cfg, Out: GinkgoWriter}
		res, err := chaos.Run(ctx, p, chaos.Options{
			Jobs: 30, Submissions: 60, Kills: 6, Seed: uint64(GinkgoRandomSeed()), Timeout: 5 * time.Minute, Out: GinkgoWriter,
		})
		Expect(err).NotTo(HaveOccurred())
		AddReportEntry("chaos", res.Summary())
		Expect(res.Failures).To(BeEmpty(), res.Summary())
		Expect(res.InvalidAttempts).To(BeNumerically(">", 0))
		for _, c := range platform.Components {
			_, running := mustProcess(p, c).Running()
			Expect(running).To(BeTrue(), "%s runs again", c)
		}
	})
})

func mustProcess(p *platform.Platform, name string) platform.Process {
	GinkgoHelper()
	proc, err := p.ComponentProcess(name)
	Expect(err).NotTo(HaveOccurred())
	return proc
}
