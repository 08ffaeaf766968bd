// Package clientconfig is the configuration every Kiln client reads: which API server to
// call, with which token, trusting which CA, in which namespace. `make up` writes one for
// the local platform; the CLI's `kiln config` edits it; the SDKs read the same file.
//
// The file is YAML:
//
//	current-context: local
//	contexts:
//	- name: local
//	  server: https://127.0.0.1:18443
//	  certificate-authority: /path/to/ca.crt
//	  token: eyJhbGciOi...
//	  namespace: default
//
// Environment variables override the current context: KILN_SERVER, KILN_TOKEN,
// KILN_TOKEN_FILE, KILN_NAMESPACE, KILN_CA_FILE, KILN_CONTEXT (pick another context), and KILN_CONFIG names
// the file (default $XDG_CONFIG_HOME/kiln/config.yaml, i.e. ~/.config/kiln/config.yaml).
package clientconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Environment variables a client reads.
const (
	EnvConfig    = "KILN_CONFIG"
	EnvContext   = "KILN_CONTEXT"
	EnvServer    = "KILN_SERVER"
	EnvToken     = "KILN_TOKEN"
	EnvTokenFile = "KILN_TOKEN_FILE"
	EnvNamespace = "KILN_NAMESPACE"
	EnvCAFile    = "KILN_CA_FILE"
)

// Config is the whole file.
type Config struct {
	CurrentContext string    `json:"current-context,omitempty"`
	Contexts       []Context `json:"contexts,omitempty"`
}

// Context is one API server and the credentials to call it with.
type Context struct {
	Name string `json:"name"`
	// Server is the API server's URL: https://host:port, or http://host:port for h2c.
	Server string `json:"server,omitempty"`
	// CertificateAuthority is a PEM file of CAs that sign the server's certificate; empty
	// trusts the system's.
	CertificateAuthority string `json:"certificate-authority,omitempty"`
	// Token is the bearer token: a Kubernetes ServiceAccount token or an OIDC ID token.
	Token string `json:"token,omitempty"`
	// TokenFile is a file holding the bearer token, read again for every request: a pod's
	// projected ServiceAccount token, which the kubelet rotates. Token, when set, wins.
	TokenFile string `json:"token-file,omitempty"`
	// Namespace is where commands act unless told otherwise.
	Namespace string `json:"namespace,omitempty"`
}

// DefaultPath is where the configuration lives unless KILN_CONFIG says otherwise.
func DefaultPath() string {
	if p := os.Getenv(EnvConfig); p != "" {
		return p
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return filepath.Join(".kiln", "config.yaml")
	}
	return filepath.Join(dir, "kiln", "config.yaml")
}

// Load reads the file at path. A missing file is an empty configuration.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Config{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Kiln configuration: %w", err)
	}
	cfg := &Config{}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return nil, fmt.Errorf("Kiln configuration %s: %w", path, err)
	}
	return cfg, nil
}

// Save writes the configuration to path, readable by its owner only (it holds tokens).
func (c *Config) Save(path string) error {
	data, err := yaml.Marshal(c)
	if err != nil {
		return fmt.Errorf("encoding Kiln configuration: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating the directory of %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("writing Kiln configuration: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing Kiln configuration: %w", err)
	}
	return nil
}

// Context returns the named context, or nil.
func (c *Config) Context(name string) *Context {
	for i := range c.Contexts {
		if c.Contexts[i].Name == name {
			return &c.Contexts[i]
		}
	}
	return nil
}

// SetContext adds ctx, or replaces the context of the same name.
func (c *Config) SetContext(ctx Context) {
	if existing := c.Context(ctx.Name); existing != nil {
		*existing = ctx
		return
	}
	c.Contexts = append(c.Contexts, ctx)
}

// Resolve returns the context a client uses: KILN_CONTEXT, else the current context, with
// the KILN_* variables applied over it. The result may come from the environment alone.
func (c *Config) Resolve() (Context, error) {
	name := c.CurrentContext
	if v := os.Getenv(EnvContext); v != "" {
		name = v
	}
	var out Context
	if name != "" {
		ctx := c.Context(name)
		if ctx == nil && os.Getenv(EnvServer) == "" {
			return out, fmt.Errorf("context %q is not in the Kiln configuration: list them with `kiln config get-contexts`", name)
		}
		if ctx != nil {
			out = *ctx
		}
	}
	if v := os.Getenv(EnvTokenFile); v != "" {
		out.Token, out.TokenFile = "", v
	}
	for env, dst := range map[string]*string{EnvServer: &out.Server, EnvToken: &out.Token, EnvNamespace: &out.Namespace, EnvCAFile: &out.CertificateAuthority} {
		if v := os.Getenv(env); v != "" {
			*dst = v
		}
	}
	if out.Server == "" {
		return out, fmt.Errorf("no Kiln API server configured: run `kiln config set-context` or set %s (configuration file: %s)", EnvServer, DefaultPath())
	}
	if err := out.Validate(); err != nil {
		return out, err
	}
	return out, nil
}

// Validate checks the server URL.
func (c Context) Validate() error {
	u, err := url.Parse(c.Server)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("server %q: want a URL such as https://kiln.example.com or http://127.0.0.1:18090", c.Server)
	}
	return nil
}

// HTTPClient returns an HTTP client for the context's server: HTTP/2 over TLS trusting its
// CA for https, HTTP/2 without TLS (h2c) for http, so that every Connect protocol,
// gRPC included, works.
func (c Context) HTTPClient() (*http.Client, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	if strings.HasPrefix(c.Server, "http://") {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
		return &http.Client{Transport: tr}, nil
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CertificateAuthority != "" {
		pem, err := os.ReadFile(c.CertificateAuthority)
		if err != nil {
			return nil, fmt.Errorf("reading certificate-authority: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("certificate-authority %s holds no PEM certificate", c.CertificateAuthority)
		}
		tlsConfig.RootCAs = pool
	}
	tr.TLSClientConfig = tlsConfig
	return &http.Client{Transport: tr}, nil
}

// BearerTransport adds the context's token to every request: Token, else the content of
// TokenFile, read for each request.
type BearerTransport struct {
	Token     string
	TokenFile string
	Base      http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t BearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	token := t.Token
	if token == "" && t.TokenFile != "" {
		data, err := os.ReadFile(t.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("reading the token file (token-file or %s): %w", EnvTokenFile, err)
		}
		token = strings.TrimSpace(string(data))
	}
	if token != "" {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return t.Base.RoundTrip(req)
}

// AuthenticatedClient is HTTPClient with the token added to every request.
func (c Context) AuthenticatedClient() (*http.Client, error) {
	hc, err := c.HTTPClient()
	if err != nil {
		return nil, err
	}
	hc.Transport = BearerTransport{Token: c.Token, TokenFile: c.TokenFile, Base: hc.Transport}
	return hc, nil
}
