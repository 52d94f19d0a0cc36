package tcp_test

import (
	"sync"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testpb"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
)

// Typed calls give their replies' records back to the connection
// (Conn.ReleaseReply) while untyped calls keep theirs: over one
// connection, with both in flight together, every typed call reads its
// own answer, and every kept Result still reads its own once all the
// calls are over (under -race: no record is written while a call reads
// it).
func TestReplyRecordsKeepTheirAnswers(t *testing.T) {
	srv := newServer(t)
	if err := testpb.RegisterMathServiceHandler(srv, transporttest.MathService{}); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, testpb.MathServiceSumPattern, srv.Addr())
	math := transporttest.MathClient(t, cl)
	type keptResult struct {
		res  runtime.Result
		want float64
	}
	const goroutines, calls = 4, 200
	kept := make([][]keptResult, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				v := float64(g*1000 + i)
				req := &testpb.SumRequest{Values: []float64{v, 1}}
				if g%2 == 0 {
					res, err := math.Sum(t.Context(), req)
					if err != nil || res.GetSum() != v+1 {
						t.Errorf("typed call for %v: %v, %v", v+1, res.GetSum(), err)
						return
					}
					continue
				}
				res, err := cl.ActE(t.Context(), testpb.MathServiceSumPattern, req)
				if err != nil {
					t.Error(err)
					return
				}
				kept[g] = append(kept[g], keptResult{res, v + 1})
			}
		})
	}
	wg.Wait()
	for _, rs := range kept {
		for _, k := range rs {
			var out testpb.SumResponse
			if err := k.res.Decode(&out); err != nil || out.GetSum() != k.want {
				t.Errorf("a kept result for %v reads %v, %v", k.want, out.GetSum(), err)
			}
		}
	}
}
