package main

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestPauseReapsUntilTerminated(t *testing.T) {
	sigs := make(chan os.Signal, 3)
	sigs <- syscall.SIGCHLD
	sigs <- syscall.SIGCHLD
	sigs <- syscall.SIGTERM
	reaped := 0
	pause(sigs, func() { reaped++ })
	if reaped != 2 {
		t.Errorf("reaped on %d SIGCHLDs, want 2", reaped)
	}
	if len(sigs) != 0 {
		t.Error("pause returned before SIGTERM")
	}
}

func TestReapCollectsExitedChildren(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Skipf("no `true` to start: %v", err)
	}
	pid := cmd.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	for {
		reap()
		// A reaped child is gone: signal 0 to it fails.
		if err := syscall.Kill(pid, 0); err != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d was never reaped", pid)
		}
		time.Sleep(10 * time.Millisecond) //nolint:forbidigo // waiting for a real child process to exit
	}
}
