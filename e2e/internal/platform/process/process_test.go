package process

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestProcessRunning points a PID file at the test process, whose binary is known.
func TestProcessRunning(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		path, exe   string
		pid         string // the PID file's content; none when empty
		wantRunning bool
	}{
		"our binary":                    {path: self, pid: strconv.Itoa(os.Getpid()), wantRunning: true},
		"our binary through a launcher": {path: "/usr/bin/unshare", exe: self, pid: strconv.Itoa(os.Getpid()), wantRunning: true},
		"a reused PID":                  {path: "/usr/bin/other", pid: strconv.Itoa(os.Getpid())},
		"no such process":               {path: self, pid: strconv.Itoa(1 << 30)},
		"garbage PID file":              {path: self, pid: "x"},
		"no PID file":                   {path: self},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := Process{Name: "p", Path: tc.path, Exe: tc.exe, RunDir: t.TempDir()}
			if tc.pid != "" {
				writeFile(t, filepath.Join(p.RunDir, "p.pid"), tc.pid)
			}
			gotPID, gotRunning := p.Running()
			if gotRunning != tc.wantRunning {
				t.Fatalf("Running() = %d, %v; want running: %v", gotPID, gotRunning, tc.wantRunning)
			}
			if tc.wantRunning && gotPID != os.Getpid() {
				t.Errorf("Running() = %d, want %d", gotPID, os.Getpid())
			}
		})
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
