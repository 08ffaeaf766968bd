package platform

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// PKI is the certificate authority the harness generates for the webhooks that the local
// apiserver calls at https://127.0.0.1, and the serving certificate every local webhook uses.
type PKI struct {
	Dir string
}

// CAFile is the PEM CA bundle that webhook configurations carry as caBundle.
func (p PKI) CAFile() string { return filepath.Join(p.Dir, "ca.crt") }

// ServingDir holds tls.crt and tls.key for 127.0.0.1, the layout controller-runtime expects.
func (p PKI) ServingDir() string { return filepath.Join(p.Dir, "serving") }

// Ensure creates the CA and the serving certificate unless valid ones already exist.
func (p PKI) Ensure(now time.Time) error {
	if p.valid(now) == nil {
		return nil
	}
	if err := os.MkdirAll(p.ServingDir(), 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", p.ServingDir(), err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kiln-local-platform-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("signing CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return fmt.Errorf("parsing CA certificate: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating serving key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("signing serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding serving key: %w", err)
	}
	files := map[string][]byte{
		p.CAFile():                               pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		filepath.Join(p.ServingDir(), "tls.crt"): pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		filepath.Join(p.ServingDir(), "tls.key"): pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return nil
}

// CABundle returns the PEM CA certificate.
func (p PKI) CABundle() ([]byte, error) {
	return os.ReadFile(p.CAFile())
}

func (p PKI) valid(now time.Time) error {
	pair, err := tls.LoadX509KeyPair(filepath.Join(p.ServingDir(), "tls.crt"), filepath.Join(p.ServingDir(), "tls.key"))
	if err != nil {
		return err
	}
	caPEM, err := p.CABundle()
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return errors.New("no CA certificate")
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return err
	}
	_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now.Add(24 * time.Hour), DNSName: "127.0.0.1"})
	return err
}
