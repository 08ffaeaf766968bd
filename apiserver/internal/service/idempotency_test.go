package service

import (
	"fmt"
	"testing"

	"connectrpc.com/connect"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

func TestIdempotency(t *testing.T) {
	req := func(id, image string, dryRun bool) *kilnv1.CreateTrainJobRequest {
		return &kilnv1.CreateTrainJobRequest{Namespace: "team", RequestId: id, DryRun: dryRun, Source: &kilnv1.CreateTrainJobRequest_TrainJob{
			TrainJob: &kilnv1.NewTrainJob{GenerateName: "mnist-", Spec: &kilnv1.TrainJobSpec{Runtime: "torch-distributed", Image: image}},
		}}
	}
	if i, _ := newIdempotency(req("", "a", false)); i != nil {
		t.Errorf("a request without request_id is not idempotent")
	}
	first, _ := newIdempotency(req("r1", "a", false))
	retry, _ := newIdempotency(req("r1", "a", true))
	other, _ := newIdempotency(req("r1", "b", false))
	if first.hash != retry.hash {
		t.Errorf("dry_run changed the request digest")
	}
	if first.hash == other.hash {
		t.Errorf("a different request has the same digest")
	}
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{GenerateName: "mnist-"}}
	first.stamp(tj)
	again := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{GenerateName: "mnist-"}}
	retry.stamp(again)
	if tj.Name == "" || tj.Name != again.Name || len(tj.Name) != len("mnist-")+5 || tj.GenerateName != "" {
		t.Errorf("derived names %q and %q: want the same 5-character completion of mnist-", tj.Name, again.Name)
	}
	if err := retry.replay("TrainJob", tj); err != nil {
		t.Errorf("replay of a retry = %v", err)
	}
	if err := other.replay("TrainJob", tj); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Errorf("replay of a different request with the same id = %v, want FailedPrecondition", err)
	}
	stranger := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: tj.Name}}
	if err := retry.replay("TrainJob", stranger); connect.CodeOf(err) != connect.CodeAlreadyExists {
		t.Errorf("replay onto a job created otherwise = %v, want AlreadyExists", err)
	}
}

// Two request ids whose derived names collide (the chaos run met one among 1,000
// submissions): each takes its own chain of names, and every retry walks the same chain.
func TestDerivedNameChains(t *testing.T) {
	seen := map[string]string{}
	var a, b string
	for n := 0; a == ""; n++ {
		id := fmt.Sprintf("req-%d", n)
		name := derivedName("job-", id, 0)
		if prev, ok := seen[name]; ok {
			a, b = prev, id
		}
		seen[name] = id
	}
	ia := &idempotency{id: a}
	ib := &idempotency{id: b}
	ta := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{GenerateName: "job-"}}
	tb := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{GenerateName: "job-"}}
	ia.stamp(ta)
	ib.stamp(tb)
	if ta.Name != tb.Name {
		t.Fatalf("%s and %s were found to collide, yet derive %s and %s", a, b, ta.Name, tb.Name)
	}
	if !ib.rename(tb, 1) || tb.Name == ta.Name || len(tb.Name) != len("job-")+5 {
		t.Errorf("the next name of %s's chain is %q, want another 5-character completion", b, tb.Name)
	}
	again := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{GenerateName: "job-"}}
	retry := &idempotency{id: b}
	retry.stamp(again)
	retry.rename(again, 1)
	if again.Name != tb.Name {
		t.Errorf("a retry of %s walks to %q, not to %q", b, again.Name, tb.Name)
	}
	if ib.rename(tb, maxDerivedNames) {
		t.Errorf("the chain does not end")
	}
	named := &idempotency{id: "x"}
	named.stamp(&trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "mine"}})
	if named.rename(&trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "mine"}}, 1) {
		t.Errorf("a name the caller chose was changed")
	}
}

func TestValidateRequestID(t *testing.T) {
	for id, ok := range map[string]bool{"": true, "0b6e1c2a-9f1e-4c53-a1c6-3f1f2b8a7d10": true, "has space": false, "é": false, string(make([]byte, 129)): false} {
		if got := len(validateRequestID(id)) == 0; got != ok {
			t.Errorf("validateRequestID(%q) ok = %v, want %v", id, got, ok)
		}
	}
}

func TestPageToken(t *testing.T) {
	q := pageQuery(&kilnv1.ListTrainJobsRequest{Namespace: "a", PageSize: 10})
	if q != pageQuery(&kilnv1.ListTrainJobsRequest{Namespace: "a", PageSize: 50, PageToken: "x"}) {
		t.Errorf("page size or token changed the query")
	}
	tok := encodePageToken(q, "a/j-5")
	if after, errs := decodePageToken(tok, q); len(errs) > 0 || after != "a/j-5" {
		t.Errorf("decodePageToken() = %q, %v", after, errs)
	}
	if _, errs := decodePageToken(tok, pageQuery(&kilnv1.ListTrainJobsRequest{Namespace: "b"})); len(errs) == 0 {
		t.Errorf("a token of another query was accepted")
	}
	if _, errs := decodePageToken("garbage!", q); len(errs) == 0 || errs[0].Field != "page_token" {
		t.Errorf("a forged token was accepted: %v", errs)
	}
}
