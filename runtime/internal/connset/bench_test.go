package connset

import (
	"fmt"
	"net/netip"
	"testing"
)

// BenchmarkAddFull admits connections from new IPs into a set full of
// busy connections from five IPs: each admission closes one of the IP
// with the most, in time that does not grow with the set.
func BenchmarkAddFull(b *testing.B) {
	for _, size := range []int{1 << 10, 1 << 16} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			s := New(Limits{Max: size, MaxPerIP: size})
			defer s.Close()
			nop := func(error) {}
			for i := range size {
				c, err := s.Add(ip(1+i%5), nop, func() {})
				if err != nil {
					b.Fatal(err)
				}
				c.Begin()
			}
			b.ReportAllocs()
			i := uint32(0)
			for b.Loop() {
				i++
				addr := netip.AddrFrom4([4]byte{11, byte(i >> 16), byte(i >> 8), byte(i)})
				c, err := s.Add(addr, nop, func() {})
				if err != nil {
					b.Fatal(err)
				}
				c.Begin()
				c.End()
				c.Remove()
				// Give the heavy IPs their connection back, busy.
				if c, err = s.Add(ip(1+int(i)%5), nop, func() {}); err == nil {
					c.Begin()
				}
			}
		})
	}
}
