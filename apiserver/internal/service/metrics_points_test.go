package service

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/utils/ptr"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

func history(points ...[2]int64) *kilnv1.GetTrainJobMetricsResponse {
	s := &kilnv1.MetricSeries{Name: "loss"}
	for _, p := range points {
		s.Points = append(s.Points, &kilnv1.MetricPoint{Time: timestamppb.New(time.Unix(p[0], 0)), Step: ptr.To(p[1]), Value: 1})
	}
	return &kilnv1.GetTrainJobMetricsResponse{Series: []*kilnv1.MetricSeries{s}}
}

func steps(series []*kilnv1.MetricSeries) []int64 {
	var out []int64
	for _, s := range series {
		for _, p := range s.GetPoints() {
			out = append(out, p.GetStep())
		}
	}
	return out
}

// The history read again sends only what was not sent, even reports of the same second
// (coalesced into one status write, kept apart in the history).
func TestNewerPointsSendsEachPointOnce(t *testing.T) {
	sent := map[string]pointKey{}
	if got := steps(newerPoints(history([2]int64{100, 1}), sent)); len(got) != 1 || got[0] != 1 {
		t.Fatalf("first read: %v", got)
	}
	got := steps(newerPoints(history([2]int64{100, 1}, [2]int64{100, 2}, [2]int64{100, 3}, [2]int64{101, 4}), sent))
	if len(got) != 3 || got[0] != 2 || got[2] != 4 {
		t.Fatalf("second read: %v, want steps 2, 3, 4", got)
	}
	if got := newerPoints(history([2]int64{100, 1}, [2]int64{101, 4}), sent); len(got) != 0 {
		t.Fatalf("nothing new: %v", got)
	}
}
