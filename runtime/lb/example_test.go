package lb_test

import (
	"fmt"

	"github.com/wizardmesh/wizard/runtime/lb"
)

// A ring skips targets whose circuit is open; the breaker's permit taken
// by Skip is given back when the call is over.
func Example() {
	breakers, err := lb.NewBreakers[string](lb.WithFailureThreshold(2, 2))
	if err != nil {
		panic(err)
	}
	ring := lb.NewRing[string]()
	ring.Add("10.0.0.1:7000", 2) // picked twice per round
	ring.Add("10.0.0.2:7000", 1)
	ring.Add("10.0.0.3:7000", 1)

	call := func(fail bool) string {
		t, ok := ring.Pick("", breakers.Skip)
		if !ok {
			return "no target"
		}
		if fail {
			breakers.Get(t).Failure()
		} else {
			breakers.Get(t).Success()
		}
		return t
	}
	for range 4 {
		fmt.Println(call(false))
	}
	// 10.0.0.1 fails twice in a row: its circuit opens.
	fmt.Println(call(true))
	fmt.Println(call(true))
	for range 3 {
		fmt.Println(call(false))
	}
	// Output:
	// 10.0.0.1:7000
	// 10.0.0.1:7000
	// 10.0.0.2:7000
	// 10.0.0.3:7000
	// 10.0.0.1:7000
	// 10.0.0.1:7000
	// 10.0.0.2:7000
	// 10.0.0.3:7000
	// 10.0.0.2:7000
}

// Consistent hashing sends a key to the same target while the set is
// unchanged.
func ExampleConsistentHash() {
	ch, err := lb.NewConsistentHash(func(addr string) string { return addr }, 0)
	if err != nil {
		panic(err)
	}
	ch.Add("10.0.0.1:7000", 1)
	ch.Add("10.0.0.2:7000", 1)
	ch.Add("10.0.0.3:7000", 1)
	a, _ := ch.Pick("user-42", nil)
	b, _ := ch.Pick("user-42", nil)
	fmt.Println(a == b)
	// Output: true
}
