// Command kiln-pause is the pod sandbox process of the local platform's real node (the
// "pause" image): it holds the pod's namespaces, reaps the zombies of the processes it
// adopts as PID 1, and exits on SIGINT or SIGTERM.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	pause(sigs, reap)
}

// pause waits for SIGINT or SIGTERM, reaping children on every SIGCHLD meanwhile.
func pause(sigs <-chan os.Signal, reap func()) {
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			return
		}
		reap()
	}
}

// reap collects every child that exited.
func reap() {
	for {
		pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
