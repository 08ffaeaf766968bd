package webhook

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// podPatch is a runtime patch of the "node" replicated job's pod spec.
func podPatch(manager string, spec trainer.PodSpecPatch) trainer.RuntimePatch {
	return trainer.RuntimePatch{Manager: manager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
		Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: trainer.NodeName, Template: &trainer.JobTemplatePatch{
			Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Spec: &spec}},
		}}}},
	}}}
}

// rootOnTheNode is the escalation a user with no pod rights tried: a privileged container
// with the node's filesystem mounted and SYS_ADMIN.
var rootOnTheNode = trainer.PodSpecPatch{
	Volumes: []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}},
	Containers: []trainer.ContainerPatch{{Name: trainer.NodeName, SecurityContext: &corev1.SecurityContext{
		Privileged: ptr.To(true), RunAsUser: ptr.To[int64](0),
		Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN", "NET_BIND_SERVICE"}},
	}}},
}

func validatorWith(t *testing.T, objs ...client.Object) *Validator {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, trainer.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	return &Validator{client: c, live: c}
}

func TestPodSecurity(t *testing.T) {
	cluster := kilntesting.MakeRuntime("torch-distributed").ClusterTrainingRuntime()
	exemptRuntime := kilntesting.MakeRuntime("privileged-runtime").ClusterTrainingRuntime()
	exemptRuntime.Annotations = map[string]string{kiln.AnnotationPodSecurity: kiln.PodSecurityPrivileged}
	hostNet := kilntesting.MakeRuntime("own").TrainingRuntime("team")
	hostNet.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.HostNetwork = true
	// A namespaced runtime is its namespace's users': it cannot exempt itself.
	hostNet.Annotations = map[string]string{kiln.AnnotationPodSecurity: kiln.PodSecurityPrivileged}
	team := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}
	admins := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "admins", Labels: map[string]string{kiln.AnnotationPodSecurity: kiln.PodSecurityPrivileged}}}
	for name, tc := range map[string]struct {
		job      *trainer.TrainJob
		wantPath string
		want     []string
	}{
		"a plain job": {job: kilntesting.MakeTrainJob("job", "team").Obj()},
		"baseline capabilities only": {job: kilntesting.MakeTrainJob("job", "team").RuntimePatch(podPatch("example.com/team", trainer.PodSpecPatch{
			Containers: []trainer.ContainerPatch{{Name: trainer.NodeName, SecurityContext: &corev1.SecurityContext{
				Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE", "CAP_CHOWN"}}}}},
		})).Obj()},
		"root on the node, through a runtime patch": {
			job:      kilntesting.MakeTrainJob("job", "team").RuntimePatch(podPatch("example.com/team", rootOnTheNode)).Obj(),
			wantPath: "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec",
			want: []string{`runtime patch "example.com/team"`, "containers[node].securityContext.privileged: true",
				"containers[node].securityContext.capabilities.add: SYS_ADMIN", "volumes[host].hostPath (/)", kiln.AnnotationPodSecurity},
		},
		"the host's network, through a namespaced runtime": {
			job:      kilntesting.MakeTrainJob("job", "team").RuntimeRef(trainer.TrainingRuntimeKind, "own").Obj(),
			wantPath: "spec.runtimeRef", want: []string{`TrainingRuntime "own"`, "hostNetwork: true"},
		},
		"allowed on an admin's runtime": {
			job: kilntesting.MakeTrainJob("job", "team").RuntimeRef(trainer.ClusterTrainingRuntimeKind, "privileged-runtime").RuntimePatch(podPatch("example.com/team", rootOnTheNode)).Obj(),
		},
		"allowed in an admin's namespace": {
			job: kilntesting.MakeTrainJob("job", "admins").RuntimePatch(podPatch("example.com/team", rootOnTheNode)).Obj(),
		},
	} {
		t.Run(name, func(t *testing.T) {
			v := validatorWith(t, cluster, exemptRuntime, hostNet, team, admins)
			_, err := v.ValidateCreate(context.Background(), tc.job)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, want := range append(tc.want, tc.wantPath+": Forbidden") {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal lacks %q:\n%v", want, err)
				}
			}
		})
	}
}

func TestPodSecurityViolations(t *testing.T) {
	js := &jobsetv1alpha2.JobSet{Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{
		{Name: "launcher", Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			HostPID: true, HostIPC: true,
			InitContainers: []corev1.Container{{Name: "init", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(false)}}},
			Containers:     []corev1.Container{{Name: "mpi", Ports: []corev1.ContainerPort{{ContainerPort: 22, HostPort: 2222}}}},
		}}}}},
		{Name: "node"},
	}}}
	got := podSecurityViolations(js)
	want := map[string][]string{"launcher": {"containers[mpi].ports[22].hostPort", "hostIPC: true", "hostPID: true"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
}
