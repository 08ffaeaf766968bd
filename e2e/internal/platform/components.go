package platform

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kiln-ml/kiln/e2e/internal/platform/process"
)

// Process is a local component the platform starts and stops by its PID file.
type Process = process.Process

// Components are the platform's processes that a crash can take down while jobs run:
// Kiln's operator and API server, JobSet and Kueue (processes install only).
var Components = []string{ComponentOperator, ComponentAPIServer, "jobset", "kueue"}

// The names of Kiln's components among Components.
const (
	ComponentOperator  = "kiln-operator"
	ComponentAPIServer = "kiln-apiserver"
)

// ComponentProcess is the process of one of Components.
func (p *Platform) ComponentProcess(name string) (Process, error) {
	switch name {
	case ComponentOperator:
		return p.OperatorProcess(), nil
	case ComponentAPIServer:
		return p.APIServerProcess(), nil
	}
	for _, proc := range p.addons().Processes() {
		if proc.Name == name {
			return proc, nil
		}
	}
	return Process{}, fmt.Errorf("no component %q: choose from %v", name, Components)
}

// Kill sends SIGKILL to a component and waits until it is gone: a crash, with no chance to
// release a lease, drain a request or flush anything.
func (p *Platform) Kill(ctx context.Context, name string) error {
	proc, err := p.ComponentProcess(name)
	if err != nil {
		return err
	}
	pid, running := proc.Running()
	if !running {
		return fmt.Errorf("%s is not running", name)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing %s (pid %d): %w", name, pid, err)
	}
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, running := proc.Running()
		return !running, nil
	})
}

// Restart starts a component that is not running, as `up` would, and waits until it is
// ready (its webhooks serving, for those that have some).
func (p *Platform) Restart(ctx context.Context, name string) error {
	switch name {
	case ComponentOperator:
		return p.StartOperator(ctx)
	case ComponentAPIServer:
		return p.APIServerProcess().StartReady(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", p.KilnAPIPort), p.ComponentTimeout, p.Out)
	case "jobset", "kueue":
		return p.addons().Start(ctx)
	}
	return fmt.Errorf("no component %q: choose from %v", name, Components)
}
