package jobflags

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/kiln-ml/kiln/cli/internal/factory"
)

// seconds parses a duration flag (90s, 45m, 8h, 2d; a bare number only if 0) into whole seconds
// from minimum to maximum, the range of the field it fills; unset says what leaving the flag
// out does, for the message of a duration too long.
func seconds(flag, v string, minimum, maximum int64, unset string) (*int64, error) {
	if v == "" {
		return nil, nil
	}
	// A bare number is a guess at the unit (seconds, to a computer; minutes or hours, to
	// whoever wrote --deadline 90): only 0 means the same in every unit.
	if n, err := strconv.ParseUint(v, 10, 64); err == nil && n != 0 {
		return nil, factory.Usagef("%s %s: a number needs a unit: did you mean %ss or %sm? (units: s, m, h, d)", flag, v, v, v)
	}
	d, err := ParseDuration(v)
	if errors.Is(err, errTooLong) || (err == nil && int64(d/time.Second) > maximum) {
		return nil, factory.Usagef("%s %s is too long: the most is %dd (%d s); leave %s out %s", flag, v, maximum/secondsPerDay, maximum, flag, unset)
	}
	if err != nil || d%time.Second != 0 || int64(d/time.Second) < minimum {
		return nil, factory.Usagef("%s %q: want whole seconds of at least %d, like 90s, 45m, 8h or 2d", flag, v, minimum)
	}
	s := int64(d / time.Second)
	return &s, nil
}

const secondsPerDay = 24 * 60 * 60

// errTooLong is a duration beyond time.Duration's range (about 292 years), which would
// otherwise wrap around to a wrong one.
var errTooLong = errors.New("duration too long")

// digits are the numbers of a duration: their values decide its size, never its syntax.
var digits = regexp.MustCompile(`[0-9]+`)

// ParseDuration reads Go durations, plain seconds, and days (2d, 1d12h). A duration too long
// for time.Duration is an error wrapping errTooLong (too far below zero, an error of its own).
func ParseDuration(v string) (time.Duration, error) {
	// A number out of int64's range comes back as the extreme of its sign, out of range too.
	if n, err := strconv.ParseInt(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		return times(v, n, time.Second)
	}
	var days time.Duration
	rest := v
	if d, r, ok := strings.Cut(v, "d"); ok {
		n, err := strconv.ParseInt(d, 10, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return 0, err
		}
		if days, err = times(v, n, 24*time.Hour); err != nil || r == "" {
			return days, err
		}
		rest = r
	}
	d, err := time.ParseDuration(rest)
	if err != nil {
		// time.ParseDuration says the same of an overflow as of a typo: with every number
		// made 1, only a typo still fails.
		if _, serr := time.ParseDuration(digits.ReplaceAllString(rest, "1")); serr == nil {
			return 0, outOfRange(v, strings.HasPrefix(rest, "-"))
		}
		return 0, err
	}
	sum := days + d
	if (d > 0 && sum < days) || (d < 0 && sum > days) {
		return 0, outOfRange(v, d < 0)
	}
	return sum, nil
}

// times is n units of v, unless that is out of time.Duration's range.
func times(v string, n int64, unit time.Duration) (time.Duration, error) {
	if n > int64(math.MaxInt64/unit) || n < int64(math.MinInt64/unit) {
		return 0, outOfRange(v, n < 0)
	}
	return time.Duration(n) * unit, nil
}

func outOfRange(v string, negative bool) error {
	if negative {
		return fmt.Errorf("%s: duration too far below zero", v)
	}
	return fmt.Errorf("%s: %w", v, errTooLong)
}
