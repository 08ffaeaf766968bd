// Package chart installs Kiln's Helm chart on the local platform, its pods on the real node
// pulling the images of `make images` and `make addon-images` from the platform's registry.
package chart

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kiln-ml/kiln/e2e/internal/platform/cluster"
	"github.com/kiln-ml/kiln/e2e/internal/platform/manifests"
	"github.com/kiln-ml/kiln/e2e/internal/platform/pki"
	"github.com/kiln-ml/kiln/e2e/internal/platform/process"
	"github.com/kiln-ml/kiln/e2e/internal/platform/realnode"
)

// ReleaseName is the chart's release, in Release.Namespace.
const ReleaseName = "kiln"

// Release is Kiln's chart, charts/kiln, installed on the local platform: Kiln's operator and
// API server, JobSet and Kueue run as pods on the real node.
type Release struct {
	// Root is the repository: the chart is charts/kiln.
	Root string
	// BinDir holds helm, kiln-platform (the forwards) and the images of `make images`
	// and `make addon-images` (images/).
	BinDir string
	// StateDir holds helm's state and kubectl's cache.
	StateDir string
	// ConfigDir holds the values the chart is installed with.
	ConfigDir string
	// Kubeconfig is the admin kubeconfig of the cluster.
	Kubeconfig string
	// RunDir and LogsDir hold the forwards' PID files and logs.
	RunDir, LogsDir string
	PKI             pki.PKI
	// Namespace is the release's namespace, the API server's.
	Namespace string
	// QueueNamespace is where the chart's default LocalQueue goes.
	QueueNamespace string
	// APIPort and APITLSPort are where the API server is forwarded to on 127.0.0.1.
	APIPort, APITLSPort int
	// The operator's client budget and TrainJob parallelism.
	QPS         float64
	Burst       int
	Concurrency int
	// Registry is the platform's OCI registry (host:port), which the real node pulls from.
	Registry string
	// PushImage pushes an image archive to ref, in Registry.
	PushImage func(ctx context.Context, archive, ref string) error
	// From, when set, is a release's directory (make release): its chart and Kiln's images
	// are installed in place of this clone's, with only the images' registries set, as an
	// admin installs a release. This clone's images are pushed too, for an upgrade to them.
	From string
}

// Images are the images the chart's pods run, pushed to the platform's registry: Kiln's
// (make images) and JobSet's and Kueue's (make addon-images).
var Images = []string{"kiln-operator", "kiln-apiserver", "kiln", "jobset", "kueue"}

// addons are the Images that are JobSet's and Kueue's: mirrored as registry.k8s.io has them
// (<registry>/jobset/jobset), where Kiln's go to <registry>/kiln/<name>, as an air-gapped
// cluster's mirror would hold them (docs/install.md).
var addons = map[string]bool{"jobset": true, "kueue": true}

// ImageRef is where image name (one of Images) is in the registry: its registry path,
// repository and tag (the tag `make images` or `make addon-images` gave its archive).
func (r Release) ImageRef(name string) (registry, repository, tag string, err error) {
	ref, err := realnode.ArchiveRef(filepath.Join(r.BinDir, "images", name+".tar"))
	if err != nil {
		return "", "", "", fmt.Errorf("image %s: %w (`make chart-up` builds it: make images, make addon-images)", name, err)
	}
	_, tag, ok := strings.Cut(ref, ":")
	if !ok {
		return "", "", "", fmt.Errorf("image %s: reference %q has no tag", name, ref)
	}
	if addons[name] {
		return r.Registry + "/" + name, name, tag, nil
	}
	return r.Registry + "/kiln", name, tag, nil
}

// Forwards relay the API server's ports on 127.0.0.1 (where the CLI, the SDKs and the
// e2e suite reach it in either mode) to its Service.
func (r Release) Forwards(clusterIP string) []process.Process {
	proc := func(name string, local, remote int) process.Process {
		return process.Process{Name: name, Path: filepath.Join(r.BinDir, "kiln-platform"), RunDir: r.RunDir, LogsDir: r.LogsDir, Args: []string{
			"forward", fmt.Sprintf("--listen=127.0.0.1:%d", local), fmt.Sprintf("--to=%s:%d", clusterIP, remote),
		}}
	}
	return []process.Process{
		proc("kiln-apiserver-forward", r.APITLSPort, apiServerTLSPort),
		proc("kiln-apiserver-forward-h2c", r.APIPort, apiServerPort),
	}
}

const (
	apiServerPort    = 8090
	apiServerTLSPort = 8443
	tlsSecret        = "kiln-apiserver-tls"
)

// Values are the values the local platform installs the chart with: Kiln's images
// as `make images` tagged them, the pods on the real node, the API server serving TLS with
// the platform's certificate (which names 127.0.0.1, where it is forwarded to).
func (r Release) Values() (map[string]any, error) {
	image := func(name string) (map[string]any, error) {
		registry, repository, tag, err := r.ImageRef(name)
		if err != nil {
			return nil, err
		}
		if r.From != "" && !addons[name] {
			// The release's chart names its own images' tag.
			return map[string]any{"registry": registry, "repository": repository, "pullPolicy": "IfNotPresent"}, nil
		}
		return map[string]any{"registry": registry, "repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"}, nil
	}
	realNode := map[string]any{
		"nodeSelector": map[string]any{realnode.LabelNodePool: realnode.NodePool},
		"tolerations":  []any{map[string]any{"key": realnode.Taint, "operator": "Equal", "value": realnode.NodePool, "effect": "NoSchedule"}},
	}
	values := map[string]any{}
	for key, name := range map[string]string{"operator": "kiln-operator", "apiserver": "kiln-apiserver", "tests": "kiln"} {
		img, err := image(name)
		if err != nil {
			return nil, err
		}
		v := map[string]any{"image": img, "nodeSelector": realNode["nodeSelector"], "tolerations": realNode["tolerations"]}
		values[key] = v
	}
	op := values["operator"].(map[string]any)
	op["kubeAPI"] = map[string]any{"qps": r.QPS, "burst": r.Burst}
	op["concurrency"] = r.Concurrency
	op["logLevel"] = "debug"
	api := values["apiserver"].(map[string]any)
	api["port"] = apiServerPort
	api["tls"] = map[string]any{"secretName": tlsSecret, "port": apiServerTLSPort}
	if r.From == "" {
		// Where the API server is forwarded to, published in kube-public/kiln-info (a
		// release before it has neither value).
		ca, err := os.ReadFile(r.PKI.CAFile())
		if err != nil {
			return nil, err
		}
		api["url"], api["caBundle"] = fmt.Sprintf("https://127.0.0.1:%d", r.APITLSPort), string(ca)
	}

	// JobSet and Kueue from their upstream charts, with the images of `make addon-images`
	// and requests that leave the real node's CPUs to the training pods.
	small := map[string]any{"requests": map[string]any{"cpu": "50m", "memory": "128Mi"}, "limits": map[string]any{"memory": "1Gi"}}
	jobsetImage, err := image("jobset")
	if err != nil {
		return nil, err
	}
	kueueImage, err := image("kueue")
	if err != nil {
		return nil, err
	}
	values["jobset"] = map[string]any{
		"install": true,
		"image":   upstreamImage(jobsetImage),
		"controller": map[string]any{
			"nodeSelector": realNode["nodeSelector"], "tolerations": realNode["tolerations"], "resources": small,
		},
	}
	values["kueue"] = map[string]any{
		"install": true,
		"controllerManager": map[string]any{
			"manager":      map[string]any{"image": upstreamImage(kueueImage), "resources": small},
			"nodeSelector": realNode["nodeSelector"], "tolerations": realNode["tolerations"],
		},
	}
	// The chart's default queues, beside the platform's own (Queues): the e2e suite checks
	// that the hooks create them on a fresh install and delete them on uninstall.
	values["defaultQueues"] = map[string]any{
		"enabled":        true,
		"resourceFlavor": Queue,
		"clusterQueue":   map[string]any{"name": Queue, "resources": map[string]any{"cpu": "1", "memory": "1Gi"}},
		"localQueue":     map[string]any{"name": Queue, "namespaces": []any{r.QueueNamespace}},
	}
	return values, nil
}

// Queue names the chart's default ResourceFlavor, ClusterQueue and LocalQueue on the
// local platform.
const Queue = "kiln-chart-default"

// upstreamImage is an image in the form JobSet's and Kueue's charts take: registry and
// repository together.
func upstreamImage(img map[string]any) map[string]any {
	return map[string]any{"repository": fmt.Sprintf("%s/%s", img["registry"], img["repository"]), "tag": img["tag"], "pullPolicy": img["pullPolicy"]}
}

// Up installs (or upgrades) the chart, with Kiln's, JobSet's and Kueue's images pushed to
// the platform's registry (the real node pulls them), and forwards the API server's ports
// to its Service.
func (r Release) Up(ctx context.Context, cs *cluster.Clients) error {
	values, err := r.Values()
	if err != nil {
		return err
	}
	for _, name := range Images {
		registry, repository, tag, err := r.ImageRef(name)
		if err != nil {
			return err
		}
		if err := r.PushImage(ctx, filepath.Join(r.BinDir, "images", name+".tar"), registry+"/"+repository+":"+tag); err != nil {
			return err
		}
	}
	kc, err := kubernetes.NewForConfig(cs.Config)
	if err != nil {
		return err
	}
	if err := r.tlsSecret(ctx, cs); err != nil {
		return err
	}
	data, err := yaml.Marshal(values)
	if err != nil {
		return err
	}
	valuesFile := filepath.Join(r.ConfigDir, "chart-values.yaml")
	if err := os.WriteFile(valuesFile, data, 0o644); err != nil {
		return err
	}
	// As from a release: the chart packaged with its dependencies, pushed to the registry and
	// installed from there (oci://), the images' registry set by values.
	var chartRef, version string
	if r.From != "" {
		chartRef, version, err = r.pushRelease(ctx)
	} else {
		chartRef, version, err = r.pushChart(ctx, "")
	}
	if err != nil {
		return err
	}
	if out, err := r.Helm(ctx, "upgrade", "--install", ReleaseName, chartRef, "--version", version, "--ca-file", r.PKI.CAFile(),
		"--namespace", r.Namespace, "--values", valuesFile, "--wait", "--timeout", "5m"); err != nil {
		return fmt.Errorf("installing the chart: %w\n%s%s", err, out, r.podLogs(ctx, kc))
	}
	svc, err := kc.CoreV1().Services(r.Namespace).Get(ctx, ReleaseName+"-apiserver", metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, f := range r.Forwards(svc.Spec.ClusterIP) {
		_ = f.Stop(5 * time.Second) // the Service's address may have changed
		if err := f.Start(); err != nil {
			return err
		}
	}
	return nil
}

// pushChart packages charts/kiln (its dependencies included) as version (its own when
// empty; another is the chart's appVersion too) and pushes it to the registry, returning
// the chart's oci:// reference and version.
func (r Release) pushChart(ctx context.Context, version string) (ref, pushed string, err error) {
	args := []string{"package", filepath.Join(r.Root, "charts", "kiln"), "--destination", filepath.Join(r.StateDir, "charts")}
	if version == "" {
		if version, err = r.chartVersion(); err != nil {
			return "", "", err
		}
	} else {
		args = append(args, "--version", version, "--app-version", version)
	}
	if out, err := r.Helm(ctx, args...); err != nil {
		return "", "", fmt.Errorf("packaging the chart: %w\n%s", err, out)
	}
	repo := "oci://" + r.Registry + "/charts"
	if out, err := r.Helm(ctx, "push", filepath.Join(r.StateDir, "charts", "kiln-"+version+".tgz"), repo, "--ca-file", r.PKI.CAFile()); err != nil {
		return "", "", fmt.Errorf("pushing the chart %s to %s: %w\n%s", version, repo, err, out)
	}
	return repo + "/kiln", version, nil
}

// chartVersion is charts/kiln's version.
func (r Release) chartVersion() (string, error) {
	var meta struct{ Version string }
	data, err := os.ReadFile(filepath.Join(r.Root, "charts", "kiln", "Chart.yaml"))
	if err != nil {
		return "", err
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		return "", fmt.Errorf("charts/kiln/Chart.yaml: %w", err)
	}
	return meta.Version, nil
}

// pushRelease pushes the release in From, its Kiln images (tagged as the release tagged
// them) and its chart package, to the registry, returning the chart's oci:// reference and
// version.
func (r Release) pushRelease(ctx context.Context) (ref, version string, err error) {
	for _, name := range Images {
		if addons[name] {
			continue
		}
		archive := filepath.Join(r.From, "images", name+".tar")
		tagged, err := realnode.ArchiveRef(archive)
		if err != nil {
			return "", "", fmt.Errorf("release %s, image %s: %w", r.From, name, err)
		}
		_, tag, _ := strings.Cut(tagged, ":")
		if err := r.PushImage(ctx, archive, r.Registry+"/kiln/"+name+":"+tag); err != nil {
			return "", "", err
		}
	}
	// This clone's build, as the release an upgrade goes to (UpgradeVersion).
	target, err := r.UpgradeVersion()
	if err != nil {
		return "", "", err
	}
	for _, name := range Images {
		if addons[name] {
			continue
		}
		if err := r.PushImage(ctx, filepath.Join(r.BinDir, "images", name+".tar"), r.Registry+"/kiln/"+name+":v"+target); err != nil {
			return "", "", err
		}
	}
	if _, _, err := r.pushChart(ctx, target); err != nil {
		return "", "", err
	}

	packages, _ := filepath.Glob(filepath.Join(r.From, "kiln-*.tgz"))
	if len(packages) != 1 {
		return "", "", fmt.Errorf("release %s: want one chart package kiln-<version>.tgz, found %d", r.From, len(packages))
	}
	version = strings.TrimSuffix(strings.TrimPrefix(filepath.Base(packages[0]), "kiln-"), ".tgz")
	repo := "oci://" + r.Registry + "/charts"
	if out, err := r.Helm(ctx, "push", packages[0], repo, "--ca-file", r.PKI.CAFile()); err != nil {
		return "", "", fmt.Errorf("pushing the chart of release %s to %s: %w\n%s", r.From, repo, err, out)
	}
	return repo + "/kiln", version, nil
}

// UpgradeVersion is the version this clone's chart and Kiln's images are pushed as when
// the platform installs a release (From): the chart's version with a pre-release of the
// images' tag (0.1.0-dev.062a892), its images tagged v<version> as a release's are, so that
// an upgrade to it is what an upgrade to a release is.
func (r Release) UpgradeVersion() (string, error) {
	version, err := r.chartVersion()
	if err != nil {
		return "", err
	}
	_, _, tag, err := r.ImageRef("kiln-operator")
	if err != nil {
		return "", err
	}
	return version + "-dev." + strings.TrimPrefix(tag, "v"), nil
}

// tlsSecret gives the chart's API server the platform's serving certificate.
func (r Release) tlsSecret(ctx context.Context, cs *cluster.Clients) error {
	crt, err := os.ReadFile(filepath.Join(r.PKI.ServingDir(), "tls.crt"))
	if err != nil {
		return err
	}
	key, err := os.ReadFile(filepath.Join(r.PKI.ServingDir(), "tls.key"))
	if err != nil {
		return err
	}
	return cs.Apply(ctx,
		manifests.Object("v1", "Namespace", "", r.Namespace, nil),
		manifests.Object("v1", "Secret", r.Namespace, tlsSecret, map[string]any{
			"type": string(corev1.SecretTypeTLS),
			"data": map[string]any{"tls.crt": base64.StdEncoding.EncodeToString(crt), "tls.key": base64.StdEncoding.EncodeToString(key)},
		}),
	)
}

// Helm runs bin/helm against the platform, its state under the platform's directory.
func (r Release) Helm(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(r.BinDir, "helm"), append([]string{"--kubeconfig", r.Kubeconfig}, args...)...)
	helmDir := filepath.Join(r.StateDir, "helm")
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(helmDir, "cache"), "HELM_CONFIG_HOME="+filepath.Join(helmDir, "config"),
		"HELM_DATA_HOME="+filepath.Join(helmDir, "data"), "KUBECACHEDIR="+filepath.Join(r.StateDir, "kube-cache"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// podLogs is the tail of each pod's log in the release namespace, for errors.
func (r Release) podLogs(ctx context.Context, kc kubernetes.Interface) string {
	pods, err := kc.CoreV1().Pods(r.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, pod := range pods.Items {
		fmt.Fprintf(&b, "--- pod %s: %s\n", pod.Name, pod.Status.Phase)
		for _, c := range pod.Status.ContainerStatuses {
			tail := int64(20)
			logs, _ := kc.CoreV1().Pods(r.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: &tail}).DoRaw(ctx)
			fmt.Fprintf(&b, "%s\n", logs)
		}
	}
	return b.String()
}
