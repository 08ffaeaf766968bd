package platform

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/kiln-ml/kiln/api/clientconfig"
	kilntesting "github.com/kiln-ml/kiln/api/testing"
	"github.com/kiln-ml/kiln/e2e/internal/platform/cluster"
	"github.com/kiln-ml/kiln/e2e/internal/platform/manifests"
)

// The API server's identity and the demo user `make up` creates.
const (
	APIServerNamespace      = "kiln-system"
	APIServerServiceAccount = "kiln-apiserver"
	DemoUser                = "kiln-demo"
	// DemoNamespace is where the demo user may run jobs.
	DemoNamespace = DefaultNamespace
	// ClientContext is the name of the local platform's context in the client config.
	ClientContext = "local"
	// tokenLifetime of the tokens the harness issues (the local platform lives for days
	// at most).
	tokenLifetime = 30 * 24 * 60 * 60
)

// APIServerProcess is Kiln's API server, run from bin/ as its own ServiceAccount.
func (p *Platform) APIServerProcess() Process {
	return Process{
		Name: "kiln-apiserver",
		Path: p.Bin("kiln-apiserver"),
		Args: []string{
			"--kubeconfig=" + p.apiServerKubeconfig(),
			fmt.Sprintf("--listen-address=127.0.0.1:%d", p.KilnAPIPort),
			fmt.Sprintf("--tls-listen-address=127.0.0.1:%d", p.KilnAPITLSPort),
			fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", p.KilnAPIPprof),
			"--tls-cert-file=" + filepath.Join(p.PKI().ServingDir(), "tls.crt"),
			"--tls-key-file=" + filepath.Join(p.PKI().ServingDir(), "tls.key"),
		},
		Env:     p.OTLPEnv(),
		RunDir:  p.RunDir(),
		LogsDir: p.LogsDir(),
	}
}

func (c Config) apiServerKubeconfig() string {
	return filepath.Join(c.ConfigDir(), "kiln-apiserver.kubeconfig")
}

// ClientConfigFile is the Kiln client configuration `make up` writes: the API server's
// URL, its CA and the demo user's token.
func (c Config) ClientConfigFile() string { return filepath.Join(c.StateDir, "kiln", "config.yaml") }

// KilnAPIURL is the API server's HTTPS URL.
func (c Config) KilnAPIURL() string { return fmt.Sprintf("https://127.0.0.1:%d", c.KilnAPITLSPort) }

// apiServerUp installs the API server's RBAC, starts it as its ServiceAccount, and gives
// the demo user a namespace to train in and a client configuration.
func (p *Platform) apiServerUp(ctx context.Context, cs *cluster.Clients) error {
	rbac, err := APIServerRBAC(p.Root)
	if err != nil {
		return err
	}
	rbac = append(rbac,
		manifests.Object("v1", "Namespace", "", APIServerNamespace, nil),
		manifests.Object("v1", "ServiceAccount", APIServerNamespace, APIServerServiceAccount, nil),
		Binding("ClusterRoleBinding", "", APIServerServiceAccount, "kiln-apiserver", APIServerNamespace, APIServerServiceAccount),
	)
	if err := cs.Apply(ctx, rbac...); err != nil {
		return fmt.Errorf("installing the API server's RBAC: %w", err)
	}
	kc, err := kubernetes.NewForConfig(cs.Config)
	if err != nil {
		return err
	}
	serverToken, err := ServiceAccountToken(ctx, kc, APIServerNamespace, APIServerServiceAccount, tokenLifetime)
	if err != nil {
		return err
	}
	if err := p.writeAPIServerKubeconfig(cs, serverToken); err != nil {
		return err
	}
	if err := p.APIServerProcess().StartReady(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", p.KilnAPIPort), p.ComponentTimeout, p.Out); err != nil {
		return err
	}
	ca, err := os.ReadFile(p.PKI().CAFile())
	if err != nil {
		return err
	}
	if err := cs.Apply(ctx, KilnInfo(p.KilnAPIURL(), "", string(ca))...); err != nil {
		return fmt.Errorf("publishing where the API server is (kube-public/kiln-info): %w", err)
	}
	if err := p.demoUser(ctx, cs); err != nil {
		return err
	}
	p.logf("kiln-apiserver: %s (h2c http://127.0.0.1:%d), as ServiceAccount %s/%s; user %s in namespace %s (client config %s)",
		p.KilnAPIURL(), p.KilnAPIPort, APIServerNamespace, APIServerServiceAccount, DemoUser, DemoNamespace, p.ClientConfigFile())
	return nil
}

// demoUser creates the demo user (a ServiceAccount allowed to train in DemoNamespace and to
// see the cluster's runtimes and queues) and writes its client configuration for the API
// server at KilnAPIURL.
func (p *Platform) demoUser(ctx context.Context, cs *cluster.Clients) error {
	if err := cs.Apply(ctx,
		manifests.Object("v1", "ServiceAccount", DemoNamespace, DemoUser, nil),
		Binding("RoleBinding", DemoNamespace, DemoUser, "kiln-user", DemoNamespace, DemoUser),
		Binding("ClusterRoleBinding", "", DemoUser+"-cluster-viewer", "kiln-cluster-viewer", DemoNamespace, DemoUser),
	); err != nil {
		return fmt.Errorf("creating the demo user: %w", err)
	}
	kc, err := kubernetes.NewForConfig(cs.Config)
	if err != nil {
		return err
	}
	demoToken, err := ServiceAccountToken(ctx, kc, DemoNamespace, DemoUser, tokenLifetime)
	if err != nil {
		return err
	}
	cfg, err := clientconfig.Load(p.ClientConfigFile())
	if err != nil {
		return err
	}
	cfg.SetContext(clientconfig.Context{
		Name: ClientContext, Server: p.KilnAPIURL(), CertificateAuthority: p.PKI().CAFile(), Token: demoToken, Namespace: DemoNamespace,
	})
	cfg.CurrentContext = ClientContext
	return cfg.Save(p.ClientConfigFile())
}

// APIServerRBAC is the API server's own RBAC and its users' roles, from the repository at
// root (apiserver/config/rbac).
func APIServerRBAC(root string) ([]*unstructured.Unstructured, error) {
	var rbac []*unstructured.Unstructured
	for _, f := range []string{"role.yaml", "users.yaml"} {
		objs, err := kilntesting.ReadManifests(filepath.Join(root, "apiserver", "config", "rbac", f))
		if err != nil {
			return nil, err
		}
		rbac = append(rbac, objs...)
	}
	return rbac, nil
}

// ServiceAccountToken issues a token of a ServiceAccount that lives for seconds (TokenRequest).
func ServiceAccountToken(ctx context.Context, kc kubernetes.Interface, namespace, sa string, seconds int64) (string, error) {
	tr, err := kc.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(seconds)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("issuing a token for ServiceAccount %s/%s: %w", namespace, sa, err)
	}
	return tr.Status.Token, nil
}

// writeAPIServerKubeconfig writes a kubeconfig that reaches the cluster as the API
// server's ServiceAccount.
func (p *Platform) writeAPIServerKubeconfig(cs *cluster.Clients, token string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kiln"] = &clientcmdapi.Cluster{Server: cs.Config.Host, CertificateAuthorityData: cs.Config.CAData}
	kc.AuthInfos[APIServerServiceAccount] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["kiln"] = &clientcmdapi.Context{Cluster: "kiln", AuthInfo: APIServerServiceAccount}
	kc.CurrentContext = "kiln"
	if err := os.MkdirAll(p.ConfigDir(), 0o755); err != nil {
		return err
	}
	if err := clientcmd.WriteToFile(*kc, p.apiServerKubeconfig()); err != nil {
		return fmt.Errorf("writing the API server's kubeconfig: %w", err)
	}
	return nil
}

// Binding binds a ClusterRole to a ServiceAccount: a ClusterRoleBinding (namespace empty)
// or a RoleBinding in namespace.
func Binding(kind, namespace, name, clusterRole, saNamespace, sa string) *unstructured.Unstructured {
	return manifests.Object("rbac.authorization.k8s.io/v1", kind, namespace, name, map[string]any{
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": clusterRole},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "namespace": saNamespace, "name": sa}},
	})
}

// KilnInfo is the ConfigMap kube-public/kiln-info, where clients with only a kubeconfig find
// the API server (url from outside the cluster, inCluster from a pod, ca its certificate's CA),
// and the Role and RoleBinding that let every authenticated user read it: what the chart's
// templates/discovery.yaml makes.
func KilnInfo(url, inCluster, ca string) []*unstructured.Unstructured {
	data := map[string]any{"apiServerURL": url, "apiServerInClusterURL": inCluster}
	if ca != "" {
		data["caBundle"] = ca
	}
	const ns, name = "kube-public", "kiln-info"
	return []*unstructured.Unstructured{
		{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"namespace": ns, "name": name}, "data": data}},
		{Object: map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": map[string]any{"namespace": ns, "name": name + "-reader"},
			"rules": []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "resourceNames": []any{name}, "verbs": []any{"get"}}},
		}},
		{Object: map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": map[string]any{"namespace": ns, "name": name + "-reader"},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name + "-reader"},
			"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}},
		}},
	}
}
