package config

import (
	"errors"
	"strconv"
	"strings"
)

// Size is a number of bytes, written in the file with a unit: 512B,
// 64KiB, 1MiB, 1GiB (powers of 1024), or kB, MB, GB (powers of 1000).
type Size int64

var sizeUnits = []struct {
	suffix string
	n      int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9},
	{"B", 1},
}

// ParseSize parses a size such as "1MiB", "64KiB" or "512B".
func ParseSize(s string) (Size, error) {
	bad := errors.New("want a size like 1MiB, 64KiB or 512B, got " + strconv.Quote(s))
	t := strings.TrimSpace(s)
	for _, u := range sizeUnits {
		num, ok := strings.CutSuffix(t, u.suffix)
		if !ok {
			continue
		}
		num = strings.TrimSpace(num)
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n < 0 || num[0] == '+' {
			return 0, bad
		}
		if n > (1<<62)/u.n {
			return 0, errors.New("size " + strconv.Quote(s) + " is too large")
		}
		return Size(n * u.n), nil
	}
	return 0, bad
}

func (z *Size) decodeScalar(text string) error {
	v, err := ParseSize(text)
	if err != nil {
		return err
	}
	*z = v
	return nil
}

// String writes the size with the largest binary unit that divides it.
func (z Size) String() string {
	n := int64(z)
	switch {
	case n != 0 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + "GiB"
	case n != 0 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "MiB"
	case n != 0 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "KiB"
	}
	return strconv.FormatInt(n, 10) + "B"
}
