package runtime

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// retryBudget bounds the retries of calls that may have run (idempotent
// calls whose connection was lost): every remote call adds a tenth of a
// token, such a retry takes one whole token, and the bucket holds at most
// ten, so they stay within about 10% of calls plus a burst of ten. Calls
// refused by their target or never sent go to the next target without
// it: they cost their target nothing, and each target is tried once.
type retryBudget struct {
	milli atomic.Int64 // thousandths of a token
}

const (
	budgetDeposit = 100
	budgetCost    = 1000
	budgetCap     = 10 * budgetCost
)

func newRetryBudget() *retryBudget {
	b := new(retryBudget)
	b.milli.Store(budgetCap)
	return b
}

func (b *retryBudget) deposit() {
	if b.milli.Load() < budgetCap {
		b.milli.Add(budgetDeposit)
	}
}

// refund gives back a withdrawal that paid for no retry.
func (b *retryBudget) refund() { b.milli.Add(budgetCost) }

// withdraw takes the cost of one retry, or reports false.
func (b *retryBudget) withdraw() bool {
	for {
		v := b.milli.Load()
		if v < budgetCost {
			return false
		}
		if b.milli.CompareAndSwap(v, v-budgetCost) {
			return true
		}
	}
}

// retryBackoff waits before the retry after attempt: full jitter over an
// exponential bound (2ms, 4ms, … 100ms). It reports false when ctx ends
// first.
func (n *Node) retryBackoff(ctx context.Context, attempt int) bool {
	bound := min(2*time.Millisecond<<min(attempt, 6), 100*time.Millisecond)
	t := time.NewTimer(rand.N(bound) + 1)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
