package jobflags

import (
	"errors"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"90": 90 * time.Second, "45m": 45 * time.Minute, "2d": 48 * time.Hour, "1d12h": 36 * time.Hour, "8h": 8 * time.Hour} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

func TestParseDurationOutOfRange(t *testing.T) {
	for in, wantTooLong := range map[string]bool{
		"9223372037": true, "99999999999999999999": true, "106752d": true, "2562048h": true, "106751d24h": true,
		"-9223372037": false, "-106752d": false, "-2562048h": false, "8x": false, "1d8x": false,
	} {
		_, err := ParseDuration(in)
		if err == nil || errors.Is(err, errTooLong) != wantTooLong {
			t.Errorf("ParseDuration(%q) = %v; want an error, too long: %v", in, err, wantTooLong)
		}
	}
}
