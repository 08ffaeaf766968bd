package crontrainjob

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kiln-ml/kiln/api/kiln/schedule"
	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
)

// The due time of a CronTrainJob: its schedule read in its time zone; the latest scheduled
// time since the last run (or since its creation), no older than startingDeadlineSeconds;
// the times missed before it, which never run; and the next scheduled time, when it is
// reconciled again. A suspended or unparsable CronTrainJob has nothing due.

// scheduleSlack is how long after a scheduled time its reconcile is asked for, so that
// the clock has surely passed it.
const scheduleSlack = 100 * time.Millisecond

// schedulePlan is what the schedule says at one instant.
type schedulePlan struct {
	// due is the scheduled time whose run is to be started (zero: none).
	due time.Time
	// missed is how many scheduled times fell due since the last run, due included.
	missed int
	// requeueAfter is when the next scheduled time falls due (0: never).
	requeueAfter time.Duration
	events       []cronEvent
}

// planSchedule works out what is due at now, and sets st's Ready condition.
func planSchedule(cj *kiln.CronTrainJob, st *kiln.CronTrainJobStatus, now time.Time) schedulePlan {
	stamp := metav1.NewTime(now.Truncate(time.Second))
	sched, err := schedule.Parse(cj.Spec.Schedule, ptr.Deref(cj.Spec.TimeZone, ""))
	if err != nil {
		// The webhook refuses such a schedule; one stored before it existed waits for a fix.
		setReady(cj, st, metav1.ConditionFalse, ReasonInvalidSchedule, fmt.Sprintf("spec.schedule or spec.timeZone: %v", err), stamp)
		return schedulePlan{}
	}
	if ptr.Deref(cj.Spec.Suspend, false) {
		setReady(cj, st, metav1.ConditionTrue, ReasonScheduleSuspended, "suspended: no new runs until it is resumed", stamp)
		return schedulePlan{}
	}

	since := cj.CreationTimestamp.Time
	if st.LastScheduleTime != nil {
		since = st.LastScheduleTime.Time
	}
	deadline := time.Duration(ptr.Deref(cj.Spec.StartingDeadlineSeconds, 0)) * time.Second
	var p schedulePlan
	p.due, p.missed, err = sched.Due(since, now, deadline)
	at := p.due.UTC().Format(time.RFC3339)
	switch {
	case err != nil:
		p.events = append(p.events, cronEvent{kind: corev1.EventTypeWarning, reason: ReasonTooManyMissed, action: actionSchedule,
			note: fmt.Sprintf("%v; running the latest, %s", err, at)})
	case p.missed > 1:
		p.events = append(p.events, cronEvent{kind: corev1.EventTypeNormal, reason: ReasonMissedSchedules, action: actionSchedule,
			note: fmt.Sprintf("%d scheduled times passed while no run could be created; running the latest, %s", p.missed, at)})
	}
	next := sched.Next(now)
	if !next.IsZero() {
		p.requeueAfter = next.Sub(now) + scheduleSlack
	}
	setReady(cj, st, metav1.ConditionTrue, ReasonScheduled, "next run at "+next.UTC().Format(time.RFC3339), stamp)
	return p
}

// countMissed counts the scheduled times missed before the due one, once per due instant.
func (r *Reconciler) countMissed(cj types.NamespacedName, p schedulePlan) {
	if p.missed > 1 && r.missed.first(cj, p.due) {
		cronMissed.Add(float64(p.missed - 1))
	}
}

// dueSeen is, per CronTrainJob, the latest due instant something was counted for.
type dueSeen struct {
	mu sync.Mutex
	m  map[types.NamespacedName]time.Time
}

// first reports whether due is new for cj, and remembers it.
func (d *dueSeen) first(cj types.NamespacedName, due time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[types.NamespacedName]time.Time{}
	}
	if d.m[cj].Equal(due) {
		return false
	}
	d.m[cj] = due
	return true
}

func (d *dueSeen) forget(cj types.NamespacedName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.m, cj)
}
