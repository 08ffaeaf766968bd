package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func at(t *testing.T, loc, s string) time.Time {
	t.Helper()
	l, err := time.LoadLocation(loc)
	if err != nil {
		t.Fatal(err)
	}
	v, err := time.ParseInLocation("2006-01-02 15:04", s, l)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestNext(t *testing.T) {
	for name, tc := range map[string]struct {
		expr, zone, after, want string
	}{
		"weekly retrain, Sunday 02:00, UTC": {"0 2 * * 0", "", "2026-11-24 10:00", "2026-11-29 02:00"},
		"in Berlin":                         {"0 2 * * 0", "Europe/Berlin", "2026-11-24 10:00", "2026-11-29 02:00"},
		"in New York":                       {"0 2 * * 0", "America/New_York", "2026-11-24 10:00", "2026-11-29 02:00"},
		"@daily is midnight":                {"@daily", "Asia/Tokyo", "2026-11-24 10:00", "2026-11-25 00:00"},
		"@hourly":                           {"@hourly", "", "2026-11-24 10:00", "2026-11-24 11:00"},
		"@weekly is Sunday midnight":        {"@weekly", "", "2026-11-24 10:00", "2026-11-29 00:00"},
		"@monthly":                          {"@monthly", "", "2026-11-24 10:00", "2026-12-01 00:00"},
		"@yearly":                           {"@yearly", "", "2026-11-24 10:00", "2027-01-01 00:00"},
		"every 15 minutes":                  {"*/15 * * * *", "", "2026-11-24 10:07", "2026-11-24 10:15"},
		"exactly at a time is the next one": {"0 2 * * *", "", "2026-11-24 02:00", "2026-11-25 02:00"},
		"weekdays":                          {"0 9 * * 1-5", "", "2026-11-27 10:00", "2026-11-30 09:00"},
		"day-of-month or day-of-week (cron's or)": {"0 0 1 * 1", "", "2026-11-24 10:00", "2026-11-30 00:00"},
		// Spring forward in Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST, 02:30 never
		// happens that day, and the run is the next day's (as CronJob, with the same library).
		"spring forward skips the missing time": {"30 2 * * *", "Europe/Berlin", "2026-03-28 12:00", "2026-03-30 02:30"},
		"spring forward, the hour after":        {"30 3 * * *", "Europe/Berlin", "2026-03-28 12:00", "2026-03-29 03:30"},
	} {
		t.Run(name, func(t *testing.T) {
			zone := tc.zone
			if zone == "" {
				zone = "UTC"
			}
			s, err := Parse(tc.expr, tc.zone)
			if err != nil {
				t.Fatal(err)
			}
			got := s.Next(at(t, zone, tc.after))
			if want := at(t, zone, tc.want); !got.Equal(want) {
				t.Errorf("Next = %s, want %s", got, want)
			}
		})
	}
}

func TestFallBackRunsOnce(t *testing.T) {
	s, err := Parse("30 2 * * *", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	// Fall back in Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET, 02:30 happens twice;
	// the run is the first one only.
	first := s.Next(at(t, "Europe/Berlin", "2026-10-24 12:00"))
	if want := time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC); !first.Equal(want) {
		t.Errorf("first run %s, want 02:30 CEST (%s)", first, want)
	}
	second := s.Next(first)
	if want := at(t, "Europe/Berlin", "2026-10-26 02:30"); !second.Equal(want) {
		t.Errorf("after %s (%s UTC) the next run is %s, want %s: 02:30 must not run again at 02:30 CET",
			first, first.UTC().Format(time.TimeOnly), second, want)
	}
	if d := second.Sub(first); d != 25*time.Hour {
		t.Errorf("%s between the two runs, want 25h (the night is an hour longer)", d)
	}
}

func TestParseErrors(t *testing.T) {
	for expr, want := range map[string]string{
		"":                   `empty: write a cron expression such as "0 2 * * 0"`,
		"0 2 * *":            `has 4 fields: want 5 (minute hour day-of-month month day-of-week)`,
		"0 0 2 * * 0":        `has 6 fields: want 5`,
		"61 2 * * *":         `"61 2 * * *": end of range (61) above maximum (59)`,
		"0 2 * * Sun-Funday": `"0 2 * * Sun-Funday"`,
		"@fortnightly":       `unknown macro "@fortnightly": use @yearly, @monthly, @weekly, @daily or @hourly`,
		"@every 1h":          `@every is not supported: write a cron expression`,
		"TZ=UTC 0 2 * * *":   `set spec.timeZone instead`,
		"CRON_TZ=UTC":        `set spec.timeZone instead`,
	} {
		if _, err := Parse(expr, ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error saying %q", expr, err, want)
		}
	}
	for _, zone := range []string{"Mars/Olympus_Mons", "Local", "CEST"} {
		if _, err := Parse("0 2 * * 0", zone); err == nil || !strings.Contains(err.Error(), "use an IANA name such as Europe/Berlin") {
			t.Errorf("Parse with time zone %q = %v, want an unknown time zone", zone, err)
		}
	}
}

func TestDue(t *testing.T) {
	hourly, err := Parse("0 * * * *", "")
	if err != nil {
		t.Fatal(err)
	}
	u := func(s string) time.Time { return at(t, "UTC", s) }
	for name, tc := range map[string]struct {
		since, now string
		deadline   time.Duration
		want       string // "" is nothing due
		missed     int
	}{
		"nothing due yet":                            {"2026-11-24 10:00", "2026-11-24 10:59", 0, "", 0},
		"due on the minute":                          {"2026-11-24 10:00", "2026-11-24 11:00", 0, "2026-11-24 11:00", 1},
		"due, a little late":                         {"2026-11-24 10:00", "2026-11-24 11:03", 0, "2026-11-24 11:00", 1},
		"operator down for 3 hours: the latest runs": {"2026-11-24 07:00", "2026-11-24 10:20", 0, "2026-11-24 10:00", 3},
		"within the starting deadline":               {"2026-11-24 09:00", "2026-11-24 10:04", 5 * time.Minute, "2026-11-24 10:00", 1},
		"past the starting deadline: not run":        {"2026-11-24 09:00", "2026-11-24 10:06", 5 * time.Minute, "", 0},
		"the deadline also bounds the missed count":  {"2026-11-20 00:00", "2026-11-24 10:30", time.Hour, "2026-11-24 10:00", 1},
	} {
		t.Run(name, func(t *testing.T) {
			got, n, err := hourly.Due(u(tc.since), u(tc.now), tc.deadline)
			if err != nil {
				t.Fatal(err)
			}
			var want time.Time
			if tc.want != "" {
				want = u(tc.want)
			}
			if !got.Equal(want) || n != tc.missed {
				t.Errorf("Due = %s, %d; want %s, %d", got, n, want, tc.missed)
			}
		})
	}
	// Away for a week on a schedule of every minute: the latest time, and an error to report.
	everyMinute, _ := Parse("* * * * *", "")
	got, n, err := everyMinute.Due(u("2026-11-17 10:00"), u("2026-11-24 10:00"), 0)
	if !errors.Is(err, ErrTooManyMissed) || !got.Equal(u("2026-11-24 10:00")) || n <= maxMissed {
		t.Errorf("Due after a week = %s, %d, %v", got, n, err)
	}
}
