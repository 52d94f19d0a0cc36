package microwizard_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/microwizard"
)

// TestBadInputFromNode: a Node.js peer sends an unknown kind (ignored,
// as MicroWizard does: the next call on the connection is answered),
// garbage (the connection ends, as MicroWizard's parser ends it), an
// oversized line (its call answered resource_exhausted, the next call
// too), a ping ({"h":2}), a bad pattern and args that are not
// an object (answered invalid_argument; answers may come in any order,
// as MicroWizard's do); the node serves on.
func TestBadInputFromNode(t *testing.T) {
	needNode(t, "microwizard")
	leak.Check(t)
	n := newNode(t, newTransport(t, microwizard.WithMaxLine(64<<10)))
	mustAdd(t, n, "role:go,cmd:sum", func(ctx context.Context, req runtime.Request) (any, error) {
		a, _ := req.Float64("a")
		b, _ := req.Float64("b")
		return a + b, nil
	})
	_, port, _ := strings.Cut(n.Addr(), "127.0.0.1:")
	p := startNode(t, "bad-input.mjs", port)
	type answer struct {
		ID    string `json:"id"`
		Res   any    `json:"res"`
		H     int    `json:"h"`
		Error *struct {
			Message string `json:"message"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	type result struct {
		Case   string   `json:"case"`
		Got    []answer `json:"got"`
		Closed bool     `json:"closed"`
		Done   bool     `json:"done"`
	}
	got := map[string]result{}
	for {
		var r result
		p.next(t, &r)
		if r.Done {
			break
		}
		got[r.Case] = r
	}
	sum := answer{ID: "ok", Res: 2.0}
	check := func(c string, want []answer, closed bool) {
		t.Helper()
		r := got[c]
		for i := range r.Got {
			if r.Got[i].Error != nil {
				r.Got[i].Error.Message = "" // checked by code
			}
		}
		if diff := cmp.Diff(want, r.Got, cmpopts.EquateEmpty(), cmpopts.SortSlices(func(a, b answer) bool { return a.ID < b.ID })); diff != "" || r.Closed != closed {
			t.Errorf("%s: closed %v, want %v; answers (-want +got):\n%s", c, r.Closed, closed, diff)
		}
	}
	check("unknown kind, then a call", []answer{sum}, false)
	check("garbage", nil, true)
	exhausted := &struct {
		Message string `json:"message"`
		Code    string `json:"code"`
	}{Code: "resource_exhausted"}
	check("oversized", []answer{{ID: "big", Error: exhausted}, sum}, false)
	check("ping", []answer{{H: 2}}, false)
	invalid := &struct {
		Message string `json:"message"`
		Code    string `json:"code"`
	}{Code: "invalid_argument"}
	check("bad pattern", []answer{{ID: "p", Error: invalid}, sum}, false)
	check("args not an object", []answer{{ID: "n", Error: invalid}}, false)
	check("after all that", []answer{sum}, false)
}
