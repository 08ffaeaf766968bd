package webhook

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// The operator's webhook server speaks HTTP/1.1 to a client that offers HTTP/2 first, as
// the kube-apiserver does; controller-runtime's default server, the control, speaks HTTP/2.
func TestWebhookServerSpeaksHTTP1Only(t *testing.T) {
	dir := selfSignedCert(t)
	for _, tc := range []struct {
		name   string
		server func(port int) webhook.Server
		want   string
	}{
		{"kiln", func(port int) webhook.Server { return NewServer("127.0.0.1", port, dir) }, "http/1.1"},
		{"controller-runtime's default", func(port int) webhook.Server {
			return webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir})
		}, "h2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := freePort(t)
			srv := tc.server(port)
			srv.Register("/ok", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- srv.Start(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("webhook server: %v", err)
				}
			}()
			var conn *tls.Conn
			err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				var err error
				conn, err = tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}) //nolint:gosec // a test's self-signed certificate
				return err == nil, nil
			})
			if err != nil {
				t.Fatalf("dialing the webhook server: %v", err)
			}
			defer conn.Close()
			if got := conn.ConnectionState().NegotiatedProtocol; got != tc.want {
				t.Fatalf("negotiated %q, want %q", got, tc.want)
			}
		})
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// selfSignedCert writes tls.crt and tls.key for 127.0.0.1 in a new directory.
func selfSignedCert(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, typ string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("tls.crt", "CERTIFICATE", der)
	write("tls.key", "EC PRIVATE KEY", keyDER)
	return dir
}
