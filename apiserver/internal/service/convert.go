package service

import (
	"context"

	"connectrpc.com/connect"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/apiserver/internal/migrate"
)

// ConvertManifests converts the sources with migrate.Convert. It creates nothing, so it
// needs no permission beyond being a caller; the runtimes' Jobs are read from the server's
// cache, for the checks of what a converted job asks of its runtime.
func (s *TrainJobs) ConvertManifests(ctx context.Context, req *connect.Request[kilnv1.ConvertManifestsRequest]) (*connect.Response[kilnv1.ConvertManifestsResponse], error) {
	m := req.Msg
	if m.GetManifests() == "" {
		return nil, invalid(field.ErrorList{field.Required(field.NewPath("manifests"), "give the PyTorchJobs, Jobs, CronJobs or v2alpha1 TrainJobs to convert, as YAML or JSON")})
	}
	runtimeJobs := func(name string) ([]string, bool) {
		rt := &trainer.ClusterTrainingRuntime{}
		if err := s.kube.Cache.Get(ctx, client.ObjectKey{Name: name}, rt); err != nil {
			return nil, false
		}
		var jobs []string
		for _, j := range rt.Spec.Template.Spec.ReplicatedJobs {
			jobs = append(jobs, j.Name)
		}
		return jobs, true
	}
	if r := m.GetRuntime(); r != "" {
		if _, ok := runtimeJobs(r); !ok {
			return nil, invalid(field.ErrorList{field.NotFound(field.NewPath("runtime"), r)})
		}
	}
	res, err := migrate.Convert([]byte(m.GetManifests()), migrate.Options{Runtime: m.GetRuntime(), Namespace: m.GetNamespace(), RuntimeJobs: runtimeJobs})
	if err != nil {
		return nil, invalid(field.ErrorList{field.Invalid(field.NewPath("manifests"), "", err.Error())})
	}
	out := &kilnv1.ConvertManifestsResponse{}
	for i, o := range res.Objects {
		data, err := migrate.YAML(o)
		if err != nil {
			return nil, connect.NewError(connect.CodeInternal, err)
		}
		out.Manifests = append(out.Manifests, &kilnv1.ConvertedManifest{
			Kind: o.GetObjectKind().GroupVersionKind().Kind, Name: o.GetName(), Namespace: o.GetNamespace(),
			Manifest: string(data), Source: res.Sources[i],
		})
	}
	for _, w := range res.Warnings {
		out.Warnings = append(out.Warnings, &kilnv1.ConversionWarning{
			Document: int32(w.Document), Source: w.Source, Field: w.Field, Message: w.Message, Note: w.Note, //nolint:gosec // documents are few
		})
	}
	return connect.NewResponse(out), nil
}
