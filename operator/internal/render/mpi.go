package render

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strconv"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// MPI object names and files, as Kubeflow Trainer names them.
const (
	sshAuthVolume   = "mpi-ssh-auth"
	hostfileVolume  = "mpi-hostfile"
	hostfileDir     = "/etc/mpi"
	hostfileName    = "hostfile"
	sshPublicKeyKey = "ssh-publickey"
)

// SSHSecretName is the Secret holding a TrainJob's MPI SSH key pair.
func SSHSecretName(tj *trainer.TrainJob) string { return tj.Name + "-mpi-ssh-auth" }

// HostfileName is the ConfigMap holding a TrainJob's MPI hostfile.
func HostfileName(tj *trainer.TrainJob) string { return tj.Name + "-mpi-hostfile" }

// mpi mounts the SSH keys into every MPI node, the hostfile into the launcher, sets the
// OpenMPI environment, and returns the hostfile.
func (r *renderer) mpi() (*corev1.ConfigMap, error) {
	pol := r.policy.MPI
	impl := ptr.Deref(pol.MPIImplementation, trainer.MPIImplementationOpenMPI)
	if impl == "" {
		impl = trainer.MPIImplementationOpenMPI
	}
	if impl != trainer.MPIImplementationOpenMPI {
		return nil, fmt.Errorf("mlPolicy.mpi.mpiImplementation %s is not supported: use OpenMPI", impl)
	}
	launcherAsNode := ptr.Deref(pol.RunLauncherAsNode, false)
	if t := r.tj.Spec.Trainer; t != nil && t.NumNodes != nil {
		if node := r.byName(trainer.NodeName); node != nil {
			if launcherAsNode {
				node.count = max(*t.NumNodes-1, 1)
			} else {
				node.count = *t.NumNodes
			}
		}
	}
	slots := ptr.Deref(pol.NumProcPerNode, 1)
	if t := r.tj.Spec.Trainer; t != nil && t.NumProcPerNode != nil {
		slots = *t.NumProcPerNode
	} else if slots == 1 {
		if gpus := gpusPerNode(r.resourcesPerNode()); gpus > 1 {
			slots = int32(gpus)
		}
	}
	mountPath := ptr.Deref(pol.SSHAuthMountPath, "/root/.ssh")
	for _, j := range r.jobs {
		name := j.rj.Name
		if name != trainer.NodeName && name != trainer.LauncherName {
			continue
		}
		pod := &j.rj.Template.Spec.Template.Spec
		upsertVolume(&pod.Volumes, corev1.Volume{Name: sshAuthVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  SSHSecretName(r.tj),
			DefaultMode: ptr.To[int32](0o400),
			Items: []corev1.KeyToPath{
				{Key: corev1.SSHAuthPrivateKey, Path: "id_rsa", Mode: ptr.To[int32](0o640)},
				{Key: sshPublicKeyKey, Path: "id_rsa.pub", Mode: ptr.To[int32](0o644)},
				{Key: sshPublicKeyKey, Path: "authorized_keys", Mode: ptr.To[int32](0o644)},
			},
		}}})
		if name == trainer.LauncherName {
			upsertVolume(&pod.Volumes, corev1.Volume{Name: hostfileVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: HostfileName(r.tj)},
				Items:                []corev1.KeyToPath{{Key: hostfileName, Path: hostfileName, Mode: ptr.To[int32](0o444)}},
			}}})
		}
		for i := range pod.Containers {
			c := &pod.Containers[i]
			if c.Name != trainer.NodeName {
				continue
			}
			upsertVolumeMount(&c.VolumeMounts, corev1.VolumeMount{Name: sshAuthVolume, MountPath: mountPath})
			if name == trainer.LauncherName {
				upsertVolumeMount(&c.VolumeMounts, corev1.VolumeMount{Name: hostfileVolume, MountPath: hostfileDir})
				upsertEnv(&c.Env,
					value("OMPI_MCA_orte_default_hostfile", hostfileDir+"/"+hostfileName),
					value("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
					value("OMPI_MCA_orte_set_default_slots", strconv.Itoa(int(slots))),
					value("OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10"),
				)
			}
		}
	}
	return r.hostfile(launcherAsNode, slots), nil
}

// hostfile lists every MPI node's stable DNS name under the JobSet's headless service.
func (r *renderer) hostfile(launcherAsNode bool, slots int32) *corev1.ConfigMap {
	var b bytes.Buffer
	subdomain := r.tj.Name
	if n := r.spec.Network; n != nil && n.Subdomain != "" {
		subdomain = n.Subdomain
	}
	for _, j := range r.jobs {
		if j.rj.Name != trainer.NodeName && !(launcherAsNode && j.rj.Name == trainer.LauncherName) {
			continue
		}
		for replica := range max(j.rj.Replicas, 1) {
			for pod := range j.count {
				fmt.Fprintf(&b, "%s-%s-%d-%d.%s slots=%d\n", r.tj.Name, j.rj.Name, replica, pod, subdomain, slots)
			}
		}
	}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: HostfileName(r.tj), Namespace: r.tj.Namespace, OwnerReferences: []metav1.OwnerReference{OwnerReference(r.tj)}},
		Data:       map[string]string{hostfileName: b.String()},
	}
}

// NewSSHSecret generates the MPI SSH key pair of a TrainJob. It is immutable: it is created
// once and never rotated while the TrainJob exists.
func NewSSHSecret(tj *trainer.TrainJob) (*corev1.Secret, error) {
	key, err := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating MPI SSH key: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding MPI SSH key: %w", err)
	}
	pub, err := ssh.NewPublicKey(&key.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("encoding MPI SSH public key: %w", err)
	}
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: SSHSecretName(tj), Namespace: tj.Namespace, OwnerReferences: []metav1.OwnerReference{OwnerReference(tj)}},
		Type:       corev1.SecretTypeSSHAuth,
		Immutable:  ptr.To(true),
		Data: map[string][]byte{
			corev1.SSHAuthPrivateKey: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}),
			sshPublicKeyKey:          ssh.MarshalAuthorizedKey(pub),
		},
	}, nil
}
