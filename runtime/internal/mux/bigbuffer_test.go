package mux

import "testing"

// TestBigClass checks the classes of large buffers: each holds its size,
// wastes at most an eighth, and a buffer of a class's capacity maps back to
// that class.
func TestBigClass(t *testing.T) {
	if bigBufferMin != maxPooledBuffer {
		t.Fatalf("the classes start at %d, the small pool ends at %d", bigBufferMin, maxPooledBuffer)
	}
	last := -1
	for _, n := range []int{bigBufferMin + 1, 72 << 10, 72<<10 + 1, 100 << 10, 128 << 10, 128<<10 + 1, 1 << 20, 1<<20 + 60, 4<<20 + 100, bigBufferMax} {
		i, c := bigClass(n)
		if c < n || c-n > n/8 {
			t.Errorf("bigClass(%d) = class of %d bytes: want room for %d, at most an eighth more", n, c, n)
		}
		if i < 0 || i >= len(bigBuffers) || i < last {
			t.Errorf("bigClass(%d) = index %d: out of [%d, %d)", n, i, max(last, 0), len(bigBuffers))
		}
		last = i
		if j, d := bigClass(c); j != i || d != c {
			t.Errorf("bigClass(%d) = %d, %d: want the class of %d itself (%d, %d)", c, j, d, n, i, c)
		}
	}
}

// TestBigBufferReuse checks that getBuffer serves a large frame from its
// class and that putBuffer takes it back, while buffers of other
// capacities and sizes beyond the classes are left alone.
func TestBigBufferReuse(t *testing.T) {
	p := getBuffer(1<<20 + 60)
	if _, c := bigClass(1<<20 + 60); cap(*p) != c || len(*p) != 0 {
		t.Fatalf("getBuffer(1 MiB + 60): len %d cap %d, want an empty buffer of the class's %d", len(*p), cap(*p), c)
	}
	*p = append(*p, 1, 2, 3)
	if !putBigBuffer(p) || len(*p) != 0 {
		t.Errorf("putBigBuffer of a class's buffer: not taken, or not emptied (len %d)", len(*p))
	}
	odd := make([]byte, 0, 1<<20+61)
	if putBigBuffer(&odd) {
		t.Error("putBigBuffer took a buffer whose capacity is not a class's")
	}
	huge := getBuffer(bigBufferMax + 1)
	if cap(*huge) != bigBufferMax+1 {
		t.Errorf("getBuffer beyond the classes: cap %d, want exactly %d", cap(*huge), bigBufferMax+1)
	}
	if putBigBuffer(huge) {
		t.Error("putBigBuffer took a buffer beyond the classes")
	}
}

func BenchmarkGetPutBigBuffer(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		putBuffer(getBuffer(1 << 20))
	}
}
