package platform

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/kiln-ml/kiln/build/images"
	"github.com/kiln-ml/kiln/e2e/internal/platform/probe"
	"github.com/kiln-ml/kiln/e2e/internal/platform/process"
)

// The local platform's OCI registry: distribution's registry (tools/registry), a process on
// 127.0.0.1 serving HTTPS with the platform's serving certificate, its storage under the
// platform's directory. The real node's containerd trusts it (the platform's CA, in its
// hosts configuration), so the chart's pods pull their images from it as on any cluster;
// `make release-push` pushes a release's images and chart to it. Its content stays across
// `down` and `up`, like containerd's images.

// RegistryHost is the registry's host:port, the first element of the references of the
// images in it (127.0.0.1:18500/kiln/kiln-operator:v0.2.0).
func (c Config) RegistryHost() string { return fmt.Sprintf("127.0.0.1:%d", c.RegistryPort) }

func (c Config) registryDir() string { return filepath.Join(c.StateDir, "registry") }

// RegistryProcess is the registry, from bin/.
func (c Config) RegistryProcess() Process {
	return Process{
		Name: "registry", Path: c.Bin("registry"), RunDir: c.RunDir(), LogsDir: c.LogsDir(),
		Args: []string{"serve", filepath.Join(c.ConfigDir(), "registry.yaml")},
		// distribution exports traces over OTLP by default; nothing receives them here.
		Env: []string{"OTEL_TRACES_EXPORTER=none"},
	}
}

// registryConfig is distribution's configuration: the filesystem driver in registryDir,
// deletes allowed (a re-pushed tag replaces its manifest; garbage collection is offline),
// HTTPS on 127.0.0.1 with the platform's certificate, no access log.
func (c Config) registryConfig() ([]byte, error) {
	return yaml.Marshal(map[string]any{
		"version": 0.1,
		"log":     map[string]any{"level": "info", "formatter": "text", "accesslog": map[string]any{"disabled": true}},
		"storage": map[string]any{
			"filesystem": map[string]any{"rootdirectory": c.registryDir()},
			"delete":     map[string]any{"enabled": true},
			"redirect":   map[string]any{"disable": true},
		},
		"http": map[string]any{
			"addr": c.RegistryHost(),
			"tls": map[string]any{
				"certificate": filepath.Join(c.PKI().ServingDir(), "tls.crt"),
				"key":         filepath.Join(c.PKI().ServingDir(), "tls.key"),
			},
			"headers": map[string]any{"X-Content-Type-Options": []string{"nosniff"}},
		},
		"health": map[string]any{"storagedriver": map[string]any{"enabled": false}},
	})
}

// registryUp starts the registry unless it runs, and waits until it answers the
// distribution API's version check (GET /v2/) over TLS verified with the platform's CA.
func (p *Platform) registryUp(ctx context.Context) error {
	cfg, err := p.registryConfig()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(p.ConfigDir(), "registry.yaml"), cfg, 0o644); err != nil {
		return err
	}
	proc := p.RegistryProcess()
	if pid, running := proc.Running(); running {
		p.logf("registry: already running (pid %d)", pid)
	} else {
		if err := proc.Start(); err != nil {
			return err
		}
	}
	client, err := p.RegistryClient()
	if err != nil {
		return err
	}
	url := "https://" + p.RegistryHost() + "/v2/"
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, p.ComponentTimeout, true, func(ctx context.Context) (bool, error) {
		if _, running := proc.Running(); !running {
			return false, fmt.Errorf("the registry exited")
		}
		if !probe.TLSListening(ctx, p.RegistryPort) {
			return false, nil
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("registry did not become ready: %w\n--- %s (last 30 lines)\n%s", err, proc.LogFile(), process.Tail(proc.LogFile(), 30))
	}
	p.logf("registry: https://%s (distribution, storage %s, log %s)", p.RegistryHost(), p.registryDir(), proc.LogFile())
	return nil
}

// RegistryClient is an HTTP client that trusts the platform's CA, the registry's.
func (c Config) RegistryClient() (*http.Client, error) {
	ca, err := c.PKI().CABundle()
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("no certificate in %s", c.PKI().CAFile())
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}, nil
}

// PushImage pushes the image index of an OCI archive (make images) to ref, in the registry.
func (c Config) PushImage(ctx context.Context, archive, ref string) error {
	idx, done, err := images.OpenArchive(archive)
	if err != nil {
		return err
	}
	defer done()
	t, err := images.TrustingTransport(c.PKI().CAFile())
	if err != nil {
		return err
	}
	return images.Push(idx, ref, nil, remote.WithTransport(t), remote.WithContext(ctx))
}
