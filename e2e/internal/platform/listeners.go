package platform

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// Listener is a listening TCP socket of one process.
type Listener struct {
	PID  int
	Addr net.IP
	Port int
}

func (l Listener) String() string {
	return fmt.Sprintf("pid %d listens on %s", l.PID, net.JoinHostPort(l.Addr.String(), strconv.Itoa(l.Port)))
}

// PIDs returns the PIDs of every platform process that runs now: the control plane
// kwokctl started and the controllers the harness started.
func (c Config) PIDs() []int {
	var pids []int
	c.eachProcess(func(_ string, pid int) { pids = append(pids, pid) })
	return pids
}

// ProcessPIDs is PIDs by process name (its PID file's, e.g. kube-apiserver, etcd,
// kiln-operator, kueue).
func (c Config) ProcessPIDs() map[string]int {
	pids := map[string]int{}
	c.eachProcess(func(name string, pid int) { pids[name] = pid })
	return pids
}

// eachProcess calls f with the name and PID of each platform process that runs now.
func (c Config) eachProcess(f func(name string, pid int)) {
	for _, dir := range []string{filepath.Join(c.ClusterDir(), "pids"), c.RunDir()} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				continue
			}
			if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
				if _, err := procfs.NewProc(pid); err == nil {
					f(strings.TrimSuffix(filepath.Base(file), ".pid"), pid)
				}
			}
		}
	}
}

// Listeners returns the listening TCP sockets owned by pids, read from /proc.
func Listeners(pids []int) ([]Listener, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return nil, fmt.Errorf("opening /proc: %w", err)
	}
	return listeners(fs, pids)
}

func listeners(fs procfs.FS, pids []int) ([]Listener, error) {
	owner := map[uint64]int{} // socket inode -> pid
	for _, pid := range pids {
		proc, err := fs.Proc(pid)
		if err != nil {
			return nil, fmt.Errorf("reading sockets of pid %d: %w", pid, err)
		}
		targets, err := proc.FileDescriptorTargets()
		if err != nil {
			return nil, fmt.Errorf("reading sockets of pid %d: %w", pid, err)
		}
		for _, target := range targets {
			if inode, ok := socketInode(target); ok {
				owner[inode] = pid
			}
		}
	}
	var out []Listener
	for _, table := range []struct {
		name string
		read func() (procfs.NetTCP, error)
		// procfs prefers netlink's sock_diag; these tables are all the harness needs and
		// need no privilege.
	}{{"/proc/net/tcp", fs.NetTCP}, {"/proc/net/tcp6", fs.NetTCP6}} { //nolint:staticcheck // SA1019: see above
		socks, err := table.read()
		if errors.Is(err, os.ErrNotExist) {
			continue // no IPv6 on this host
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", table.name, err)
		}
		for _, s := range socks {
			if pid, ok := owner[s.Inode]; ok && s.St == tcpListen {
				out = append(out, Listener{PID: pid, Addr: s.LocalAddr, Port: int(s.LocalPort)})
			}
		}
	}
	return out, nil
}

// tcpListen is TCP_LISTEN in the kernel's socket states, the st column of /proc/net/tcp.
const tcpListen = 0x0A

// socketInode reads the inode out of a socket's file descriptor target, "socket:[12345]".
func socketInode(target string) (uint64, bool) {
	rest, ok := strings.CutPrefix(target, "socket:[")
	if !ok {
		return 0, false
	}
	inode, err := strconv.ParseUint(strings.TrimSuffix(rest, "]"), 10, 64)
	return inode, err == nil
}
