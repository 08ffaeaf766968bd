package realnode

import (
	"encoding/json"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kiln-ml/kiln/e2e/internal/platform/manifests"
)

// The real node's dynamic storage: the local-path provisioner (tools/local-path), a process
// of the node like CoreDNS, gives every claim of the default StorageClass StorageClass a
// directory of VolumesDir. The directory is one filesystem for every pod of this one node,
// so the class serves ReadWriteMany as well as ReadWriteOnce (the provisioner's
// sharedFileSystemPath mode: volumes without node affinity, bound at once). The provisioner
// creates and removes each directory through a short helper pod on the node, in the torch
// image (it needs only sh), as it does on any cluster. (It logs an error for each helper
// pod whose log it could not copy: it reads them with an in-cluster configuration, which a
// process outside the cluster has not. It judges the helper's work by the pod's phase.)
const (
	// StorageClass is the platform's default StorageClass.
	StorageClass = "local-path"
	// Provisioner is the provisioner name the StorageClass names (upstream's).
	Provisioner = "rancher.io/local-path"
	// StorageNamespace holds the provisioner's ConfigMap and its helper pods (upstream's).
	StorageNamespace     = "local-path-storage"
	storageConfigMap     = "local-path-config"
	storageHelperAccount = "local-path-provisioner-service-account"
	storageUser          = "system:local-path-provisioner"
)

// VolumesDir holds the provisioned volumes, one directory each
// (<pv>_<namespace>_<claim>). The platform's `down`, which deletes the cluster, removes it.
func (n Node) VolumesDir() string { return filepath.Join(n.Dir(), "volumes") }

func (n Node) provisionerArgs() []string {
	return []string{
		"start",
		"--kubeconfig=" + filepath.Join(n.ConfigDir, "local-path.kubeconfig"),
		"--provisioner-name=" + Provisioner,
		"--namespace=" + StorageNamespace,
		"--configmap-name=" + storageConfigMap,
		"--service-account-name=" + storageHelperAccount,
		// The helper pods' image is the one helperPod.yaml (in the ConfigMap) names, found on
		// the node (imagePullPolicy Never); this flag is only checked to be set.
		"--helper-image=helperPod.yaml",
		// A claim is provisioned in about 2 s (the helper pod's start); one that fails is
		// tried again, up to the library's default of 15.
		"--worker-threads=2",
	}
}

// storageObjects are the provisioner's permissions (upstream's, for a user instead of a
// ServiceAccount), its namespace and ConfigMap (configuration, scripts, helper pod), and
// the default StorageClass.
func (n Node) storageObjects(helperImage string) ([]*unstructured.Unstructured, error) {
	config, err := json.Marshal(map[string]any{"sharedFileSystemPath": n.VolumesDir()})
	if err != nil {
		return nil, err
	}
	helper, err := yaml.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "helper-pod"},
		"spec": map[string]any{
			// Every other node is KWOK's, where nothing runs (the provisioner tolerates every
			// taint on its own).
			"nodeSelector":                 map[string]any{LabelNodePool: NodePool},
			"automountServiceAccountToken": false,
			"containers": []any{map[string]any{
				"name": "helper-pod", "image": helperImage, "imagePullPolicy": "Never",
			}},
		},
	})
	if err != nil {
		return nil, err
	}
	ns := manifests.Object("v1", "Namespace", "", StorageNamespace, nil)
	sa := manifests.Object("v1", "ServiceAccount", StorageNamespace, storageHelperAccount, nil)
	cm := manifests.Object("v1", "ConfigMap", StorageNamespace, storageConfigMap, map[string]any{
		"data": map[string]any{
			"config.json":    string(config),
			"setup":          "set -eu\nmkdir -m 0777 -p \"$VOL_DIR\"\n",
			"teardown":       "set -eu\nrm -rf \"$VOL_DIR\"\n",
			"helperPod.yaml": string(helper),
		},
	})
	user := []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": storageUser}}
	role := manifests.Object("rbac.authorization.k8s.io/v1", "Role", StorageNamespace, "local-path-provisioner", map[string]any{
		"rules": []any{
			map[string]any{"apiGroups": []any{""}, "resources": []any{"pods"}, "verbs": []any{"get", "list", "watch", "create", "patch", "update", "delete"}},
		},
	})
	roleBinding := manifests.Object("rbac.authorization.k8s.io/v1", "RoleBinding", StorageNamespace, "local-path-provisioner", map[string]any{
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "local-path-provisioner"},
		"subjects": user,
	})
	clusterRole := manifests.Object("rbac.authorization.k8s.io/v1", "ClusterRole", "", "kiln:local-path-provisioner", map[string]any{
		"rules": []any{
			map[string]any{"apiGroups": []any{""}, "resources": []any{"nodes", "persistentvolumeclaims", "configmaps", "pods", "pods/log"}, "verbs": []any{"get", "list", "watch"}},
			map[string]any{"apiGroups": []any{""}, "resources": []any{"persistentvolumes"}, "verbs": []any{"get", "list", "watch", "create", "patch", "update", "delete"}},
			map[string]any{"apiGroups": []any{""}, "resources": []any{"events"}, "verbs": []any{"create", "patch"}},
			map[string]any{"apiGroups": []any{"storage.k8s.io"}, "resources": []any{"storageclasses"}, "verbs": []any{"get", "list", "watch"}},
		},
	})
	clusterBinding := manifests.Object("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", "kiln:local-path-provisioner", map[string]any{
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kiln:local-path-provisioner"},
		"subjects": user,
	})
	class := manifests.Object("storage.k8s.io/v1", "StorageClass", "", StorageClass, map[string]any{
		"provisioner":       Provisioner,
		"reclaimPolicy":     "Delete",
		"volumeBindingMode": "Immediate",
	})
	class.SetAnnotations(map[string]string{"storageclass.kubernetes.io/is-default-class": "true"})
	return []*unstructured.Unstructured{ns, sa, cm, role, roleBinding, clusterRole, clusterBinding, class}, nil
}
