// Package ring is the MicroWizard ring: weighted round robin over a
// circular doubly-linked list of targets, with a cursor.
//
// Each target has a weight, used as an execution counter: [Ring.Pick]
// returns the target under the cursor until it has been picked weight
// times in a row, then moves the cursor to the next target and starts its
// counter afresh. Targets with weights 2 and 1 are picked A, A, B, A, A, B.
//
// Pick takes a skip function: a target it skips (an open circuit, a
// drained peer) loses the rest of its turn and the cursor moves on. Pick
// reports false only when the ring is empty or every target is skipped.
//
// # Layout
//
// Nodes live in one slice and link by index, so a walk around a large ring
// stays in a few contiguous pages; a map from target to index makes
// [Ring.Remove] and [Ring.SetWeight] O(1). Removal moves the last node of
// the slice into the freed slot. [Ring.Add] appends (amortised O(1)).
//
// # Weights
//
// A weight below 1 is clamped to 1: a target is drained with the skip
// function or removed, never by weight. There is no cap on the number of
// targets or on weights.
//
// The package imports only the standard library, so package runtime can
// use it as its default balancer; runtime/lb wraps it for users.
package ring
