package framework

import (
	"context"
	"fmt"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// HasCondition reports whether tj has condition t with status s and, unless reason is
// empty, that reason.
func HasCondition(tj *trainer.TrainJob, t string, s metav1.ConditionStatus, reason string) bool {
	c := meta.FindStatusCondition(tj.Status.Conditions, t)
	return c != nil && c.Status == s && (reason == "" || c.Reason == reason)
}

// WaitOption changes how WaitForCondition waits.
type WaitOption func(*waitOptions)

type waitOptions struct {
	timeout, polling time.Duration
	stopWhenFailed   bool
}

// Within waits at most d (instead of the suite's default Eventually timeout), polling
// every second, and gives up at once when the job fails (unless Failed is what it
// waits for): the waits of real processes, which take long and end for good.
func Within(d time.Duration) WaitOption {
	return func(o *waitOptions) { o.timeout, o.polling, o.stopWhenFailed = d, time.Second, true }
}

// WaitForCondition waits until the TrainJob key has condition t with status s (and reason,
// unless empty), and returns it as last read.
func WaitForCondition(ctx context.Context, c client.Client, key client.ObjectKey, t string, s metav1.ConditionStatus, reason string, opts ...WaitOption) *trainer.TrainJob {
	ginkgo.GinkgoHelper()
	var o waitOptions
	for _, opt := range opts {
		opt(&o)
	}
	var tj *trainer.TrainJob
	e := gomega.Eventually(ctx, func(g gomega.Gomega) {
		tj = &trainer.TrainJob{}
		g.Expect(c.Get(ctx, key, tj)).To(gomega.Succeed())
		if o.stopWhenFailed && t != trainer.TrainJobFailed && HasCondition(tj, trainer.TrainJobFailed, metav1.ConditionTrue, "") {
			gomega.StopTrying(fmt.Sprintf("TrainJob %s failed: %+v", key, tj.Status.Conditions)).Now()
		}
		g.Expect(HasCondition(tj, t, s, reason)).To(gomega.BeTrue(), "conditions: %+v", tj.Status.Conditions)
	})
	if o.timeout > 0 {
		e = e.WithTimeout(o.timeout)
	}
	if o.polling > 0 {
		e = e.WithPolling(o.polling)
	}
	e.Should(gomega.Succeed())
	return tj
}
