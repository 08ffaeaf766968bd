// Package schedule is the arithmetic of CronTrainJob schedules, with CronJob's meaning:
// standard five-field cron expressions and the @yearly/@monthly/@weekly/@daily/@hourly
// macros, evaluated in an IANA time zone, and the most recent due time since the last run
// (missed times while the operator was down run at most once, the latest only). It holds
// no timers and reads no clock: callers pass the time. (A run's name comes from its
// scheduled time: kiln.dev/v1alpha1's RunName.)
package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"
	// The IANA time zone database, built in: Kiln's images have no /usr/share/zoneinfo, and
	// a schedule's time zone must read the same in the operator, the API server and a test.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
)

// macros are the @-names a schedule may use (CronJob's), with what they mean.
var macros = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

// Schedule is a parsed schedule in its time zone.
type Schedule struct {
	spec cron.Schedule
	loc  *time.Location
}

// Parse parses a cron expression (minute hour day-of-month month day-of-week, or a macro)
// in the IANA time zone timeZone (empty: UTC). Its errors say what to write instead.
func Parse(expr, timeZone string) (*Schedule, error) {
	expr = strings.TrimSpace(expr)
	loc := time.UTC
	if timeZone != "" {
		var err error
		if loc, err = time.LoadLocation(timeZone); err != nil || strings.EqualFold(timeZone, "local") {
			return nil, fmt.Errorf("unknown time zone %q: use an IANA name such as Europe/Berlin or America/New_York", timeZone)
		}
	}
	switch {
	case expr == "":
		return nil, errors.New(`empty: write a cron expression such as "0 2 * * 0" (Sundays at 02:00) or a macro such as @daily`)
	case strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ="):
		return nil, errors.New("a time zone inside the schedule is not supported: set spec.timeZone instead")
	case strings.HasPrefix(expr, "@every"):
		return nil, errors.New(`@every is not supported: write a cron expression, e.g. "0 */6 * * *" for every 6 hours`)
	case strings.HasPrefix(expr, "@"):
		m, ok := macros[expr]
		if !ok {
			return nil, fmt.Errorf("unknown macro %q: use @yearly, @monthly, @weekly, @daily or @hourly", expr)
		}
		expr = m
	}
	if n := len(strings.Fields(expr)); n != 5 {
		return nil, fmt.Errorf("%q has %d fields: want 5 (minute hour day-of-month month day-of-week), e.g. \"0 2 * * 0\"", expr, n)
	}
	spec, err := cron.ParseStandard(expr)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", expr, err)
	}
	return &Schedule{spec: spec, loc: loc}, nil
}

// Next is the first scheduled time after t (zero when there is none in five years, e.g.
// "0 0 30 2 *"). In the night a clock is set back, a wall-clock time happens twice; it is
// scheduled once, the first time, as cron does.
func (s *Schedule) Next(t time.Time) time.Time {
	n := s.spec.Next(t.In(s.loc))
	for _, d := range []time.Duration{30 * time.Minute, time.Hour} {
		if !n.IsZero() && sameWallClock(n.Add(-d).In(s.loc), n) {
			return s.Next(n)
		}
	}
	return n
}

func sameWallClock(a, b time.Time) bool {
	return a.Year() == b.Year() && a.YearDay() == b.YearDay() && a.Hour() == b.Hour() && a.Minute() == b.Minute()
}

// maxMissed bounds the walk over missed times: past it, the schedule is too dense for the
// time the controller was away (CronJob stops at 100 too) and Due says so.
const maxMissed = 100

// ErrTooManyMissed means more than 100 times were missed; Due still returns the latest.
var ErrTooManyMissed = errors.New("more than 100 scheduled times were missed: check the operator's clock, or set startingDeadlineSeconds")

// Due returns the most recent scheduled time in (since, now], and how many scheduled times
// fell in that window (only the latest runs; the others are missed). since is the last
// scheduled time that ran, else when the schedule was created; a startingDeadline > 0 moves
// it to now-startingDeadline when that is later, so that times older than the deadline are
// neither run nor counted. A zero time means nothing is due.
func (s *Schedule) Due(since, now time.Time, startingDeadline time.Duration) (time.Time, int, error) {
	if startingDeadline > 0 {
		if floor := now.Add(-startingDeadline); floor.After(since) {
			since = floor
		}
	}
	var last time.Time
	n := 0
	for t := s.Next(since); !t.IsZero() && !t.After(now); t = s.Next(t) {
		last = t
		n++
		if n > maxMissed {
			// Jump to the end: the latest time is what runs.
			for u := s.Next(t); !u.IsZero() && !u.After(now); u = s.Next(u) {
				last = u
			}
			return last, n, ErrTooManyMissed
		}
	}
	return last, n, nil
}
