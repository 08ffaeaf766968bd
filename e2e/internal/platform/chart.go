package platform

import (
	"context"
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
)

// Install is how Kiln's operator and API server run on the local platform.
type Install string

const (
	// InstallProcesses runs them as local processes (fast to iterate on).
	InstallProcesses Install = "processes"
	// InstallChart installs the Helm chart charts/kiln: they run as pods on the real node,
	// from the images of `make images`, their webhooks reached through their Service.
	InstallChart Install = "chart"

	// EnvInstall selects the Install.
	EnvInstall = "KILN_INSTALL"
	// ReleaseName is the chart's release, in APIServerNamespace.
	ReleaseName = "kiln"
)

// ChartImages are the images the chart's pods run, imported into the real node: Kiln's
// (make images) and JobSet's and Kueue's (make addon-images).
var ChartImages = []string{"kiln-operator", "kiln-apiserver", "kiln", "jobset", "kueue"}

// chartForwards relay the API server's ports on 127.0.0.1 (where the CLI, the SDKs and the
// e2e suite reach it in either mode) to its Service.
func (p *Platform) chartForwards(clusterIP string) []Process {
	proc := func(name string, local, remote int) Process {
		return Process{Name: name, Path: p.Bin("kiln-platform"), RunDir: p.RunDir(), LogsDir: p.LogsDir(), Args: []string{
			"forward", fmt.Sprintf("--listen=127.0.0.1:%d", local), fmt.Sprintf("--to=%s:%d", clusterIP, remote),
		}}
	}
	return []Process{
		proc("kiln-apiserver-forward", p.KilnAPITLSPort, chartAPIServerTLSPort),
		proc("kiln-apiserver-forward-h2c", p.KilnAPIPort, chartAPIServerPort),
	}
}

const (
	chartAPIServerPort    = 8090
	chartAPIServerTLSPort = 8443
	chartTLSSecret        = "kiln-apiserver-tls"
)

// ChartValues are the values the local platform installs the chart with: Kiln's images
// as `make images` tagged them, the pods on the real node, the API server serving TLS with
// the platform's certificate (which names 127.0.0.1, where it is forwarded to).
func (p *Platform) ChartValues() (map[string]any, error) {
	image := func(name string) (map[string]any, error) {
		ref, err := archiveRef(filepath.Join(p.BinDir, "images", name+".tar"))
		if err != nil {
			return nil, fmt.Errorf("image %s: %w (`make chart-up` builds it: make images, make addon-images)", name, err)
		}
		repo, tag, ok := strings.Cut(ref, ":")
		registry, repository, _ := strings.Cut(repo, "/")
		if !ok {
			return nil, fmt.Errorf("image %s: reference %q has no tag", name, ref)
		}
		return map[string]any{"registry": registry, "repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"}, nil
	}
	realNode := map[string]any{
		"nodeSelector": map[string]any{LabelNodePool: NodePoolReal},
		"tolerations":  []any{map[string]any{"key": TaintRealNode, "operator": "Equal", "value": NodePoolReal, "effect": "NoSchedule"}},
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
	op["kubeAPI"] = map[string]any{"qps": p.Controller.QPS, "burst": p.Controller.Burst}
	op["concurrency"] = p.Controller.Concurrency
	op["logLevel"] = "debug"
	api := values["apiserver"].(map[string]any)
	api["port"] = chartAPIServerPort
	api["tls"] = map[string]any{"secretName": chartTLSSecret, "port": chartAPIServerTLSPort}

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
		"resourceFlavor": ChartQueue,
		"clusterQueue":   map[string]any{"name": ChartQueue, "resources": map[string]any{"cpu": "1", "memory": "1Gi"}},
		"localQueue":     map[string]any{"name": ChartQueue, "namespaces": []any{DefaultNamespace}},
	}
	return values, nil
}

// ChartQueue names the chart's default ResourceFlavor, ClusterQueue and LocalQueue on the
// local platform.
const ChartQueue = "kiln-chart-default"

// upstreamImage is an image in the form JobSet's and Kueue's charts take: registry and
// repository together.
func upstreamImage(img map[string]any) map[string]any {
	return map[string]any{"repository": fmt.Sprintf("%s/%s", img["registry"], img["repository"]), "tag": img["tag"], "pullPolicy": img["pullPolicy"]}
}

// chartUp installs (or upgrades) the chart and gives the demo user its client configuration.
func (p *Platform) chartUp(ctx context.Context, cs *clientSet) error {
	if p.RealNodes == 0 {
		return fmt.Errorf("%s=%s runs Kiln's pods on the real node: set %s=1", EnvInstall, InstallChart, EnvRealNodes)
	}
	start := time.Now()
	values, err := p.ChartValues()
	if err != nil {
		return err
	}
	for _, name := range ChartImages {
		if _, err := p.ctr(ctx, "images", "import", "--local", filepath.Join(p.BinDir, "images", name+".tar")); err != nil {
			return err
		}
	}
	kc, err := kubernetes.NewForConfig(cs.config)
	if err != nil {
		return err
	}
	if err := p.chartTLSSecret(ctx, cs); err != nil {
		return err
	}
	data, err := yaml.Marshal(values)
	if err != nil {
		return err
	}
	valuesFile := filepath.Join(p.ConfigDir(), "chart-values.yaml")
	if err := os.WriteFile(valuesFile, data, 0o644); err != nil {
		return err
	}
	if out, err := p.Helm(ctx, "upgrade", "--install", ReleaseName, filepath.Join(p.Root, "charts", "kiln"),
		"--namespace", APIServerNamespace, "--values", valuesFile, "--wait", "--timeout", "5m"); err != nil {
		return fmt.Errorf("installing the chart: %w\n%s%s", err, out, p.chartPodLogs(ctx, kc))
	}
	svc, err := kc.CoreV1().Services(APIServerNamespace).Get(ctx, ReleaseName+"-apiserver", metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, f := range p.chartForwards(svc.Spec.ClusterIP) {
		_ = f.Stop(5 * time.Second) // the Service's address may have changed
		if err := f.Start(); err != nil {
			return err
		}
	}
	if err := p.demoUser(ctx, cs); err != nil {
		return err
	}
	p.logf("kiln: chart charts/kiln installed as release %s in %s in %s: operator and API server run on %s; API server at %s (h2c http://127.0.0.1:%d), user %s in namespace %s (client config %s)",
		ReleaseName, APIServerNamespace, time.Since(start).Round(100*time.Millisecond), RealNodeName, p.KilnAPIURL(), p.KilnAPIPort, DemoUser, DemoNamespace, p.ClientConfigFile())
	return nil
}

// chartTLSSecret gives the chart's API server the platform's serving certificate.
func (p *Platform) chartTLSSecret(ctx context.Context, cs *clientSet) error {
	crt, err := os.ReadFile(filepath.Join(p.PKI().ServingDir(), "tls.crt"))
	if err != nil {
		return err
	}
	key, err := os.ReadFile(filepath.Join(p.PKI().ServingDir(), "tls.key"))
	if err != nil {
		return err
	}
	return cs.apply(ctx,
		object("v1", "Namespace", "", APIServerNamespace, nil),
		object("v1", "Secret", APIServerNamespace, chartTLSSecret, map[string]any{
			"type": string(corev1.SecretTypeTLS),
			"data": map[string]any{"tls.crt": encodeBase64(crt), "tls.key": encodeBase64(key)},
		}),
	)
}

// Helm runs bin/helm against the platform, its state under the platform's directory.
func (p *Platform) Helm(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, p.Bin("helm"), append([]string{"--kubeconfig", p.Kubeconfig()}, args...)...)
	helmDir := filepath.Join(p.StateDir, "helm")
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(helmDir, "cache"), "HELM_CONFIG_HOME="+filepath.Join(helmDir, "config"),
		"HELM_DATA_HOME="+filepath.Join(helmDir, "data"), "KUBECACHEDIR="+filepath.Join(p.StateDir, "kube-cache"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// chartPodLogs is the tail of each pod's log in the release namespace, for errors.
func (p *Platform) chartPodLogs(ctx context.Context, kc kubernetes.Interface) string {
	pods, err := kc.CoreV1().Pods(APIServerNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, pod := range pods.Items {
		fmt.Fprintf(&b, "--- pod %s: %s\n", pod.Name, pod.Status.Phase)
		for _, c := range pod.Status.ContainerStatuses {
			tail := int64(20)
			logs, _ := kc.CoreV1().Pods(APIServerNamespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: &tail}).DoRaw(ctx)
			fmt.Fprintf(&b, "%s\n", logs)
		}
	}
	return b.String()
}
