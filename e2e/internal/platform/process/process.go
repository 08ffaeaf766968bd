// Package process runs the platform's long-lived local components: started detached,
// remembered by PID file, stopped by that PID (never by name).
package process

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// Process is a long-running local component the harness starts detached from its own
// process, remembers by PID file, and stops by that PID (never by name).
type Process struct {
	Name string
	Path string
	// Exe is the binary the process ends up running when Path is a launcher that
	// execs it (defaults to Path); it guards PID files against PID reuse.
	Exe     string
	Args    []string
	Env     []string
	Dir     string
	RunDir  string // PID files
	LogsDir string
}

func (p Process) pidFile() string { return filepath.Join(p.RunDir, p.Name+".pid") }

// maxKeptLog is the size past which a process's log starts over when it is started again.
const maxKeptLog = 64 << 20

// LogFile is where the process's stdout and stderr go.
func (p Process) LogFile() string { return filepath.Join(p.LogsDir, p.Name+".log") }

// Start launches the process in its own session so it outlives the harness.
func (p Process) Start() error {
	if pid, ok := p.Running(); ok {
		return fmt.Errorf("%s is already running as pid %d", p.Name, pid)
	}
	for _, d := range []string{p.RunDir, p.LogsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	// A restart appends: what the process logged before it was killed or stopped (a test
	// that restarts it, a failure being diagnosed) is kept, up to maxKeptLog.
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if fi, err := os.Stat(p.LogFile()); err == nil && fi.Size() > maxKeptLog {
		flags |= os.O_TRUNC
	}
	logf, err := os.OpenFile(p.LogFile(), flags, 0o644)
	if err != nil {
		return fmt.Errorf("opening log of %s: %w", p.Name, err)
	}
	defer logf.Close()
	if fi, err := logf.Stat(); err == nil && fi.Size() > 0 {
		fmt.Fprintf(logf, "--- %s started again at %s\n", p.Name, time.Now().UTC().Format(time.RFC3339))
	}
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Dir = p.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s (%s): %w", p.Name, p.Path, err)
	}
	if err := os.WriteFile(p.pidFile(), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return fmt.Errorf("writing pid file of %s: %w", p.Name, err)
	}
	return cmd.Process.Release()
}

// Running reports the PID from the PID file when that process is alive and still runs p.Path.
func (p Process) Running() (int, bool) {
	data, err := os.ReadFile(p.pidFile())
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	if syscall.Kill(pid, 0) != nil {
		return 0, false
	}
	// Guard against PID reuse: the PID must still run our binary.
	proc, err := procfs.NewProc(pid)
	if err != nil {
		return 0, false
	}
	// Empty when the process is gone; "path (deleted)" when its binary was replaced.
	exe, err := proc.Executable()
	exe = strings.TrimSuffix(exe, " (deleted)")
	if err != nil || exe == "" || (exe != p.Path && exe != p.Exe) {
		return 0, false
	}
	return pid, true
}

// Stop sends SIGTERM, waits up to grace, then SIGKILL, and removes the PID file.
func (p Process) Stop(grace time.Duration) error {
	defer os.Remove(p.pidFile())
	pid, ok := p.Running()
	if !ok {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stopping %s (pid %d): %w", p.Name, pid, err)
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if _, ok := p.Running(); !ok {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing %s (pid %d): %w", p.Name, pid, err)
	}
	return nil
}

// Tail returns the last n lines of a log file, for error messages.
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log at %s: %v)", path, err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// Alive reports whether the process of the PID file exists and is no zombie, whatever it
// runs: a process started through a wrapper that execs p.Path (Kueue's, unshare then sh)
// is alive before Running says it runs p.Path.
func (p Process) Alive() bool {
	data, err := os.ReadFile(p.pidFile())
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return false
	}
	proc, err := procfs.NewProc(pid)
	if err != nil {
		return false
	}
	stat, err := proc.Stat()
	return err == nil && stat.State != "Z"
}
