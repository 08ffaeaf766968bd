// Command kiln-platform starts, inspects and stops Kiln's local Kubernetes platform.
//
//	kiln-platform up          start every component (idempotent) and print what to try next
//	kiln-platform down        stop every process it started and delete the cluster state
//	kiln-platform status      show each component, its PID and log
//	kiln-platform kubeconfig [CLUSTER]
//	                          print the admin kubeconfig path (of a worker cluster, named)
//	kiln-platform leftovers   list what the real node left on this machine (none after down)
//	kiln-platform forward --listen ADDR --to ADDR
//	                          relay TCP connections (run by `up` for the real node's pods)
//	kiln-platform sim-trainer report progress for KWOK's pods (run by `up`)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/kiln-ml/kiln/e2e/internal/platform"
)

const usage = `usage: kiln-platform [--root DIR] up|down|status|kubeconfig [CLUSTER]|leftovers

Sizes and timings come from the environment: KILN_GPU_NODES (4), KILN_SPOT_NODES (2),
KILN_GPUS_PER_NODE (8), KILN_PODS_PER_NODE (110), KILN_NODE_CPU (32), KILN_NODE_MEMORY (256Gi),
KILN_POD_RUN_DURATION (2s), KILN_APISERVER_PORT (16443), KILN_REAL_NODES (1: kiln-node-0, a
kubelet with containerd on this machine; 0: none), KILN_TRAINER (kiln, or upstream:
Kubeflow Trainer v2.3.0 in place of Kiln, for benchmarks), KILN_WORKERS (0: the number of
worker clusters beside this one, which is then their MultiKueue manager; docs/multicluster.md).
`

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kiln-platform:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("kiln-platform", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage) }
	root := fs.String("root", "", "repository root (default: the nearest directory with go.work)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if fs.Arg(0) == "forward" {
		ffs := flag.NewFlagSet("forward", flag.ContinueOnError)
		listen := ffs.String("listen", "", "address to accept connections on")
		to := ffs.String("to", "", "address to relay them to")
		if err := ffs.Parse(fs.Args()[1:]); err != nil || *listen == "" || *to == "" {
			fmt.Fprintln(os.Stderr, "usage: kiln-platform forward --listen ADDR --to ADDR")
			os.Exit(2)
		}
		return platform.Forward(ctx, *listen, *to)
	}
	if fs.NArg() != 1 && !(fs.NArg() == 2 && fs.Arg(0) == "kubeconfig") {
		fs.Usage()
		os.Exit(2)
	}
	dir, err := platform.RepoRoot(*root)
	if err != nil {
		return err
	}
	cfg, err := platform.DefaultConfig(dir).FromEnv()
	if err != nil {
		return err
	}
	p := &platform.Platform{Config: cfg, Out: os.Stdout}

	switch fs.Arg(0) {
	case "up":
		if err := p.Up(ctx); err != nil {
			return err
		}
		fmt.Println(p.NextSteps())
	case "down":
		return p.Down(ctx)
	case "sim-trainer":
		return p.RunSimTrainer(ctx)
	case "status":
		if !p.Status(ctx) {
			os.Exit(3)
		}
	case "leftovers":
		left := p.RealNodeLeftovers()
		for _, l := range left {
			fmt.Println(l)
		}
		if len(left) > 0 {
			return fmt.Errorf("the real node left %d things on this machine", len(left))
		}
	case "kubeconfig":
		if fs.NArg() == 1 {
			fmt.Println(p.Kubeconfig())
			return nil
		}
		w, err := p.WorkerNamed(fs.Arg(1))
		if err != nil {
			return err
		}
		fmt.Println(w.Kubeconfig())
	default:
		fs.Usage()
		os.Exit(2)
	}
	return nil
}
