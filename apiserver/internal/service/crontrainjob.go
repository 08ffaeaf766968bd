package service

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/gen/kiln/v1/kilnv1connect"
	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	"github.com/kiln-ml/kiln/api/telemetry"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/apiserver/internal/kube"
	"github.com/kiln-ml/kiln/apiserver/internal/request"
	"github.com/kiln-ml/kiln/apiserver/internal/view"
)

// AnnotationTriggeredBy names the caller who created a run outside its schedule.
const AnnotationTriggeredBy = "kiln.dev/triggered-by"

// CronTrainJobs implements kilnv1connect.CronTrainJobServiceHandler: CronTrainJobs are
// written as the caller, and read from the shared cache once RBAC allows the caller.
type CronTrainJobs struct {
	kube *kube.Clients
	jobs *TrainJobs
	now  func() time.Time
}

var _ kilnv1connect.CronTrainJobServiceHandler = (*CronTrainJobs)(nil)

// NewCronTrainJobs serves CronTrainJobs through k; their runs are shown as jobs shows TrainJobs.
func NewCronTrainJobs(k *kube.Clients, jobs *TrainJobs) *CronTrainJobs {
	return &CronTrainJobs{kube: k, jobs: jobs, now: time.Now}
}

// installed fails calls while the CronTrainJob CRD is missing (the cache does not hold them).
func (s *CronTrainJobs) installed() error {
	if s.kube.Crons() {
		return nil
	}
	return connect.NewError(connect.CodeFailedPrecondition, errors.New(
		"CronTrainJobs are not installed in this cluster (CRD crontrainjobs.kiln.dev): install Kiln's CRDs (helm upgrade, or `make install`): the API server notices them within 10s"))
}

func (s *CronTrainJobs) view(cj *kiln.CronTrainJob) *kilnv1.CronTrainJob {
	return view.CronTrainJob(cj, s.now())
}

// CreateCronTrainJob implements kilnv1connect.CronTrainJobServiceHandler.
func (s *CronTrainJobs) CreateCronTrainJob(ctx context.Context, req *connect.Request[kilnv1.CreateCronTrainJobRequest]) (*connect.Response[kilnv1.CreateCronTrainJobResponse], error) {
	if err := s.installed(); err != nil {
		return nil, err
	}
	m := req.Msg
	cj, errs := cronTrainJobFrom(m)
	if len(errs) > 0 {
		return nil, invalid(errs)
	}
	// The checks below read with the server's own identity: authorize first (TrainJobs).
	if err := s.authorize(ctx, kube.Attributes{Verb: "create", Namespace: cj.Namespace}); err != nil {
		return nil, err
	}
	path := field.NewPath("cron_train_job", "spec", "train_job", "spec", "runtime")
	if _, ok := m.GetSource().(*kilnv1.CreateCronTrainJobRequest_Manifest); ok {
		path = field.NewPath("manifest", "spec", "trainJobTemplate", "spec", "runtimeRef", "name")
	}
	queue := field.NewPath("cron_train_job", "spec", "train_job", "spec", "queue")
	if _, ok := m.GetSource().(*kilnv1.CreateCronTrainJobRequest_Manifest); ok {
		queue = field.NewPath("manifest", "spec", "trainJobTemplate", "metadata", "labels").Key(trainer.KueueQueueNameLabel)
	}
	errs = append(missingRuntime(ctx, s.kube, cj.Namespace, cj.Spec.TrainJobTemplate.Spec.RuntimeRef, path),
		missingQueue(ctx, s.kube, cj.Namespace, cj.Spec.TrainJobTemplate.Labels[trainer.KueueQueueNameLabel], queue)...)
	if t := m.GetCronTrainJob().GetSpec().GetTrainJob().GetSpec().GetTopology(); len(errs) == 0 && t != nil {
		// Resolved once, for every run: the runs carry the node label, as a manifest would.
		tmpl := &cj.Spec.TrainJobTemplate
		run := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: cj.Namespace, Labels: tmpl.Labels}, Spec: tmpl.Spec}
		errs = askTopology(ctx, s.kube, run, t, field.NewPath("cron_train_job", "spec", "train_job", "spec", "topology"))
		tmpl.Spec.RuntimePatches = run.Spec.RuntimePatches
	}
	if len(errs) > 0 {
		return nil, invalid(errs)
	}
	ctx, warnings := kube.CollectWarnings(ctx)
	what := fmt.Sprintf("creating CronTrainJob %s/%s", cj.Namespace, cj.Name)
	var idem *idempotency
	if m.GetRequestId() != "" {
		c := &kilnv1.CreateCronTrainJobRequest{Namespace: m.GetNamespace(), Source: m.GetSource()}
		var err error
		if idem, err = idempotencyOf(m.GetRequestId(), c); err != nil {
			return nil, toConnect(what, err)
		}
	}
	idem.stamp(cj)
	cj, replayed, err := createOnce(ctx, s.kube, cj, func() *kiln.CronTrainJob { return &kiln.CronTrainJob{} }, idem, m.GetDryRun(), kiln.CronTrainJobKind, what)
	if err != nil {
		return nil, err
	}
	manifest, err := cronManifestOf(cj)
	if err != nil {
		return nil, toConnect(what, err)
	}
	return connect.NewResponse(&kilnv1.CreateCronTrainJobResponse{CronTrainJob: s.view(cj), Manifest: manifest, Replayed: replayed, Warnings: warnings.List()}), nil
}

// cronTrainJobFrom decodes a create request into the CronTrainJob to create, or says which
// fields are wrong.
func cronTrainJobFrom(m *kilnv1.CreateCronTrainJobRequest) (*kiln.CronTrainJob, field.ErrorList) {
	var (
		cj   *kiln.CronTrainJob
		errs field.ErrorList
	)
	switch src := m.GetSource().(type) {
	case *kilnv1.CreateCronTrainJobRequest_CronTrainJob:
		cj, errs = structured(m.GetNamespace(), src.CronTrainJob, "cron_train_job", request.NewCronTrainJob)
	case *kilnv1.CreateCronTrainJobRequest_Manifest:
		p := field.NewPath("manifest")
		cj, errs = request.ParseCronManifest(src.Manifest, p)
		if cj != nil {
			ns := cj.Namespace
			errs = append(errs, settleNamespace(&ns, m.GetNamespace())...)
			cj.Namespace = ns
			if cj.Name == "" {
				errs = append(errs, field.Required(p.Child("metadata", "name"), "the CronTrainJob's name (generateName is not supported: runs are named after it)"))
			} else {
				errs = append(errs, request.ValidateName(p.Child("metadata", "name"), cj.Name)...)
			}
			spec := p.Child("spec")
			errs = append(errs, request.ValidateSchedule(spec.Child("schedule"), spec.Child("timeZone"), cj.Spec.Schedule, ptr.Deref(cj.Spec.TimeZone, ""))...)
		}
	default:
		errs = append(errs, field.Required(field.NewPath("source"), "set cron_train_job (structured) or manifest (YAML or JSON)"))
	}
	errs = append(errs, validateRequestID(m.GetRequestId())...)
	if len(errs) > 0 {
		return nil, errs
	}
	return cj, nil
}

// GetCronTrainJob implements kilnv1connect.CronTrainJobServiceHandler.
func (s *CronTrainJobs) GetCronTrainJob(ctx context.Context, req *connect.Request[kilnv1.GetCronTrainJobRequest]) (*connect.Response[kilnv1.GetCronTrainJobResponse], error) {
	m := req.Msg
	cj, err := s.get(ctx, m.GetNamespace(), m.GetName())
	if err != nil {
		return nil, err
	}
	res := &kilnv1.GetCronTrainJobResponse{CronTrainJob: s.view(cj)}
	if m.GetIncludeManifest() {
		if res.Manifest, err = cronManifestOf(cj); err != nil {
			return nil, toConnect("encoding the CronTrainJob", err)
		}
	}
	return connect.NewResponse(res), nil
}

// get reads a CronTrainJob the caller may get: from the cache, else (just created, not
// cached yet) from Kubernetes as the caller.
func (s *CronTrainJobs) get(ctx context.Context, namespace, name string) (*kiln.CronTrainJob, error) {
	if err := s.installed(); err != nil {
		return nil, err
	}
	if errs := validateCronRef(namespace, name); len(errs) > 0 {
		return nil, invalid(errs)
	}
	what := fmt.Sprintf("getting CronTrainJob %s/%s", namespace, name)
	if err := s.authorize(ctx, kube.Attributes{Verb: "get", Namespace: namespace, Name: name}); err != nil {
		return nil, err
	}
	cj := &kiln.CronTrainJob{}
	key := client.ObjectKey{Namespace: namespace, Name: name}
	err := s.kube.Cache.Get(ctx, key, cj)
	if apierrors.IsNotFound(err) {
		err = s.kube.AsCaller.Get(ctx, key, cj)
	}
	if err != nil {
		return nil, toConnect(what, err)
	}
	return cj, nil
}

func (s *CronTrainJobs) authorize(ctx context.Context, attrs kube.Attributes) error {
	attrs.Group, attrs.Resource = kiln.GroupVersion.Group, "crontrainjobs"
	return authorize(ctx, s.kube, attrs)
}

// ListCronTrainJobs implements kilnv1connect.CronTrainJobServiceHandler.
func (s *CronTrainJobs) ListCronTrainJobs(ctx context.Context, req *connect.Request[kilnv1.ListCronTrainJobsRequest]) (*connect.Response[kilnv1.ListCronTrainJobsResponse], error) {
	if err := s.installed(); err != nil {
		return nil, err
	}
	m := req.Msg
	errs := validateScope(m.GetNamespace(), m.GetAllNamespaces())
	selector, serrs := parseSelector(m.GetLabelSelector())
	if errs = append(errs, serrs...); len(errs) > 0 {
		return nil, invalid(errs)
	}
	namespace := m.GetNamespace()
	if m.GetAllNamespaces() {
		namespace = ""
	}
	if err := s.authorize(ctx, kube.Attributes{Verb: "list", Namespace: namespace}); err != nil {
		return nil, err
	}
	crons, err := kube.CachedList[kiln.CronTrainJob](ctx, s.kube.Cache, namespace, selector)
	if err != nil {
		return nil, toConnect("listing CronTrainJobs", err)
	}
	items := kube.SortedWithRecent(s.kube.Recent, crons, namespace, selector)
	res := &kilnv1.ListCronTrainJobsResponse{}
	for i := range items {
		res.CronTrainJobs = append(res.CronTrainJobs, s.view(items[i]))
	}
	return connect.NewResponse(res), nil
}

// SuspendCronTrainJob implements kilnv1connect.CronTrainJobServiceHandler.
func (s *CronTrainJobs) SuspendCronTrainJob(ctx context.Context, req *connect.Request[kilnv1.SuspendCronTrainJobRequest]) (*connect.Response[kilnv1.SuspendCronTrainJobResponse], error) {
	cj, err := s.setSuspended(ctx, req.Msg.GetNamespace(), req.Msg.GetName(), true)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&kilnv1.SuspendCronTrainJobResponse{CronTrainJob: cj}), nil
}

// ResumeCronTrainJob implements kilnv1connect.CronTrainJobServiceHandler.
func (s *CronTrainJobs) ResumeCronTrainJob(ctx context.Context, req *connect.Request[kilnv1.ResumeCronTrainJobRequest]) (*connect.Response[kilnv1.ResumeCronTrainJobResponse], error) {
	cj, err := s.setSuspended(ctx, req.Msg.GetNamespace(), req.Msg.GetName(), false)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&kilnv1.ResumeCronTrainJobResponse{CronTrainJob: cj}), nil
}

func (s *CronTrainJobs) setSuspended(ctx context.Context, namespace, name string, suspend bool) (*kilnv1.CronTrainJob, error) {
	if err := s.installed(); err != nil {
		return nil, err
	}
	if errs := validateCronRef(namespace, name); len(errs) > 0 {
		return nil, invalid(errs)
	}
	verb := map[bool]string{true: "suspending", false: "resuming"}[suspend]
	cj := &kiln.CronTrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"suspend":%t}}`, suspend))
	if err := s.kube.AsCaller.Patch(ctx, cj, patch, client.FieldOwner(FieldManager)); err != nil {
		return nil, toConnect(fmt.Sprintf("%s CronTrainJob %s/%s", verb, namespace, name), err)
	}
	// Read your writes: Get and List read the shared cache, so a GetCronTrainJob right after
	// this call would show it as it was. Wait (briefly) for the cache to see the change.
	key := client.ObjectKeyFromObject(cj)
	_ = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, cacheCatchUp, true, func(ctx context.Context) (bool, error) {
		cached := &kiln.CronTrainJob{}
		if err := s.kube.Cache.Get(ctx, key, cached); err != nil {
			return false, nil //nolint:nilerr // not in the cache yet: keep waiting
		}
		return ptr.Deref(cached.Spec.Suspend, false) == suspend, nil
	})
	return s.view(cj), nil
}

// TriggerCronTrainJob implements kilnv1connect.CronTrainJobServiceHandler.
func (s *CronTrainJobs) TriggerCronTrainJob(ctx context.Context, req *connect.Request[kilnv1.TriggerCronTrainJobRequest]) (*connect.Response[kilnv1.TriggerCronTrainJobResponse], error) {
	if err := s.installed(); err != nil {
		return nil, err
	}
	m := req.Msg
	errs := validateCronRef(m.GetNamespace(), m.GetName())
	if errs = append(errs, validateRequestID(m.GetRequestId())...); len(errs) > 0 {
		return nil, invalid(errs)
	}
	what := fmt.Sprintf("triggering CronTrainJob %s/%s", m.GetNamespace(), m.GetName())
	cj := &kiln.CronTrainJob{}
	if err := s.kube.AsCaller.Get(ctx, client.ObjectKey{Namespace: m.GetNamespace(), Name: m.GetName()}, cj); err != nil {
		return nil, toConnect(what, err)
	}
	// Without a request_id every call is a new run; with one, every retry derives the
	// same name and finds the run it created.
	id := m.GetRequestId()
	if id == "" {
		id = rand.Text()
	}
	idem, err := idempotencyOf(id, &kilnv1.TriggerCronTrainJobRequest{Namespace: m.GetNamespace(), Name: m.GetName()})
	if err != nil {
		return nil, toConnect(what, err)
	}
	run := cj.NewRun(s.now().Truncate(time.Second))
	// "<name>-m" and 5 characters: never longer than a scheduled run's name, so every
	// CronTrainJob the webhook admitted can be triggered; never all digits, so never
	// taken for a scheduled run.
	run.Name, run.GenerateName = "", cj.Name+"-m"
	run.Annotations[AnnotationTriggeredBy] = caller(ctx)
	// The caller may create runs without the right to update the CronTrainJob's
	// finalizers, which blocking the owner's deletion would take.
	run.OwnerReferences[0].BlockOwnerDeletion = nil
	idem.stamp(run)
	run.Annotations = telemetry.Annotate(ctx, run.Annotations)
	run, replayed, err := createOnce(ctx, s.kube, run, func() *trainer.TrainJob { return &trainer.TrainJob{} }, idem, false, trainer.TrainJobKind, what)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&kilnv1.TriggerCronTrainJobResponse{TrainJob: s.jobs.views.view(ctx, run, viewOptions{}), Replayed: replayed}), nil
}

// DeleteCronTrainJob implements kilnv1connect.CronTrainJobServiceHandler.
func (s *CronTrainJobs) DeleteCronTrainJob(ctx context.Context, req *connect.Request[kilnv1.DeleteCronTrainJobRequest]) (*connect.Response[kilnv1.DeleteCronTrainJobResponse], error) {
	if err := s.installed(); err != nil {
		return nil, err
	}
	m := req.Msg
	if errs := validateCronRef(m.GetNamespace(), m.GetName()); len(errs) > 0 {
		return nil, invalid(errs)
	}
	// Background: the CronTrainJob goes at once, the garbage collector takes its runs;
	// orphan: the runs stay, without an owner.
	policy := metav1.DeletePropagationBackground
	if m.GetKeepRuns() {
		policy = metav1.DeletePropagationOrphan
	}
	cj := &kiln.CronTrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: m.GetNamespace(), Name: m.GetName()}}
	if err := s.kube.AsCaller.Delete(ctx, cj, client.PropagationPolicy(policy)); err != nil {
		return nil, toConnect(fmt.Sprintf("deleting CronTrainJob %s/%s", m.GetNamespace(), m.GetName()), err)
	}
	s.kube.Recent.Forget(cj)
	return connect.NewResponse(&kilnv1.DeleteCronTrainJobResponse{}), nil
}

// ListCronTrainJobRuns implements kilnv1connect.CronTrainJobServiceHandler.
func (s *CronTrainJobs) ListCronTrainJobRuns(ctx context.Context, req *connect.Request[kilnv1.ListCronTrainJobRunsRequest]) (*connect.Response[kilnv1.ListCronTrainJobRunsResponse], error) {
	m := req.Msg
	cj, err := s.get(ctx, m.GetNamespace(), m.GetName())
	if err != nil {
		return nil, err
	}
	if err := authorize(ctx, s.kube, kube.Attributes{Verb: "list", Group: trainer.GroupVersion.Group, Resource: "trainjobs", Namespace: cj.Namespace}); err != nil {
		return nil, err
	}
	ofCron := labels.SelectorFromSet(labels.Set{kiln.LabelCronTrainJob: cj.Name})
	jobs, err := kube.CachedList[trainer.TrainJob](ctx, s.kube.Cache, cj.Namespace, ofCron)
	if err != nil {
		return nil, toConnect(fmt.Sprintf("listing the runs of CronTrainJob %s/%s", cj.Namespace, cj.Name), err)
	}
	// Runs started by "run now" through this server are listed before the cache has them.
	items := kube.SortedWithRecent(s.kube.Recent, jobs, cj.Namespace, ofCron)
	runs := slices.DeleteFunc(items, func(tj *trainer.TrainJob) bool { return !metav1.IsControlledBy(tj, cj) })
	scheduled := func(tj *trainer.TrainJob) time.Time {
		if t, err := time.Parse(time.RFC3339, tj.Annotations[kiln.AnnotationScheduledTime]); err == nil {
			return t
		}
		return tj.CreationTimestamp.Time
	}
	slices.SortFunc(runs, func(a, b *trainer.TrainJob) int {
		return cmp.Or(scheduled(b).Compare(scheduled(a)), strings.Compare(b.Name, a.Name))
	})
	res := &kilnv1.ListCronTrainJobRunsResponse{}
	for i := range runs {
		res.TrainJobs = append(res.TrainJobs, s.jobs.views.view(ctx, runs[i], viewOptions{}))
	}
	return connect.NewResponse(res), nil
}

func validateCronRef(namespace, name string) field.ErrorList {
	errs := validateNamespace(field.NewPath("namespace"), namespace, true)
	if name == "" {
		return append(errs, field.Required(field.NewPath("name"), "the CronTrainJob's name"))
	}
	return append(errs, request.ValidateName(field.NewPath("name"), name)...)
}

func cronManifestOf(cj *kiln.CronTrainJob) (string, error) {
	out := cj.DeepCopy()
	out.APIVersion, out.Kind = kiln.GroupVersion.String(), kiln.CronTrainJobKind
	out.ManagedFields = nil
	data, err := yaml.Marshal(out)
	return string(data), err
}
