package mux

import (
	"context"
	"sync"
	"testing"
)

// BenchmarkSpread is many connections with one caller each, as many
// client nodes of one server are: no frame shares a read or a write.
func BenchmarkSpread(b *testing.B) {
	const conns = 100
	s := listen(b, benchHandler, Options{})
	cls := make([]*Client, conns)
	for i := range cls {
		cls[i] = s.dial(b, Options{})
	}
	req := benchRequest()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	per := b.N/conns + 1
	for _, cl := range cls {
		wg.Go(func() {
			for range per {
				if _, err := cl.Call(ctx, req); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
