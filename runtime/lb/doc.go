// Package lb holds wizard's balancers and per-target circuit breakers.
//
// A balancer chooses, among the targets that serve a pattern, the one a
// call goes to. Every balancer here implements [Balancer] over any
// comparable target type, so a runtime can balance over its own peer type.
// A node's default is none of them: it is the runtime's latency-aware power
// of two choices (see runtime.WithBalancer); these are the alternatives a
// node takes with WithBalancer:
//
//   - [Ring]: MicroWizard's weighted round robin over a
//     linked ring, the weight an execution counter (the same target is
//     picked weight times in a row). Pick and Remove are O(1).
//   - [Random]: uniform, or proportional to weight.
//   - [LeastInFlight]: the power of two choices over in-flight counts.
//   - [ConsistentHash]: sticky routing on a string key (a message field):
//     the same key goes to the same target while the set is unchanged, and
//     a change moves only the keys of the target that came or went.
//
// [NewConsistentHash] and [NewBreakers] check their arguments and return
// an error ("wizard: lb: ...") that names the bad one; [NewRing],
// [NewRandom] and [NewLeastInFlight] have nothing that can be wrong and
// return the balancer alone.
//
// # Picking
//
// [Balancer.Pick] takes a skip function for targets that must not get
// this call, typically those whose circuit is open. Every balancer keeps
// one contract with it: skip is never called again after it reports false,
// and the target it reported false for is the one Pick returns. So a skip
// function may take something for the target it accepts; [Breakers.Skip]
// takes the breaker's permit, which the caller gives back with
// [Breaker.Success] or [Breaker.Failure] once the call is over:
//
//	t, ok := balancer.Pick(key, breakers.Skip)
//	if !ok {
//		// no target, or every circuit open
//	}
//	err := call(ctx, t)
//	balancer.Done(t)
//	if err != nil { breakers.Get(t).Failure() } else { breakers.Get(t).Success() }
//
// Pick reports false only when there is no target or skip rejects them
// all. Picks allocate nothing.
//
// # Weights
//
// Each balancer reads a target's weight its own way (turn length,
// probability, capacity, share of the hash ring). A weight below 1 counts
// as 1: a target is drained through skip or removed, never by weight.
//
// # Breakers
//
// [Breakers] keeps one failsafe-go circuit breaker per target, made on
// first use and dropped with [Breakers.Drop] when the target leaves. A
// breaker opens after a configurable share of failures (overload answers,
// transport errors, timeouts are failures; the caller decides), refuses
// calls for a jittered delay, then lets a few trial calls through
// (half-open) and closes again after enough of them succeed. The hot path
// uses failsafe-go's permit API and allocates nothing.
package lb
