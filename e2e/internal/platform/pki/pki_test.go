package pki

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPKIEnsure(t *testing.T) {
	cases := map[string]struct {
		// damage breaks a valid PKI in place; nil leaves it as it is.
		damage func(t *testing.T, p PKI)
		// ensureAt is when the second Ensure runs, relative to the first.
		ensureAt      time.Duration
		wantRecreated bool
	}{
		"valid files are kept": {},
		"kept two days before expiry": {
			ensureAt: 365*24*time.Hour - 49*time.Hour,
		},
		"expiring within a day": {
			ensureAt:      365*24*time.Hour - 12*time.Hour,
			wantRecreated: true,
		},
		"expired": {
			ensureAt:      2 * 365 * 24 * time.Hour,
			wantRecreated: true,
		},
		"corrupt certificate": {
			damage:        func(t *testing.T, p PKI) { writeFile(t, filepath.Join(p.ServingDir(), "tls.crt"), "not a certificate") },
			wantRecreated: true,
		},
		"missing key": {
			damage: func(t *testing.T, p PKI) {
				if err := os.Remove(filepath.Join(p.ServingDir(), "tls.key")); err != nil {
					t.Fatal(err)
				}
			},
			wantRecreated: true,
		},
		"CA that did not sign the serving certificate": {
			damage: func(t *testing.T, p PKI) {
				other := PKI{Dir: t.TempDir()}
				if err := other.Ensure(time.Now()); err != nil {
					t.Fatal(err)
				}
				ca, err := other.CABundle()
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, p.CAFile(), string(ca))
			},
			wantRecreated: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := PKI{Dir: t.TempDir()}
			now := time.Now()
			if err := p.Ensure(now); err != nil {
				t.Fatalf("first Ensure: %v", err)
			}
			verifyServing(t, p, now)
			if tc.damage != nil {
				tc.damage(t, p)
			}
			before := readPKI(t, p)

			if err := p.Ensure(now.Add(tc.ensureAt)); err != nil {
				t.Fatalf("second Ensure: %v", err)
			}
			after := readPKI(t, p)
			gotChanged, wantChanged := map[string]bool{}, map[string]bool{}
			for f := range before {
				gotChanged[f] = before[f] != after[f]
				wantChanged[f] = tc.wantRecreated
			}
			if diff := cmp.Diff(wantChanged, gotChanged); diff != "" {
				t.Errorf("files changed by the second Ensure (-want +got):\n%s", diff)
			}
			verifyServing(t, p, now)
		})
	}
}

// verifyServing checks what the webhooks' callers rely on: ca.crt vouches for the serving
// certificate as 127.0.0.1 and localhost, and tls.crt/tls.key load as a pair.
func verifyServing(t *testing.T, p PKI, at time.Time) {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(p.ServingDir(), "tls.crt"), filepath.Join(p.ServingDir(), "tls.key"))
	if err != nil {
		t.Fatalf("loading the serving key pair: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	ca, err := p.CABundle()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		t.Fatalf("%s holds no certificate", p.CAFile())
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: at, DNSName: host}); err != nil {
			t.Errorf("serving certificate for %s: %v", host, err)
		}
	}
	if diff := cmp.Diff([]net.IP{net.IPv4(127, 0, 0, 1)}, leaf.IPAddresses, cmp.Comparer(func(a, b net.IP) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("IP SANs mismatch (-want +got):\n%s", diff)
	}
}

func readPKI(t *testing.T, p PKI) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range []string{p.CAFile(), filepath.Join(p.ServingDir(), "tls.crt"), filepath.Join(p.ServingDir(), "tls.key")} {
		data, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = string(data)
	}
	return out
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
