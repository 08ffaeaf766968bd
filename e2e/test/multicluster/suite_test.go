// Package multicluster is Kiln's end-to-end suite across clusters: a MultiKueue manager and
// its worker clusters, the local platform started with KILN_WORKERS (make
// test-e2e-multicluster starts one). It reaches every cluster through the platform's
// configuration, from KILN_ROOT.
package multicluster

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	"github.com/kiln-ml/kiln/api/kueue"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
	"github.com/kiln-ml/kiln/e2e/test/framework"
)

var (
	manager client.Client
	// workers are the worker clusters' clients, by MultiKueueCluster name.
	workers = map[string]client.Client{}
	plat    platform.Config
)

func TestMultiCluster(t *testing.T) {
	RegisterFailHandler(Fail)
	ctrllog.SetLogger(GinkgoLogr)
	RunSpecs(t, "Kiln multi-cluster e2e")
}

var _ = BeforeSuite(func() {
	root, err := platform.RepoRoot(os.Getenv("KILN_ROOT"))
	Expect(err).NotTo(HaveOccurred())
	plat, err = platform.DefaultConfig(root).FromEnv()
	Expect(err).NotTo(HaveOccurred())
	Expect(plat.Workers).To(BeNumerically(">=", 2), "%s must name at least 2 worker clusters (make test-e2e-multicluster sets it)", platform.EnvWorkers)
	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(trainer.AddToScheme(scheme)).To(Succeed())
	Expect(kueue.AddToScheme(scheme)).To(Succeed())
	Expect(kiln.AddToScheme(scheme)).To(Succeed())
	Expect(jobsetv1alpha2.AddToScheme(scheme)).To(Succeed())
	connect := func(c platform.Config) client.Client {
		cfg, err := c.RESTConfig()
		Expect(err).NotTo(HaveOccurred())
		cfg.QPS, cfg.Burst = 100, 200
		cl, err := client.New(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		return cl
	}
	manager = connect(plat)
	for i := 1; i <= plat.Workers; i++ {
		workers[plat.WorkerName(i)] = connect(plat.Worker(i))
	}
	EnforceDefaultTimeoutsWhenUsingContexts()
	SetDefaultEventuallyTimeout(3 * time.Minute)
	SetDefaultEventuallyPollingInterval(time.Second)
})

// Where the suite's time went and, for each failed spec, its message: with KILN_E2E_TIMES
// set (make test-e2e-multicluster sets it) into that file, which the Makefile prints after
// the platform's shutdown, at the end of the log.
var _ = ReportAfterSuite("spec times", func(r Report) {
	Expect(framework.ReportSpecTimes(r)).To(Succeed())
})

// When a spec fails, what each cluster holds in the test namespace goes into its output:
// the TrainJobs (who manages them, their conditions and times), the Workloads (admission,
// the cluster MultiKueue chose, the admission checks) and the JobSets, so a job that never
// finished says where it stopped.
var _ = JustAfterEach(func(ctx context.Context) {
	if !CurrentSpecReport().Failed() || manager == nil {
		return
	}
	clusters := []string{"manager"}
	byName := map[string]client.Client{"manager": manager}
	for name, c := range workers {
		clusters = append(clusters, name)
		byName[name] = c
	}
	slices.Sort(clusters[1:])
	for _, name := range clusters {
		GinkgoWriter.Printf("--- %s, namespace %s\n", name, platform.DefaultNamespace)
		for _, line := range clusterState(ctx, byName[name]) {
			GinkgoWriter.Println("  " + line)
		}
	}
})

// clusterState is one line per TrainJob, Workload and JobSet in the test namespace of c.
func clusterState(ctx context.Context, c client.Client) []string {
	var out []string
	inNS := client.InNamespace(platform.DefaultNamespace)
	jobs := &trainer.TrainJobList{}
	if err := c.List(ctx, jobs, inNS); err != nil {
		return []string{"listing TrainJobs: " + err.Error()}
	}
	for _, tj := range jobs.Items {
		out = append(out, fmt.Sprintf("TrainJob %s managedBy=%s start=%s completion=%s %s", tj.Name, ptr.Deref(tj.Spec.ManagedBy, "-"),
			timeString(tj.Status.StartTime), timeString(tj.Status.CompletionTime), conditions(tj.Status.Conditions)))
	}
	wls := &kueuev1beta2.WorkloadList{}
	if err := c.List(ctx, wls, inNS); err != nil {
		out = append(out, "listing Workloads: "+err.Error())
	}
	for _, wl := range wls.Items {
		var checks []string
		for _, ac := range wl.Status.AdmissionChecks {
			checks = append(checks, fmt.Sprintf("%s=%s(%s)", ac.Name, ac.State, ac.Message))
		}
		owner := ""
		if len(wl.OwnerReferences) > 0 {
			owner = wl.OwnerReferences[0].Name
		}
		out = append(out, fmt.Sprintf("Workload %s of %s cluster=%s checks=[%s] %s", wl.Name, owner, ptr.Deref(wl.Status.ClusterName, "-"),
			strings.Join(checks, " "), conditions(wl.Status.Conditions)))
	}
	sets := &jobsetv1alpha2.JobSetList{}
	if err := c.List(ctx, sets, inNS); err != nil {
		out = append(out, "listing JobSets: "+err.Error())
	}
	for _, js := range sets.Items {
		out = append(out, fmt.Sprintf("JobSet %s suspend=%t %s", js.Name, ptr.Deref(js.Spec.Suspend, false), conditions(js.Status.Conditions)))
	}
	return out
}

func conditions(cs []metav1.Condition) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%s=%s/%s@%s", c.Type, c.Status, c.Reason, c.LastTransitionTime.UTC().Format(time.TimeOnly)))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func timeString(t *metav1.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.TimeOnly)
}
