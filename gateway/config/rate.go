package config

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// Rate is a number of events per period, written COUNT/UNIT: 100/s,
// 6000/m, 10/h, or with a Go duration for the period (5/10s).
type Rate struct {
	// Count events are allowed per Per.
	Count int
	// Per is the period, positive.
	Per time.Duration
}

// ParseRate parses a rate such as "100/s" or "6000/m".
func ParseRate(s string) (Rate, error) {
	bad := errors.New("want a rate like 100/s or 6000/m, got " + strconv.Quote(s))
	num, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Rate{}, bad
	}
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || n <= 0 || strings.HasPrefix(strings.TrimSpace(num), "+") {
		return Rate{}, bad
	}
	var per time.Duration
	switch unit = strings.TrimSpace(unit); unit {
	case "s":
		per = time.Second
	case "m":
		per = time.Minute
	case "h":
		per = time.Hour
	default:
		if per, err = time.ParseDuration(unit); err != nil || per <= 0 {
			return Rate{}, bad
		}
	}
	return Rate{Count: n, Per: per}, nil
}

func (r *Rate) decodeScalar(text string) error {
	v, err := ParseRate(text)
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// PerSecond returns the rate in events per second (for a token bucket's
// refill).
func (r Rate) PerSecond() float64 {
	if r.Per <= 0 {
		return 0
	}
	return float64(r.Count) / r.Per.Seconds()
}

// String writes the rate as the file does.
func (r Rate) String() string {
	switch r.Per {
	case time.Second:
		return strconv.Itoa(r.Count) + "/s"
	case time.Minute:
		return strconv.Itoa(r.Count) + "/m"
	case time.Hour:
		return strconv.Itoa(r.Count) + "/h"
	}
	return strconv.Itoa(r.Count) + "/" + r.Per.String()
}
