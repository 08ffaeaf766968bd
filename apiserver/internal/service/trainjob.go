package service

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"connectrpc.com/connect"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/gen/kiln/v1/kilnv1connect"
	"github.com/kiln-ml/kiln/api/telemetry"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/apiserver/internal/auth"
	"github.com/kiln-ml/kiln/apiserver/internal/kube"
	"github.com/kiln-ml/kiln/apiserver/internal/request"
	"github.com/kiln-ml/kiln/apiserver/internal/view"
)

// TrainJobs implements kilnv1connect.TrainJobServiceHandler.
type TrainJobs struct {
	kube  *kube.Clients
	views *views
	// stop closes when the server begins to shut down: streams end then.
	stop <-chan struct{}
}

var _ kilnv1connect.TrainJobServiceHandler = (*TrainJobs)(nil)

// NewTrainJobs serves TrainJobs through k. Streams end when stop closes.
func NewTrainJobs(k *kube.Clients, stop <-chan struct{}) *TrainJobs {
	return &TrainJobs{kube: k, views: newViews(k), stop: stop}
}

func (s *TrainJobs) stopping() <-chan struct{} { return s.stop }

// Page sizes of ListTrainJobs.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

// CreateTrainJob implements kilnv1connect.TrainJobServiceHandler.
func (s *TrainJobs) CreateTrainJob(ctx context.Context, req *connect.Request[kilnv1.CreateTrainJobRequest]) (*connect.Response[kilnv1.CreateTrainJobResponse], error) {
	m := req.Msg
	tj, errs := trainJobFrom(m)
	if len(errs) > 0 {
		return nil, invalid(errs)
	}
	// The checks below read with the server's own identity: a caller who may not create the
	// job must not learn from them what exists in the namespace.
	if err := authorize(ctx, s.kube, kube.Attributes{Verb: "create", Group: trainer.GroupVersion.Group, Resource: "trainjobs", Namespace: tj.Namespace}); err != nil {
		return nil, err
	}
	errs = append(missingRuntime(ctx, s.kube, tj.Namespace, tj.Spec.RuntimeRef, runtimePath(m)),
		missingQueue(ctx, s.kube, tj.Namespace, tj.Labels[trainer.KueueQueueNameLabel], queuePath(m))...)
	if len(errs) == 0 {
		errs = askTopology(ctx, s.kube, tj, m.GetTrainJob().GetSpec().GetTopology(), field.NewPath("train_job", "spec", "topology"))
	}
	if len(errs) > 0 {
		return nil, invalid(errs)
	}
	asked := tj.Labels[trainer.KueueQueueNameLabel]
	ctx, warnings := kube.CollectWarnings(ctx)
	what := fmt.Sprintf("creating TrainJob %s/%s", tj.Namespace, cmp.Or(tj.Name, tj.GenerateName+"*"))
	idem, err := newIdempotency(m)
	if err != nil {
		return nil, toConnect(what, err)
	}
	idem.stamp(tj)
	// The operator's spans for the job continue this call's trace (submit to completion).
	tj.Annotations = telemetry.Annotate(ctx, tj.Annotations)
	tj, replayed, err := createOnce(ctx, s.kube, tj, func() *trainer.TrainJob { return &trainer.TrainJob{} }, idem, m.GetDryRun(), trainer.TrainJobKind, what)
	if err != nil {
		return nil, err
	}
	manifest, err := manifestOf(tj)
	if err != nil {
		return nil, toConnect(what, err)
	}
	if !replayed {
		warnings.Add(defaultQueueWarning(asked, tj.Labels[trainer.KueueQueueNameLabel]))
	}
	return connect.NewResponse(&kilnv1.CreateTrainJobResponse{
		TrainJob: s.views.view(ctx, tj, viewOptions{}),
		Manifest: manifest,
		Replayed: replayed,
		Warnings: warnings.List(),
	}), nil
}

// trainJobFrom decodes a create request into the TrainJob to create, or says which fields
// are wrong.
func trainJobFrom(m *kilnv1.CreateTrainJobRequest) (*trainer.TrainJob, field.ErrorList) {
	var (
		tj   *trainer.TrainJob
		errs field.ErrorList
	)
	switch src := m.GetSource().(type) {
	case *kilnv1.CreateTrainJobRequest_TrainJob:
		tj, errs = structured(m.GetNamespace(), src.TrainJob, "train_job", request.NewTrainJob)
	case *kilnv1.CreateTrainJobRequest_Manifest:
		tj, errs = request.ParseManifest(src.Manifest, field.NewPath("manifest"))
		if tj != nil {
			errs = append(errs, manifestTarget(tj, m.GetNamespace())...)
		}
	default:
		errs = append(errs, field.Required(field.NewPath("source"), "set train_job (structured) or manifest (YAML or JSON)"))
	}
	errs = append(errs, validateRequestID(m.GetRequestId())...)
	if len(errs) > 0 {
		return nil, errs
	}
	return tj, nil
}

// structured decodes a create request's structured object (in, at the request's field
// path) with decode, in the request's namespace, which it must name.
func structured[In, Out any](namespace string, in In, path string, decode func(string, In, *field.Path) (Out, field.ErrorList)) (Out, field.ErrorList) {
	errs := validateNamespace(field.NewPath("namespace"), namespace, true)
	out, more := decode(namespace, in, field.NewPath(path))
	return out, append(errs, more...)
}

// manifestTarget settles a manifest's namespace with the request's, and checks its name.
func manifestTarget(tj *trainer.TrainJob, namespace string) field.ErrorList {
	errs := settleNamespace(&tj.Namespace, namespace)
	name := field.NewPath("manifest").Child("metadata", "name")
	switch {
	case tj.Name == "" && tj.GenerateName == "":
		errs = append(errs, field.Required(name, "set metadata.name or metadata.generateName"))
	case tj.Name != "":
		errs = append(errs, request.ValidateName(name, tj.Name)...)
	default:
		errs = append(errs, request.ValidateName(field.NewPath("manifest").Child("metadata", "generateName"), tj.GenerateName+"x")...)
	}
	return errs
}

// settleNamespace settles a manifest's namespace (*ns) with the request's.
func settleNamespace(ns *string, requested string) field.ErrorList {
	var errs field.ErrorList
	switch {
	case *ns == "" && requested == "":
		errs = append(errs, field.Required(field.NewPath("namespace"), "the manifest names no namespace: set one"))
	case *ns == "":
		*ns = requested
	case requested != "" && requested != *ns:
		errs = append(errs, field.Invalid(field.NewPath("namespace"), requested,
			fmt.Sprintf("the manifest's metadata.namespace is %q: make them agree, or leave one empty", *ns)))
	}
	return append(errs, validateNamespace(field.NewPath("namespace"), *ns, false)...)
}

// GetTrainJob implements kilnv1connect.TrainJobServiceHandler.
func (s *TrainJobs) GetTrainJob(ctx context.Context, req *connect.Request[kilnv1.GetTrainJobRequest]) (*connect.Response[kilnv1.GetTrainJobResponse], error) {
	m := req.Msg
	if errs := validateRef(m.GetNamespace(), m.GetName()); len(errs) > 0 {
		return nil, invalid(errs)
	}
	tj, err := s.get(ctx, m.GetNamespace(), m.GetName())
	if err != nil {
		return nil, err
	}
	res := &kilnv1.GetTrainJobResponse{TrainJob: s.views.view(ctx, tj, viewOptions{steps: true, position: true})}
	res.TrainJob.GetStatus().KeptLogAttempts = s.keptAttempts(ctx, tj)
	if m.GetIncludeManifest() {
		if res.Manifest, err = manifestOf(tj); err != nil {
			return nil, toConnect("encoding the TrainJob", err)
		}
	}
	return connect.NewResponse(res), nil
}

// get reads a TrainJob the caller may get: from the cache once RBAC allows it, else (not
// cached yet, e.g. just created) from Kubernetes as the caller.
func (s *TrainJobs) get(ctx context.Context, namespace, name string) (*trainer.TrainJob, error) {
	what := fmt.Sprintf("getting TrainJob %s/%s", namespace, name)
	attrs := kube.Attributes{Verb: "get", Group: trainer.GroupVersion.Group, Resource: "trainjobs", Namespace: namespace, Name: name}
	ok, reason, err := s.kube.Authorizer.Allowed(ctx, attrs)
	if err != nil {
		return nil, toConnect(what, err)
	}
	if !ok {
		return nil, denied(caller(ctx), attrs.String(), reason)
	}
	tj := &trainer.TrainJob{}
	key := client.ObjectKey{Namespace: namespace, Name: name}
	err = s.kube.Cache.Get(ctx, key, tj)
	if apierrors.IsNotFound(err) {
		err = s.kube.AsCaller.Get(ctx, key, tj)
	}
	if err != nil {
		return nil, toConnect(what, err)
	}
	// Deleted, as a watch of this server saw, though its cache may still hold it.
	if s.kube.Recent.IsGone(tj) {
		return nil, toConnect(what, apierrors.NewNotFound(trainer.GroupVersion.WithResource("trainjobs").GroupResource(), name))
	}
	// A newer version a watch of this server delivered than the cache has yet.
	if latest, ok := kube.Latest(s.kube.Recent, tj); ok {
		return latest, nil
	}
	return tj, nil
}

// ListTrainJobs implements kilnv1connect.TrainJobServiceHandler.
func (s *TrainJobs) ListTrainJobs(ctx context.Context, req *connect.Request[kilnv1.ListTrainJobsRequest]) (*connect.Response[kilnv1.ListTrainJobsResponse], error) {
	m := req.Msg
	errs := validateScope(m.GetNamespace(), m.GetAllNamespaces())
	selector, serrs := parseSelector(m.GetLabelSelector())
	errs = append(errs, serrs...)
	size := int(m.GetPageSize())
	switch {
	case size == 0:
		size = defaultPageSize
	case size < 0 || size > maxPageSize:
		errs = append(errs, field.Invalid(field.NewPath("page_size"), size, fmt.Sprintf("must be between 1 and %d (0 means %d)", maxPageSize, defaultPageSize)))
	}
	for i, st := range m.GetStates() {
		if _, ok := kilnv1.State_name[int32(st)]; !ok || st == kilnv1.State_STATE_UNSPECIFIED {
			errs = append(errs, field.NotSupported(field.NewPath("states").Index(i), st.String(), stateNames()))
		}
	}
	for i, st := range m.GetStatuses() {
		if !slices.Contains(view.Statuses, st) {
			errs = append(errs, field.NotSupported(field.NewPath("statuses").Index(i), st, view.Statuses))
		}
	}
	query := pageQuery(m)
	after, terrs := decodePageToken(m.GetPageToken(), query)
	errs = append(errs, terrs...)
	if len(errs) > 0 {
		return nil, invalid(errs)
	}
	namespace := m.GetNamespace()
	if m.GetAllNamespaces() {
		namespace = ""
	}
	attrs := kube.Attributes{Verb: "list", Group: trainer.GroupVersion.Group, Resource: "trainjobs", Namespace: namespace}
	what := "listing TrainJobs " + strings.TrimPrefix(attrs.String(), "list trainjobs."+trainer.GroupVersion.Group+" ")
	ok, reason, err := s.kube.Authorizer.Allowed(ctx, attrs)
	if err != nil {
		return nil, toConnect(what, err)
	}
	if !ok {
		return nil, denied(caller(ctx), attrs.String(), reason)
	}
	names := s.kube.TrainJobNames()
	if names == nil {
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("%s: the server is starting (its cache of TrainJobs is not there yet); try again in a moment", what))
	}
	res := &kilnv1.ListTrainJobsResponse{}
	// The cached objects are only read below: no copy of any job per call.
	for tj := range kube.SortedAfter[trainer.TrainJob](s.kube.Recent, names, namespace, selector, after) {
		v := s.views.view(ctx, tj, viewOptions{})
		if len(m.GetStates()) > 0 && !slices.Contains(m.GetStates(), v.GetStatus().GetState()) ||
			len(m.GetStatuses()) > 0 && !slices.Contains(m.GetStatuses(), v.GetStatus().GetStatus()) {
			continue
		}
		if len(res.TrainJobs) == size {
			last := res.TrainJobs[len(res.TrainJobs)-1]
			res.NextPageToken = encodePageToken(query, last.Namespace+"/"+last.Name)
			break
		}
		res.TrainJobs = append(res.TrainJobs, v)
	}
	return connect.NewResponse(res), nil
}

// DeleteTrainJob implements kilnv1connect.TrainJobServiceHandler.
func (s *TrainJobs) DeleteTrainJob(ctx context.Context, req *connect.Request[kilnv1.DeleteTrainJobRequest]) (*connect.Response[kilnv1.DeleteTrainJobResponse], error) {
	m := req.Msg
	if errs := validateRef(m.GetNamespace(), m.GetName()); len(errs) > 0 {
		return nil, invalid(errs)
	}
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: m.GetNamespace(), Name: m.GetName()}}
	// Background: the TrainJob goes at once, the garbage collector takes what it owns.
	if err := s.kube.AsCaller.Delete(ctx, tj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		return nil, toConnect(fmt.Sprintf("deleting TrainJob %s/%s", m.GetNamespace(), m.GetName()), err)
	}
	s.kube.Recent.Forget(tj)
	return connect.NewResponse(&kilnv1.DeleteTrainJobResponse{}), nil
}

// FieldManager owns what the API server writes on the caller's behalf.
const FieldManager = "kiln-apiserver"

func manifestOf(tj *trainer.TrainJob) (string, error) {
	out := tj.DeepCopy()
	out.APIVersion, out.Kind = trainer.GroupVersion.String(), "TrainJob"
	out.ManagedFields = nil
	data, err := yaml.Marshal(out)
	return string(data), err
}

func caller(ctx context.Context) string {
	if id := auth.FromContext(ctx); id != nil {
		return id.User
	}
	return "the caller"
}

func validateNamespace(p *field.Path, ns string, required bool) field.ErrorList {
	if ns == "" {
		if required {
			return field.ErrorList{field.Required(p, "the namespace to act in")}
		}
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(ns) {
		errs = append(errs, field.Invalid(p, ns, msg))
	}
	return errs
}

func validateRef(namespace, name string) field.ErrorList {
	errs := validateNamespace(field.NewPath("namespace"), namespace, true)
	if name == "" {
		return append(errs, field.Required(field.NewPath("name"), "the TrainJob's name"))
	}
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(field.NewPath("name"), name, msg))
	}
	return errs
}

func validateScope(namespace string, all bool) field.ErrorList {
	if all && namespace != "" {
		return field.ErrorList{field.Invalid(field.NewPath("all_namespaces"), all, "set namespace or all_namespaces, not both")}
	}
	if all {
		return nil
	}
	return validateNamespace(field.NewPath("namespace"), namespace, true)
}

func parseSelector(s string) (labels.Selector, field.ErrorList) {
	sel, err := labels.Parse(s)
	if err != nil {
		return labels.Everything(), field.ErrorList{field.Invalid(field.NewPath("label_selector"), s, err.Error()+" (write e.g. team=nlp,stage!=dev)")}
	}
	return sel, nil
}

func stateNames() []string {
	var out []string
	for i := int32(1); i < int32(len(kilnv1.State_name)); i++ {
		out = append(out, kilnv1.State(i).String())
	}
	return out
}
