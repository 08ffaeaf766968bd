// Package pki is the certificate authority of the platform's local webhooks and servers.
package pki

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// PKI is the certificate authority the harness generates for the webhooks that the local
// apiserver calls at https://127.0.0.1, and the serving certificate every local webhook uses.
type PKI struct {
	Dir string
	// IPs are more addresses the serving certificate names, besides 127.0.0.1.
	IPs []net.IP
}

// CAFile is the PEM CA bundle that webhook configurations carry as caBundle.
func (p PKI) CAFile() string { return filepath.Join(p.Dir, "ca.crt") }

// ServingDir holds tls.crt and tls.key for 127.0.0.1, the layout controller-runtime expects.
func (p PKI) ServingDir() string { return filepath.Join(p.Dir, "serving") }

func (p PKI) certFile() string { return filepath.Join(p.ServingDir(), "tls.crt") }
func (p PKI) keyFile() string  { return filepath.Join(p.ServingDir(), "tls.key") }

// Ensure creates the CA and the serving certificate unless ones valid at now, and for a
// day after, already exist. New ones are valid from an hour before the wall clock for a
// year (client-go's choice); now only judges the existing ones.
func (p PKI) Ensure(now time.Time) error {
	if p.valid(now) == nil {
		return nil
	}
	if err := os.MkdirAll(p.ServingDir(), 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", p.ServingDir(), err)
	}
	// A serving certificate signed by a fresh CA whose key is thrown away: nothing else is
	// ever signed with it. The PEM holds the serving certificate, then the CA.
	chain, key, err := cert.GenerateSelfSignedCertKeyWithOptions(cert.SelfSignedCertKeyOptions{
		Host:         "127.0.0.1",
		AlternateDNS: []string{"localhost"},
		AlternateIPs: p.IPs,
	})
	if err != nil {
		return fmt.Errorf("generating the serving certificate: %w", err)
	}
	certs, err := cert.ParseCertsPEM(chain)
	if err != nil {
		return fmt.Errorf("reading the generated certificates: %w", err)
	}
	if len(certs) != 2 {
		return fmt.Errorf("client-go generated %d certificates, want the serving one and its CA", len(certs))
	}
	ca, err := cert.EncodeCertificates(certs[1])
	if err != nil {
		return fmt.Errorf("encoding the CA certificate: %w", err)
	}
	if err := keyutil.WriteKey(p.keyFile(), key); err != nil {
		return fmt.Errorf("writing %s: %w", p.keyFile(), err)
	}
	if err := cert.WriteCert(p.certFile(), chain); err != nil {
		return fmt.Errorf("writing %s: %w", p.certFile(), err)
	}
	if err := cert.WriteCert(p.CAFile(), ca); err != nil {
		return fmt.Errorf("writing %s: %w", p.CAFile(), err)
	}
	return nil
}

// CABundle returns the PEM CA certificate.
func (p PKI) CABundle() ([]byte, error) {
	return os.ReadFile(p.CAFile())
}

// valid checks that the key pair matches and that the CA vouches for it, as 127.0.0.1, as
// localhost and as its other addresses, until a day after now.
func (p PKI) valid(now time.Time) error {
	pair, err := tls.LoadX509KeyPair(p.certFile(), p.keyFile())
	if err != nil {
		return err
	}
	roots, err := cert.NewPool(p.CAFile())
	if err != nil {
		return err
	}
	hosts := []string{"127.0.0.1", "localhost"}
	for _, ip := range p.IPs {
		hosts = append(hosts, ip.String())
	}
	for _, host := range hosts {
		if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now.Add(24 * time.Hour), DNSName: host}); err != nil {
			return err
		}
	}
	return nil
}
