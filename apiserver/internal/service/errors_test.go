package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestToConnect(t *testing.T) {
	gr := schema.GroupResource{Group: "trainer.kubeflow.org", Resource: "trainjobs"}
	cases := map[string]struct {
		err  error
		want connect.Code
	}{
		"invalid":             {apierrors.NewInvalid(schema.GroupKind{Group: "trainer.kubeflow.org", Kind: "TrainJob"}, "j", field.ErrorList{field.Invalid(field.NewPath("spec", "x"), 1, "bad")}), connect.CodeInvalidArgument},
		"bad request":         {apierrors.NewBadRequest("bad"), connect.CodeInvalidArgument},
		"forbidden":           {apierrors.NewForbidden(gr, "j", errors.New("RBAC")), connect.CodePermissionDenied},
		"unauthorized":        {apierrors.NewUnauthorized("who"), connect.CodeUnauthenticated},
		"not found":           {apierrors.NewNotFound(gr, "j"), connect.CodeNotFound},
		"already exists":      {apierrors.NewAlreadyExists(gr, "j"), connect.CodeAlreadyExists},
		"conflict":            {apierrors.NewConflict(gr, "j", errors.New("changed")), connect.CodeAborted},
		"gone":                {&apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonGone}}, connect.CodeOutOfRange},
		"expired":             {apierrors.NewResourceExpired("too old"), connect.CodeOutOfRange},
		"too many requests":   {apierrors.NewTooManyRequests("slow down", 3), connect.CodeResourceExhausted},
		"entity too large":    {apierrors.NewRequestEntityTooLargeError("big"), connect.CodeResourceExhausted},
		"timeout":             {apierrors.NewTimeoutError("slow", 1), connect.CodeDeadlineExceeded},
		"server timeout":      {apierrors.NewServerTimeout(gr, "get", 1), connect.CodeDeadlineExceeded},
		"unavailable":         {apierrors.NewServiceUnavailable("down"), connect.CodeUnavailable},
		"method not allowed":  {apierrors.NewMethodNotSupported(gr, "patch"), connect.CodeUnimplemented},
		"internal":            {apierrors.NewInternalError(errors.New("boom")), connect.CodeInternal},
		"generic 429":         {apierrors.NewGenericServerResponse(429, "get", gr, "j", "", 0, false), connect.CodeResourceExhausted},
		"context canceled":    {fmt.Errorf("x: %w", context.Canceled), connect.CodeCanceled},
		"context deadline":    {context.DeadlineExceeded, connect.CodeDeadlineExceeded},
		"network":             {&net.OpError{Op: "dial", Err: errors.New("refused")}, connect.CodeUnavailable},
		"other":               {errors.New("boom"), connect.CodeInternal},
		"already connect":     {connect.NewError(connect.CodeNotFound, errors.New("x")), connect.CodeNotFound},
		"wrapped k8s invalid": {fmt.Errorf("creating: %w", apierrors.NewInvalid(schema.GroupKind{Group: "trainer.kubeflow.org", Kind: "TrainJob"}, "j", nil)), connect.CodeInvalidArgument},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := toConnect("doing it", tc.err)
			if c := connect.CodeOf(got); c != tc.want {
				t.Errorf("toConnect(%v) = %v, want %v", tc.err, c, tc.want)
			}
		})
	}
}

func TestToConnectFieldViolations(t *testing.T) {
	gk := schema.GroupKind{Group: "trainer.kubeflow.org", Kind: "TrainJob"}
	err := toConnect("creating TrainJob a/b", apierrors.NewInvalid(gk, "b", field.ErrorList{
		field.Invalid(field.NewPath("spec", "trainer", "numNodes"), -1, "must be positive"),
	}))
	var ce *connect.Error
	if !errors.As(err, &ce) || !strings.HasPrefix(ce.Message(), "creating TrainJob a/b: ") {
		t.Fatalf("toConnect() = %v", err)
	}
	var got []string
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if br, ok := v.(*errdetails.BadRequest); ok && derr == nil {
			for _, fv := range br.GetFieldViolations() {
				got = append(got, fv.GetField())
			}
		}
	}
	if diff := cmp.Diff([]string{"spec.trainer.numNodes"}, got); diff != "" {
		t.Errorf("field violations (-want +got):\n%s", diff)
	}
}

func TestInvalid(t *testing.T) {
	err := invalid(field.ErrorList{field.Required(field.NewPath("namespace"), "the namespace to act in")})
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "namespace: Required value: the namespace to act in") {
		t.Errorf("invalid() = %v", err)
	}
}
