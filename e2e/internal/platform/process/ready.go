package process

import (
	"context"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kiln-ml/kiln/e2e/internal/platform/probe"
)

// StartReady starts p unless it runs, saying so on out, and waits up to timeout until
// readyz answers 200.
func (p Process) StartReady(ctx context.Context, readyz string, timeout time.Duration, out io.Writer) error {
	if pid, running := p.Running(); running {
		fmt.Fprintf(out, "%s: already running (pid %d)\n", p.Name, pid)
	} else {
		if err := p.Start(); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: started (log %s)\n", p.Name, p.LogFile())
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if _, running := p.Running(); !running {
			return false, fmt.Errorf("%s exited", p.Name)
		}
		return probe.HTTPOK(ctx, readyz), nil
	})
	if err != nil {
		return fmt.Errorf("%s did not become ready: %w\n--- %s (last 30 lines)\n%s", p.Name, err, p.LogFile(), Tail(p.LogFile(), 30))
	}
	return nil
}

// StopReporting stops p (see Stop) with 15 seconds' grace, saying so on out when it ran.
func (p Process) StopReporting(out io.Writer) error {
	if _, running := p.Running(); running {
		fmt.Fprintf(out, "stopping %s\n", p.Name)
	}
	return p.Stop(15 * time.Second)
}
