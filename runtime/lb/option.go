package lb

import (
	"errors"
	"fmt"
	"time"

	"github.com/failsafe-go/failsafe-go/circuitbreaker"
)

// Breaker defaults: open after 5 failures in a row, stay open 5 s ± 20%,
// close after one successful trial call.
const (
	DefaultFailures = 5
	DefaultDelay    = 5 * time.Second
	DefaultJitter   = 0.2
	DefaultTrials   = 1
)

// BreakerOption configures [NewBreakers].
type BreakerOption interface {
	applyBreaker(*breakerConfig) error
}

type breakerConfig struct {
	failures, window  int
	rate              float64
	minCalls          int
	period            time.Duration
	delay             time.Duration
	jitter            float64
	successes, trials int
	escape            []func(circuitbreaker.Builder[any])
}

type breakerOption func(*breakerConfig) error

func (f breakerOption) applyBreaker(c *breakerConfig) error { return f(c) }

// WithFailureThreshold opens a breaker when failures of the last window
// calls failed; window is at least failures. WithFailureThreshold(5, 5)
// (the default) opens after 5 failures in a row; (3, 10) after 3 of the
// last 10 calls. It replaces [WithFailureRate].
func WithFailureThreshold(failures, window int) BreakerOption {
	return breakerOption(func(c *breakerConfig) error {
		if failures < 1 || window < failures {
			return fmt.Errorf("wizard: lb: failure threshold %d of %d: want 1 <= failures <= window", failures, window)
		}
		c.failures, c.window, c.rate = failures, window, 0
		return nil
	})
}

// WithFailureRate opens a breaker when at least rate (in (0, 1]) of the
// calls of the last period failed, once there were at least minCalls
// calls in that period. It replaces [WithFailureThreshold].
func WithFailureRate(rate float64, minCalls int, period time.Duration) BreakerOption {
	return breakerOption(func(c *breakerConfig) error {
		if !(rate > 0 && rate <= 1) || minCalls < 1 || period <= 0 {
			return fmt.Errorf("wizard: lb: failure rate %v over %d calls in %v: want a rate in (0, 1], at least one call and a positive period", rate, minCalls, period)
		}
		c.rate, c.minCalls, c.period = rate, minCalls, period
		c.failures, c.window = 0, 0
		return nil
	})
}

// WithDelay sets how long an open breaker refuses calls before it lets a
// trial through (default 5 s), before jitter.
func WithDelay(d time.Duration) BreakerOption {
	return breakerOption(func(c *breakerConfig) error {
		if d <= 0 {
			return fmt.Errorf("wizard: lb: breaker delay %v: want a positive delay", d)
		}
		c.delay = d
		return nil
	})
}

// WithJitter varies each open delay by a random share of up to factor
// either way (default 0.2: 5 s becomes 4 to 6 s); 0 turns jitter off.
func WithJitter(factor float64) BreakerOption {
	return breakerOption(func(c *breakerConfig) error {
		if !(factor >= 0 && factor < 1) {
			return fmt.Errorf("wizard: lb: breaker jitter %v: want a factor in [0, 1)", factor)
		}
		c.jitter = factor
		return nil
	})
}

// WithSuccessThreshold sets the trial calls of a half-open breaker: it
// lets trials calls through and closes once successes of them succeed,
// or opens again as soon as that can no longer happen. The default is one
// trial, closing on its success.
func WithSuccessThreshold(successes, trials int) BreakerOption {
	return breakerOption(func(c *breakerConfig) error {
		if successes < 1 || trials < successes {
			return fmt.Errorf("wizard: lb: success threshold %d of %d: want 1 <= successes <= trials", successes, trials)
		}
		c.successes, c.trials = successes, trials
		return nil
	})
}

// WithCircuitBreaker is the escape hatch to failsafe-go: f may change the
// builder of every breaker (listeners, a delay function, failure
// conditions) after the other options have been applied.
func WithCircuitBreaker(f func(circuitbreaker.Builder[any])) BreakerOption {
	return breakerOption(func(c *breakerConfig) error {
		if f == nil {
			return errors.New("wizard: lb: nil circuit breaker function")
		}
		c.escape = append(c.escape, f)
		return nil
	})
}

func newBuilder(opts []BreakerOption) (circuitbreaker.Builder[any], error) {
	c := breakerConfig{
		failures:  DefaultFailures,
		window:    DefaultFailures,
		delay:     DefaultDelay,
		jitter:    DefaultJitter,
		successes: DefaultTrials,
		trials:    DefaultTrials,
	}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("wizard: lb: option %d of %d is nil", i+1, len(opts))
		}
		if err := o.applyBreaker(&c); err != nil {
			return nil, err
		}
	}
	b := circuitbreaker.NewBuilder[any]().
		WithDelay(c.delay).
		WithSuccessThresholdRatio(uint(c.successes), uint(c.trials))
	if c.jitter > 0 {
		b = b.WithJitterFactor(c.jitter)
	}
	if c.rate > 0 {
		b = b.WithFailureRateThreshold(c.rate, uint(c.minCalls), c.period)
	} else {
		b = b.WithFailureThresholdRatio(uint(c.failures), uint(c.window))
	}
	for _, f := range c.escape {
		f(b)
	}
	return b, nil
}
