package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/apiserver/internal/kube"
	"github.com/kiln-ml/kiln/apiserver/internal/request"
)

// Annotations that make CreateTrainJob idempotent: the request_id that created a job and
// a digest of the request, so a retry is told from a different request that reuses the id.
const (
	AnnotationRequestID   = "kiln.dev/request-id"
	AnnotationRequestHash = "kiln.dev/request-hash"
)

const maxRequestIDLength = 128

func validateRequestID(id string) field.ErrorList {
	if len(id) > maxRequestIDLength {
		return field.ErrorList{field.TooLong(field.NewPath("request_id"), "", maxRequestIDLength)}
	}
	for _, r := range id {
		if r < 0x21 || r > 0x7e {
			return field.ErrorList{field.Invalid(field.NewPath("request_id"), id, "must be printable ASCII without spaces, e.g. a UUID")}
		}
	}
	return nil
}

// idempotency is what a request with a request_id records on the job it creates.
type idempotency struct {
	id, hash string
	// prefix is the generateName the job's name was derived from ("" when the caller named it).
	prefix string
}

// maxDerivedNames bounds the chain of names a request may take: a derived name can be
// taken by another request's job (5 characters of 27: likely among a few thousand jobs).
const maxDerivedNames = 8

// newIdempotency returns nil for a request without request_id.
func newIdempotency(m *kilnv1.CreateTrainJobRequest) (*idempotency, error) {
	if m.GetRequestId() == "" {
		return nil, nil
	}
	// The digest covers what the request asks for, not how it was sent.
	c := proto.CloneOf(m)
	c.RequestId, c.DryRun = "", false
	return idempotencyOf(m.GetRequestId(), c)
}

// idempotencyOf is the record of request id, whose request asks for what.
func idempotencyOf(id string, what proto.Message) (*idempotency, error) {
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(what)
	if err != nil {
		return nil, fmt.Errorf("hashing the request: %w", err)
	}
	sum := sha256.Sum256(data)
	return &idempotency{id: id, hash: hex.EncodeToString(sum[:16])}, nil
}

// stamp records the request on obj. A generated name is derived from the request_id, so
// that every retry names the same object and Kubernetes itself refuses the duplicates.
func (i *idempotency) stamp(obj metav1.Object) {
	if i == nil {
		return
	}
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[AnnotationRequestID] = i.id
	a[AnnotationRequestHash] = i.hash
	obj.SetAnnotations(a)
	if obj.GetName() == "" && obj.GetGenerateName() != "" {
		i.prefix = obj.GetGenerateName()
		obj.SetName(derivedName(i.prefix, i.id, 0))
		obj.SetGenerateName("")
	}
}

// rename gives obj the next name of its request's chain, when its name was derived and
// the one before was taken by another request's object. Every retry of the request walks
// the same chain, so it still finds what it created. False when there is no next name.
func (i *idempotency) rename(obj metav1.Object, step int) bool {
	if i == nil || i.prefix == "" || step >= maxDerivedNames {
		return false
	}
	obj.SetName(derivedName(i.prefix, i.id, step))
	return true
}

// replay returns nil when existing (a kind) was created by this very request, else the
// error that explains the clash.
func (i *idempotency) replay(kind string, existing metav1.Object) error {
	what := fmt.Sprintf("%s %s/%s", kind, existing.GetNamespace(), existing.GetName())
	switch {
	case existing.GetAnnotations()[AnnotationRequestID] != i.id:
		return connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("%s already exists (not created by request_id %q): pick another name", what, i.id))
	case existing.GetAnnotations()[AnnotationRequestHash] != i.hash:
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf(
			"request_id %q already created %s from a different request: use a new request_id for a new one", i.id, what))
	}
	return nil
}

// createOnce creates obj (a kind) as the caller. With a request's idempotency record it
// makes the request safe to retry: a name taken by another request's object moves obj to
// the next name of the request's chain, and an object this request created before is
// returned (replayed) instead of an error. fresh returns an empty object to read into. A
// dry run stores nothing, so it is never replayed: it ignores idem. What it creates, the
// server's lists show at once (k.Recent).
func createOnce[T client.Object](ctx context.Context, k *kube.Clients, obj T, fresh func() T, idem *idempotency, dryRun bool, kind, what string) (T, bool, error) {
	c := k.AsCaller
	opts := []client.CreateOption{client.FieldOwner(FieldManager)}
	if dryRun {
		opts = append(opts, client.DryRunAll)
		idem = nil
	}
	for step := 1; ; step++ {
		err := c.Create(ctx, obj, opts...)
		if err == nil {
			if !dryRun {
				k.Recent.Created(obj)
			}
			return obj, false, nil
		}
		if !apierrors.IsAlreadyExists(err) || idem == nil {
			return obj, false, toConnect(what, err)
		}
		existing := fresh()
		if gerr := c.Get(ctx, client.ObjectKeyFromObject(obj), existing); gerr != nil {
			return obj, false, toConnect(what, err)
		}
		if existing.GetAnnotations()[AnnotationRequestID] != idem.id && idem.rename(obj, step) {
			continue
		}
		if err := idem.replay(kind, existing); err != nil {
			return obj, false, err
		}
		return existing, true, nil
	}
}

// nameAlphabet is the one Kubernetes completes generateName with (no vowels, no
// look-alike characters).
const nameAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// derivedName completes prefix with 5 characters derived from the request id and the step
// of its chain (see rename).
func derivedName(prefix, requestID string, step int) string {
	if len(prefix) > request.MaxNameLength-5 {
		prefix = prefix[:request.MaxNameLength-5]
	}
	seed := requestID
	if step > 0 {
		seed = fmt.Sprintf("%s\x00%d", requestID, step)
	}
	sum := sha256.Sum256([]byte(seed))
	b := []byte(prefix)
	for _, c := range sum[:5] {
		b = append(b, nameAlphabet[int(c)%len(nameAlphabet)])
	}
	return string(b)
}
