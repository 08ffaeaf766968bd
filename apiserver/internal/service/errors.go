// Package service implements Kiln's Connect services over Kubernetes: every call acts as
// the caller, every read from a shared cache is authorized for the caller first.
package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// toConnect is the one place a Kubernetes (or any other) error becomes a Connect error.
// what says what the call was doing, e.g. "creating TrainJob team-a/mnist".
func toConnect(what string, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	switch {
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, fmt.Errorf("%s: %w", what, err))
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("%s: %w", what, err))
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		var netErr net.Error
		if errors.As(err, &netErr) {
			return connect.NewError(connect.CodeUnavailable, fmt.Errorf("%s: Kubernetes is unreachable: %w", what, err))
		}
		return connect.NewError(connect.CodeInternal, fmt.Errorf("%s: %w", what, err))
	}
	msg := fmt.Errorf("%s: %s", what, status.Status().Message)
	code := codeOf(status.Status())
	cerr := connect.NewError(code, msg)
	switch code {
	case connect.CodeInvalidArgument:
		if d := status.Status().Details; d != nil && len(d.Causes) > 0 {
			br := &errdetails.BadRequest{}
			for _, c := range d.Causes {
				br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{Field: c.Field, Description: c.Message})
			}
			addDetail(cerr, br)
		}
	case connect.CodeResourceExhausted, connect.CodeUnavailable:
		if d := status.Status().Details; d != nil && d.RetryAfterSeconds > 0 {
			addDetail(cerr, &errdetails.RetryInfo{RetryDelay: durationpb.New(time.Duration(d.RetryAfterSeconds) * time.Second)})
		}
	}
	return cerr
}

// connectCodes are the Connect codes of Kubernetes statuses: each with the reasons that mean
// it and, for a status whose reason is none of those, the HTTP codes that do.
var connectCodes = []struct {
	code    connect.Code
	reasons []metav1.StatusReason
	http    []int32
}{
	{connect.CodeInvalidArgument, []metav1.StatusReason{metav1.StatusReasonInvalid, metav1.StatusReasonBadRequest}, []int32{http.StatusBadRequest, http.StatusUnprocessableEntity}},
	{connect.CodePermissionDenied, []metav1.StatusReason{metav1.StatusReasonForbidden}, []int32{http.StatusForbidden}},
	{connect.CodeUnauthenticated, []metav1.StatusReason{metav1.StatusReasonUnauthorized}, []int32{http.StatusUnauthorized}},
	{connect.CodeNotFound, []metav1.StatusReason{metav1.StatusReasonNotFound}, []int32{http.StatusNotFound}},
	{connect.CodeAlreadyExists, []metav1.StatusReason{metav1.StatusReasonAlreadyExists}, nil},
	{connect.CodeAborted, []metav1.StatusReason{metav1.StatusReasonConflict}, []int32{http.StatusConflict}},
	{connect.CodeOutOfRange, []metav1.StatusReason{metav1.StatusReasonGone, metav1.StatusReasonExpired}, []int32{http.StatusGone}},
	{connect.CodeResourceExhausted, []metav1.StatusReason{metav1.StatusReasonTooManyRequests, metav1.StatusReasonRequestEntityTooLarge}, []int32{http.StatusTooManyRequests}},
	{connect.CodeDeadlineExceeded, []metav1.StatusReason{metav1.StatusReasonTimeout, metav1.StatusReasonServerTimeout}, []int32{http.StatusGatewayTimeout}},
	{connect.CodeUnavailable, []metav1.StatusReason{metav1.StatusReasonServiceUnavailable}, []int32{http.StatusBadGateway, http.StatusServiceUnavailable}},
	{connect.CodeUnimplemented, []metav1.StatusReason{metav1.StatusReasonMethodNotAllowed, metav1.StatusReasonNotAcceptable, metav1.StatusReasonUnsupportedMediaType}, []int32{http.StatusNotImplemented, http.StatusMethodNotAllowed}},
	{connect.CodeInternal, []metav1.StatusReason{metav1.StatusReasonInternalError}, nil},
}

// codeOf maps a Kubernetes status to the Connect code with the same meaning: by its reason,
// else by its HTTP code.
func codeOf(s metav1.Status) connect.Code {
	for _, c := range connectCodes {
		if slices.Contains(c.reasons, s.Reason) {
			return c.code
		}
	}
	for _, c := range connectCodes {
		if slices.Contains(c.http, s.Code) {
			return c.code
		}
	}
	return connect.CodeUnknown
}

// invalid is the InvalidArgument error for request fields that are wrong: its message names
// each field and the fix, and a BadRequest detail lists them for programs.
func invalid(errs field.ErrorList) error {
	msgs := make([]string, 0, len(errs))
	br := &errdetails.BadRequest{}
	for _, e := range errs {
		msgs = append(msgs, e.Error())
		br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{Field: e.Field, Description: e.ErrorBody()})
	}
	cerr := connect.NewError(connect.CodeInvalidArgument, errors.New(strings.Join(msgs, "; ")))
	addDetail(cerr, br)
	return cerr
}

func addDetail(cerr *connect.Error, m proto.Message) {
	if d, err := connect.NewErrorDetail(m); err == nil {
		cerr.AddDetail(d)
	}
}

// denied is the PermissionDenied error of a read the caller's RBAC does not allow.
func denied(who, what, reason string) error {
	msg := fmt.Sprintf("%s may not %s", who, what)
	if reason != "" {
		msg += ": " + reason
	}
	return connect.NewError(connect.CodePermissionDenied, errors.New(msg+" (ask your cluster admin for a Role that allows it)"))
}
