package platform

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/procfs"
)

var ipEqual = cmp.Comparer(func(a, b net.IP) bool { return a.Equal(b) })

// TestListenersOfThisProcess opens sockets in the test process and finds them in the real
// /proc: the listener, but neither the accepted nor the dialing end of a connection to it.
func TestListenersOfThisProcess(t *testing.T) {
	cases := map[string]struct {
		network, listen, dial string
		wantAddr              net.IP
	}{
		"ipv4 loopback": {network: "tcp4", listen: "127.0.0.1:0", dial: "127.0.0.1", wantAddr: net.IPv4(127, 0, 0, 1)},
		"ipv4 wildcard": {network: "tcp4", listen: "0.0.0.0:0", dial: "127.0.0.1", wantAddr: net.IPv4zero},
		"ipv6 loopback": {network: "tcp6", listen: "[::1]:0", dial: "::1", wantAddr: net.IPv6loopback},
		"ipv6 wildcard": {network: "tcp6", listen: "[::]:0", dial: "::1", wantAddr: net.IPv6zero},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l, err := net.Listen(tc.network, tc.listen)
			if err != nil {
				t.Skipf("this host cannot listen on %s: %v", tc.listen, err)
			}
			defer l.Close()
			port := l.Addr().(*net.TCPAddr).Port
			client, err := net.Dial(tc.network, net.JoinHostPort(tc.dial, strconv.Itoa(port)))
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			server, err := l.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer server.Close()
			clientPort := client.LocalAddr().(*net.TCPAddr).Port

			all, err := Listeners([]int{os.Getpid()})
			if err != nil {
				t.Fatal(err)
			}
			var got []Listener
			for _, l := range all {
				if l.Port == port || l.Port == clientPort {
					got = append(got, l)
				}
			}
			want := []Listener{{PID: os.Getpid(), Addr: tc.wantAddr, Port: port}}
			if diff := cmp.Diff(want, got, ipEqual); diff != "" {
				t.Errorf("Listeners() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestListenersUnknownPID(t *testing.T) {
	if _, err := Listeners([]int{1 << 30}); err == nil { // above Linux's PID_MAX_LIMIT
		t.Fatal("want an error for a process that does not exist")
	}
}

// TestListenersOfFixture runs the same code on a made-up /proc, for sockets the test
// process cannot open and for tables the kernel would not write.
func TestListenersOfFixture(t *testing.T) {
	const header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	cases := map[string]struct {
		tcp, tcp6 string // absent when empty
		fds       map[int][]string
		want      []Listener
		wantErr   bool
	}{
		"ipv4 loopback listener and an established connection": {
			tcp: header +
				"   0: 0100007F:404B 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1 0000000000000000 100 0 0 10 0\n" +
				"   1: 0200000A:A3F0 0100007F:404B 01 00000000:00000000 00:00000000 00000000     0        0 12346 1 0000000000000000 20 4 30 10 -1\n",
			fds:  map[int][]string{42: {"socket:[12345]", "socket:[12346]", "/dev/null"}},
			want: []Listener{{PID: 42, Addr: net.IPv4(127, 0, 0, 1), Port: 16459}},
		},
		"ipv6 wildcard and loopback listeners of two processes": {
			tcp: header,
			tcp6: header +
				"   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 777 1 0000000000000000 100 0 0 10 0\n" +
				"   1: 00000000000000000000000001000000:1F91 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 778 1 0000000000000000 100 0 0 10 0\n",
			fds: map[int][]string{7: {"socket:[777]"}, 8: {"pipe:[778]", "socket:[778]"}},
			want: []Listener{
				{PID: 7, Addr: net.IPv6zero, Port: 8080},
				{PID: 8, Addr: net.IPv6loopback, Port: 8081},
			},
		},
		"listener of another process": {
			tcp: header +
				"   0: 0100007F:404B 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1 0000000000000000 100 0 0 10 0\n",
			fds: map[int][]string{42: {"socket:[999]"}},
		},
		"malformed address": {
			tcp:     header + " 0: ZZZZ:0000 00000000:0000 0A a b c d e 1\n",
			fds:     map[int][]string{42: {"socket:[1]"}},
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.Mkdir(filepath.Join(root, "net"), 0o755); err != nil {
				t.Fatal(err)
			}
			for file, data := range map[string]string{"tcp": tc.tcp, "tcp6": tc.tcp6} {
				if data != "" {
					writeFile(t, filepath.Join(root, "net", file), data)
				}
			}
			var pids []int
			for pid, targets := range tc.fds {
				pids = append(pids, pid)
				dir := filepath.Join(root, strconv.Itoa(pid), "fd")
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				for fd, target := range targets {
					if err := os.Symlink(target, filepath.Join(dir, strconv.Itoa(fd))); err != nil {
						t.Fatal(err)
					}
				}
			}
			fs, err := procfs.NewFS(root)
			if err != nil {
				t.Fatal(err)
			}

			got, err := listeners(fs, pids)
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Fatalf("listeners() error = %v, want error: %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, ipEqual, cmpopts.SortSlices(func(a, b Listener) bool { return a.PID < b.PID })); diff != "" {
				t.Errorf("listeners() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSocketInode(t *testing.T) {
	cases := map[string]struct {
		target    string
		wantInode uint64
		wantOK    bool
	}{
		"socket":     {target: "socket:[12345]", wantInode: 12345, wantOK: true},
		"pipe":       {target: "pipe:[12345]"},
		"file":       {target: "/var/log/x.log"},
		"bad inode":  {target: "socket:[x]"},
		"unreadable": {target: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			gotInode, gotOK := socketInode(tc.target)
			if gotInode != tc.wantInode || gotOK != tc.wantOK {
				t.Errorf("socketInode(%q) = %d, %v; want %d, %v", tc.target, gotInode, gotOK, tc.wantInode, tc.wantOK)
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
