package platform

import (
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseProcNetTCP(t *testing.T) {
	cases := map[string]struct {
		table string
		want  []procSocket
	}{
		"ipv4 loopback listener and an established connection": {
			table: `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:404B 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1 0000000000000000 100 0 0 10 0
   1: 0200000A:A3F0 0100007F:404B 01 00000000:00000000 00:00000000 00000000     0        0 12346 1 0000000000000000 20 4 30 10 -1`,
			want: []procSocket{
				{addr: net.IPv4(127, 0, 0, 1).To4(), port: 16459, listening: true, inode: "12345"},
				{addr: net.IPv4(10, 0, 0, 2).To4(), port: 41968, listening: false, inode: "12346"},
			},
		},
		"ipv6 wildcard listener": {
			table: `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 777 1 0000000000000000 100 0 0 10 0`,
			want: []procSocket{{addr: net.IPv6zero, port: 8080, listening: true, inode: "777"}},
		},
		"ipv6 loopback": {
			table: `header
   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 778 1 0000000000000000 100 0 0 10 0`,
			want: []procSocket{{addr: net.IPv6loopback, port: 8080, listening: true, inode: "778"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseProcNetTCP(strings.NewReader(tc.table))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(procSocket{}), cmp.Comparer(func(a, b net.IP) bool { return a.Equal(b) })); diff != "" {
				t.Errorf("parseProcNetTCP() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseProcNetTCPRejectsGarbage(t *testing.T) {
	if _, err := parseProcNetTCP(strings.NewReader("h\n 0: ZZZZ:0000 00000000:0000 0A a b c d e 1")); err == nil {
		t.Fatal("want an error for a malformed address")
	}
}
