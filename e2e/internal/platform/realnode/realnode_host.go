package realnode

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// What the real node changes on this machine, and how each change is undone. Everything is
// found again from the machine itself (not from what a crashed run may have recorded), so
// that `down` and the next `up` clean up after a run that was killed half way.

// hostSysctls are the kernel settings the node needs: forwarding between pods and Services,
// and bridged traffic through iptables, so that a pod reaching another pod on the same
// bridge through a Service gets its answers un-NATed.
var hostSysctls = map[string]string{
	"/proc/sys/net/ipv4/ip_forward":                 "1",
	"/proc/sys/net/bridge/bridge-nf-call-iptables":  "1",
	"/proc/sys/net/bridge/bridge-nf-call-ip6tables": "1",
}

// hostPaths are paths outside the repository that the node's components create at fixed
// places: the kubelet's symlinks to container logs, libcni's cache, the node's tmpfs state.
var hostPaths = []string{"/var/log/containers", "/var/lib/cni", "/run/kiln"}

// hostState is the machine as the node found it: the sysctls' values and which hostPaths
// did not exist. It is written once, before the first change, and kept until `down` has
// restored it: a crashed run's record is the machine's own.
type hostState struct {
	Sysctls map[string]string `json:"sysctls"`
	Absent  []string          `json:"absent"`
	// NFTables are the nftables tables that existed ("ip nat", ...): iptables-nft creates
	// the tables it is first asked about, and the ones it created go again.
	NFTables []string `json:"nftables"`
}

// nftTables lists the nftables tables, as "family name".
func nftTables() []string {
	out, err := exec.Command("nft", "list", "tables").Output()
	if err != nil {
		return nil
	}
	var tables []string
	for _, line := range strings.Split(string(out), "\n") {
		if t, ok := strings.CutPrefix(strings.TrimSpace(line), "table "); ok {
			tables = append(tables, t)
		}
	}
	return tables
}

// nftTablesAdded lists the tables that were not there before the node's first change.
func (n Node) nftTablesAdded() []string {
	data, err := os.ReadFile(n.hostStateFile())
	if err != nil {
		return nil
	}
	var st hostState
	if json.Unmarshal(data, &st) != nil {
		return nil
	}
	return st.nftTablesAdded()
}

func (st hostState) nftTablesAdded() []string {
	before := map[string]bool{}
	for _, t := range st.NFTables {
		before[t] = true
	}
	var added []string
	for _, t := range nftTables() {
		if !before[t] {
			added = append(added, t)
		}
	}
	return added
}

func (n Node) hostStateFile() string { return filepath.Join(n.Dir(), "host-state.json") }

func (n Node) recordHostState() error {
	if _, err := os.Stat(n.hostStateFile()); err == nil {
		return nil
	}
	st := hostState{Sysctls: map[string]string{}, NFTables: nftTables()}
	for path := range hostSysctls {
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("reading %s (is the br_netfilter module loaded?): %w", path, err)
		}
		st.Sysctls[path] = strings.TrimSpace(string(data))
	}
	for _, p := range hostPaths {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			st.Absent = append(st.Absent, p)
		}
	}
	data, _ := json.Marshal(st)
	if err := os.MkdirAll(n.Dir(), 0o755); err != nil {
		return err
	}
	return os.WriteFile(n.hostStateFile(), data, 0o644)
}

func (n Node) setSysctls() error {
	for path, v := range hostSysctls {
		if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
			return fmt.Errorf("setting %s=%s: %w", path, v, err)
		}
	}
	return nil
}

// restoreHostState puts the sysctls back and removes the hostPaths the node created.
func (n Node) restoreHostState() error {
	data, err := os.ReadFile(n.hostStateFile())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var st hostState
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("%s: %w", n.hostStateFile(), err)
	}
	var errs []error
	for path, v := range st.Sysctls {
		if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring %s=%s: %w", path, v, err))
		}
	}
	for _, t := range st.nftTablesAdded() {
		if out, err := exec.Command("nft", append([]string{"delete", "table"}, strings.Fields(t)...)...).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("nft delete table %s: %w: %s", t, err, out))
		}
	}
	for _, p := range st.Absent {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return os.Remove(n.hostStateFile())
}

// bridgeUp creates BridgeName with NodeIP before anything binds that address.
func bridgeUp() error {
	if _, err := os.Stat("/sys/class/net/" + BridgeName); errors.Is(err, fs.ErrNotExist) {
		if err := ip("link", "add", BridgeName, "type", "bridge"); err != nil {
			return err
		}
	}
	if out, _ := exec.Command("ip", "-o", "-4", "addr", "show", "dev", BridgeName).Output(); !strings.Contains(string(out), " "+NodeIP+"/") {
		if err := ip("addr", "add", NodeIP+"/24", "dev", BridgeName); err != nil {
			return err
		}
	}
	return ip("link", "set", BridgeName, "up")
}

// bridgeDown deletes the bridge and any veth still attached to it.
func bridgeDown() error {
	ports, _ := filepath.Glob("/sys/class/net/" + BridgeName + "/brif/*")
	var errs []error
	for _, p := range ports {
		if err := ip("link", "del", filepath.Base(p)); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := os.Stat("/sys/class/net/" + BridgeName); err == nil {
		errs = append(errs, ip("link", "del", BridgeName))
	}
	return errors.Join(errs...)
}

func ip(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// cgroupHierarchies are the mount points of this machine's cgroup hierarchies (v1: one per
// controller, and name=systemd; v2: one).
func cgroupHierarchies() ([]string, error) {
	mounts, err := procfs.GetMounts()
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, m := range mounts {
		if m.FSType == "cgroup" || m.FSType == "cgroup2" {
			dirs = append(dirs, m.MountPoint)
		}
	}
	sort.Strings(dirs)
	return dirs, nil
}

// ensureCgroupRoot creates CgroupRoot in every hierarchy: the kubelet requires it to exist.
func (n Node) ensureCgroupRoot() error {
	dirs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(d, n.CgroupRoot()), 0o755); err != nil {
			return fmt.Errorf("creating cgroup %s: %w", filepath.Join(d, n.CgroupRoot()), err)
		}
	}
	return nil
}

// cgroupDirs lists CgroupRoot and every cgroup below it, deepest first.
func (n Node) cgroupDirs() []string {
	hierarchies, _ := cgroupHierarchies()
	var dirs []string
	for _, h := range hierarchies {
		root := filepath.Join(h, n.CgroupRoot())
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	return dirs
}

// cgroupPIDs lists the processes in CgroupRoot's subtree: the containers.
func (n Node) cgroupPIDs() []int {
	seen := map[int]bool{}
	var pids []int
	for _, d := range n.cgroupDirs() {
		f, err := os.Open(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		s := bufio.NewScanner(f)
		for s.Scan() {
			var pid int
			if _, err := fmt.Sscan(s.Text(), &pid); err == nil && !seen[pid] {
				seen[pid] = true
				pids = append(pids, pid)
			}
		}
		f.Close()
	}
	return pids
}

// removeCgroups SIGKILLs every process under CgroupRoot until none is left, then removes
// the cgroups, deepest first.
func (n Node) removeCgroups(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pids := n.cgroupPIDs()
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v are still in cgroup %s", pids, n.CgroupRoot())
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var errs []error
	for _, d := range n.cgroupDirs() {
		if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// nodeMountRoots are the directories under which the node mounts: pods' volumes in the
// kubelet's root, container root filesystems, sandboxes' /dev/shm and network namespaces
// in containerd's state, overlay snapshots in containerd's root.
func (n Node) nodeMountRoots() []string {
	return []string{n.Dir(), n.RuntimeDir()}
}

// nodeMounts lists the mount points under the node's directories, deepest first.
func (n Node) nodeMounts() []string {
	mounts, err := procfs.GetMounts()
	if err != nil {
		return nil
	}
	var points []string
	for _, m := range mounts {
		for _, root := range n.nodeMountRoots() {
			if m.MountPoint == root || strings.HasPrefix(m.MountPoint, root+"/") {
				points = append(points, m.MountPoint)
			}
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	return points
}

// unmountAll detaches every mount under the node's directories.
func (n Node) unmountAll() error {
	var errs []error
	for range 5 {
		points := n.nodeMounts()
		if len(points) == 0 {
			return nil
		}
		errs = errs[:0]
		for _, p := range points {
			if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
			}
		}
	}
	if points := n.nodeMounts(); len(points) > 0 {
		errs = append(errs, fmt.Errorf("still mounted: %s", strings.Join(points, ", ")))
	}
	return errors.Join(errs...)
}

// nodeChainPrefixes name the iptables chains the node's components create: kube-proxy's
// and the kubelet's KUBE-*, the CNI portmap plugin's CNI-*.
var nodeChainPrefixes = []string{"KUBE-", "CNI-"}

func isNodeChain(name string) bool {
	for _, p := range nodeChainPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// iptablesLeftovers lists the node's rules and chains still in the IPv4 and IPv6 tables.
func iptablesLeftovers() []string {
	var left []string
	for _, cmd := range []string{"iptables-save", "ip6tables-save"} {
		out, err := exec.Command(cmd).Output()
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(out), "\n") {
			for _, p := range nodeChainPrefixes {
				if strings.Contains(line, p) && !strings.HasPrefix(line, "#") {
					left = append(left, cmd+": "+line)
					break
				}
			}
		}
	}
	return left
}

// removeIPTablesChains deletes every rule that jumps to a node chain, then the chains, in
// the IPv4 and IPv6 tables. kube-proxy --cleanup does this for kube-proxy's own; the
// kubelet's (KUBE-FIREWALL, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT) stay otherwise.
func removeIPTablesChains() error {
	var errs []error
	for _, bin := range []string{"iptables", "ip6tables"} {
		if _, err := exec.LookPath(bin); err != nil {
			continue
		}
		for _, table := range []string{"filter", "nat", "mangle", "raw"} {
			out, err := exec.Command(bin, "-w", "-t", table, "-S").Output()
			if err != nil {
				continue
			}
			var chains []string
			for _, line := range strings.Split(string(out), "\n") {
				f := ruleFields(line)
				switch {
				case len(f) == 2 && f[0] == "-N" && isNodeChain(f[1]):
					chains = append(chains, f[1])
				case len(f) > 2 && f[0] == "-A" && !isNodeChain(f[1]) && strings.Contains(line, " -j ") && jumpsToNodeChain(f):
					args := append([]string{"-w", "-t", table, "-D"}, f[1:]...)
					if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
						errs = append(errs, fmt.Errorf("%s %s: %w: %s", bin, strings.Join(args, " "), err, out))
					}
				}
			}
			for _, ch := range chains {
				_ = exec.Command(bin, "-w", "-t", table, "-F", ch).Run()
			}
			for _, ch := range chains {
				if out, err := exec.Command(bin, "-w", "-t", table, "-X", ch).CombinedOutput(); err != nil {
					errs = append(errs, fmt.Errorf("%s -t %s -X %s: %w: %s", bin, table, ch, err, out))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// ruleFields splits a line of `iptables -S` into the arguments that wrote it: iptables
// quotes an argument holding blanks (a comment: "kubernetes service portals") and escapes
// the quotes and backslashes inside, so a split on blanks would pass `"kubernetes`,
// `service` and `portals"` and iptables would refuse the rule it is asked to delete.
func ruleFields(line string) []string {
	var fields []string
	var cur strings.Builder
	inField, quoted := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quoted && c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case c == '"':
			quoted, inField = !quoted, true
		case !quoted && (c == ' ' || c == '\t'):
			if inField {
				fields = append(fields, cur.String())
				cur.Reset()
				inField = false
			}
		default:
			cur.WriteByte(c)
			inField = true
		}
	}
	if inField {
		fields = append(fields, cur.String())
	}
	return fields
}

func jumpsToNodeChain(fields []string) bool {
	for i, f := range fields {
		if (f == "-j" || f == "-g") && i+1 < len(fields) && isNodeChain(fields[i+1]) {
			return true
		}
	}
	return false
}

// processesRunning lists live processes whose executable is one of paths: the node's
// binaries in bin/, which nothing but the platform runs (containerd's shims outlive it).
func processesRunning(paths ...string) []int {
	procs, err := procfs.AllProcs()
	if err != nil {
		return nil
	}
	want := map[string]bool{}
	for _, p := range paths {
		want[p] = true
	}
	var pids []int
	for _, p := range procs {
		exe, err := p.Executable()
		if err != nil {
			continue
		}
		if want[strings.TrimSuffix(exe, " (deleted)")] {
			pids = append(pids, p.PID)
		}
	}
	return pids
}

// containerLogLinks are the kubelet's symlinks in /var/log/containers (a fixed path) to
// the logs of this node's containers.
func (n Node) containerLogLinks() []string {
	links, _ := filepath.Glob("/var/log/containers/*.log")
	var ours []string
	for _, l := range links {
		if target, err := os.Readlink(l); err == nil && strings.HasPrefix(target, n.podLogsDir()+"/") {
			ours = append(ours, l)
		}
	}
	return ours
}

// PodPIDs lists the processes of the real node's pod with this UID, from its cgroup: what
// a test kills to crash the pod's containers as a machine failure would.
func (n Node) PodPIDs(uid string) []int {
	seen := map[int]bool{}
	var pids []int
	for _, d := range n.cgroupDirs() {
		if !strings.Contains(d, "pod"+uid) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			var pid int
			if _, err := fmt.Sscan(f, &pid); err == nil && !seen[pid] {
				seen[pid] = true
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
