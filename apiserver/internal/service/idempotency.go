package service

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/apiserver/internal/convert"
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
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("hashing the request: %w", err)
	}
	sum := sha256.Sum256(data)
	return &idempotency{id: m.GetRequestId(), hash: hex.EncodeToString(sum[:16])}, nil
}

// stamp records the request on tj. A generated name is derived from the request_id, so
// that every retry names the same job and Kubernetes itself refuses the duplicates.
func (i *idempotency) stamp(tj *trainer.TrainJob) {
	if i == nil {
		return
	}
	if tj.Annotations == nil {
		tj.Annotations = map[string]string{}
	}
	tj.Annotations[AnnotationRequestID] = i.id
	tj.Annotations[AnnotationRequestHash] = i.hash
	if tj.Name == "" && tj.GenerateName != "" {
		i.prefix = tj.GenerateName
		tj.Name = derivedName(tj.GenerateName, i.id, 0)
		tj.GenerateName = ""
	}
}

// rename gives tj the next name of its request's chain, when its name was derived and the
// one before was taken by another request's job. Every retry of the request walks the same
// chain, so it still finds the job it created. False when there is no next name.
func (i *idempotency) rename(tj *trainer.TrainJob, step int) bool {
	if i == nil || i.prefix == "" || step >= maxDerivedNames {
		return false
	}
	tj.Name = derivedName(i.prefix, i.id, step)
	return true
}

// replay returns nil when existing was created by this very request, else the error that
// explains the clash.
func (i *idempotency) replay(existing *trainer.TrainJob) error {
	switch {
	case existing.Annotations[AnnotationRequestID] != i.id:
		return connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("TrainJob %s/%s already exists (not created by request_id %q): pick another name",
			existing.Namespace, existing.Name, i.id))
	case existing.Annotations[AnnotationRequestHash] != i.hash:
		return connect.NewError(connect.CodeFailedPrecondition, errors.New("request_id "+fmt.Sprintf("%q", i.id)+
			" already created TrainJob "+existing.Namespace+"/"+existing.Name+" from a different request: use a new request_id for a new job"))
	}
	return nil
}

// nameAlphabet is the one Kubernetes completes generateName with (no vowels, no
// look-alike characters).
const nameAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// derivedName completes prefix with 5 characters derived from the request id and the step
// of its chain (see rename).
func derivedName(prefix, requestID string, step int) string {
	if len(prefix) > convert.MaxNameLength-5 {
		prefix = prefix[:convert.MaxNameLength-5]
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
