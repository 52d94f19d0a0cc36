package lb

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The ring's order is tested in runtime/internal/ring; this checks the
// wrapper passes it through and ignores the key.
func TestRing(t *testing.T) {
	r := NewRing[string]()
	r.Add("a", 2)
	r.Add("b", 1)
	r.Add("c", 0)
	var got []string
	for i := range 8 {
		tg, _ := r.Pick(strings.Repeat("k", i), nil)
		got = append(got, tg)
	}
	if diff := cmp.Diff(strings.Fields("a a b c a a b c"), got); diff != "" {
		t.Errorf("picks (-want +got):\n%s", diff)
	}
	r.SetWeight("b", 3)
	var order []string
	var weights []int
	for tg, w := range r.All() {
		order, weights = append(order, tg), append(weights, w)
	}
	if diff := cmp.Diff([]string{"c", "a", "b"}, order); diff != "" { // c is under the cursor
		t.Errorf("All order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{1, 2, 3}, weights); diff != "" {
		t.Errorf("All weights (-want +got):\n%s", diff)
	}
	var zero Ring[int]
	if _, ok := zero.Pick("", nil); ok {
		t.Error("zero Ring picked a target")
	}
}
