package platform

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	for _, dir := range []string{filepath.Join(c.ClusterDir(), "pids"), c.RunDir()} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
				if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
					pids = append(pids, pid)
				}
			}
		}
	}
	return pids
}

// Listeners returns the listening TCP sockets owned by pids, read from /proc.
func Listeners(pids []int) ([]Listener, error) {
	owner := map[string]int{} // socket inode -> pid
	for _, pid := range pids {
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			return nil, fmt.Errorf("reading sockets of pid %d: %w", pid, err)
		}
		for _, fd := range fds {
			target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
			if err == nil && strings.HasPrefix(target, "socket:[") {
				owner[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = pid
			}
		}
	}
	var out []Listener
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		socks, err := parseProcNetTCP(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", table, err)
		}
		for _, s := range socks {
			if pid, ok := owner[s.inode]; ok && s.listening {
				out = append(out, Listener{PID: pid, Addr: s.addr, Port: s.port})
			}
		}
	}
	return out, nil
}

type procSocket struct {
	addr      net.IP
	port      int
	listening bool
	inode     string
}

// parseProcNetTCP reads the /proc/net/tcp{,6} format: addresses are hex in host byte
// order per 32-bit word, state 0A is LISTEN.
func parseProcNetTCP(r io.Reader) ([]procSocket, error) {
	var out []procSocket
	sc := bufio.NewScanner(r)
	first := true
	for sc.Scan() {
		if first {
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			continue
		}
		host, port, ok := strings.Cut(f[1], ":")
		if !ok {
			return nil, fmt.Errorf("bad local address %q", f[1])
		}
		raw, err := hex.DecodeString(host)
		if err != nil || (len(raw) != 4 && len(raw) != 16) {
			return nil, fmt.Errorf("bad local address %q", f[1])
		}
		for i := 0; i < len(raw); i += 4 { // each 32-bit word is little-endian
			raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
		}
		p, err := strconv.ParseUint(port, 16, 16)
		if err != nil {
			return nil, fmt.Errorf("bad port in %q", f[1])
		}
		out = append(out, procSocket{addr: net.IP(raw), port: int(p), listening: f[3] == "0A", inode: f[9]})
	}
	return out, sc.Err()
}
