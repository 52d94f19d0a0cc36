package patrun

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// shuffledKeys returns a pattern of n distinct keys in a shuffled order (a
// sorted input would flatter a sort), each with a short value, and one
// of its keys.
func shuffledKeys(n int) (pattern, key string) {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%06d:%d", i, i%10)
	}
	rand.New(rand.NewPCG(uint64(n), 7)).Shuffle(n, func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	return strings.Join(keys, ","), keys[n/2][:strings.IndexByte(keys[n/2], ':')]
}

// BenchmarkParsePattern parses patterns of 10, 1,000 and 40,000 keys: the
// time per key stays about flat (n log n), where a parser that compares
// every key with every other grows with n.
func BenchmarkParsePattern(b *testing.B) {
	for _, n := range []int{10, 1000, 40000} {
		s, _ := shuffledKeys(n)
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				if _, err := Parse(s); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/key")
		})
	}
}

// TestParsePattern_Linear bounds the cost of parsing, not only its
// result: the time per key at 64,000 keys is at most 8 times the time
// per key at 1,000. An n log n parser stays near 1.6 times; a parser
// quadratic in the keys is at 64 times. Both sizes are timed in the
// same process, interleaved, taking the fastest of several runs, so a
// slower machine, the race detector or a busy neighbour slow both alike
// and a burst of load on one run does not count.
func TestParsePattern_Linear(t *testing.T) {
	small, _ := shuffledKeys(1000)
	big, dup := shuffledKeys(64000)
	const reps = 64 // the small pattern's runs, to time about as many keys as one big run
	timeParse := func(s string, reps int) time.Duration {
		runtime.GC()
		start := time.Now()
		for range reps {
			if _, err := Parse(s); err != nil {
				t.Fatal(err)
			}
		}
		return time.Since(start)
	}
	var tSmall, tBig time.Duration
	deadline := time.Now().Add(10 * time.Second) // a quadratic parser needs no five rounds to show
	for i := 0; i < 5 && time.Now().Before(deadline); i++ {
		s, b := timeParse(small, reps), timeParse(big, 1)
		if i == 0 || s < tSmall {
			tSmall = s
		}
		if i == 0 || b < tBig {
			tBig = b
		}
	}
	ratio := float64(tBig) / float64(tSmall) // per key: both timed about 64,000 keys
	t.Logf("per key: %v at 1,000 keys, %v at 64,000 keys (ratio %.2f)", tSmall/(reps*1000), tBig/64000, ratio)
	if ratio > 8 {
		t.Errorf("parsing 64,000 keys costs %.1f times as much per key as 1,000 keys (%v against %v for 64 patterns of 1,000); want at most 8", ratio, tBig, tSmall)
	}

	// The duplicate found at that size is still the first one.
	s := big + "," + dup + ":x," + dup + ":y"
	_, err := Parse(s)
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("a duplicate key after 64,000 keys: %v, want a *ParseError", err)
	}
	if want := len(big) + 1; pe.Pos != want || !strings.Contains(pe.Reason, "duplicate key") {
		t.Errorf("ParseError at %d (%s), want the duplicate key at %d", pe.Pos, pe.Reason, want)
	}
}

// TestParsePattern_FirstDuplicate checks, against comparing every key
// with every earlier one, that the duplicate reported is the first in
// the string, with few keys and with enough to be sorted, and that it
// comes before anything wrong further on.
func TestParsePattern_FirstDuplicate(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{2, 5, 8, 9, 12, 40, 300} {
		for range 50 {
			var b strings.Builder
			var starts []int
			var keys []string
			for i := range n {
				if i > 0 {
					b.WriteString(", ")
				}
				starts = append(starts, b.Len())
				k := fmt.Sprintf("k%d", rng.IntN(n*2)) // repeats are likely
				if rng.IntN(4) == 0 {
					k += "$" // dropped keys count too
				}
				keys = append(keys, k)
				fmt.Fprintf(&b, "%s:%d", k, i)
			}
			want := -1
		oracle:
			for i := range keys {
				for j := range i {
					if keys[i] == keys[j] {
						want = starts[i]
						break oracle
					}
				}
			}
			for _, tail := range []string{"", ",", ", :1", ",x"} {
				s := b.String() + tail
				_, err := Parse(s)
				var pe *ParseError
				switch {
				case want < 0 && tail == "":
					if err != nil {
						t.Fatalf("Parse(%q): %v, want no error", s, err)
					}
				case want < 0:
					if !errors.As(err, &pe) || strings.Contains(pe.Reason, "duplicate") {
						t.Fatalf("Parse(%q): %v, want the error of the tail %q", s, err, tail)
					}
				default:
					if !errors.As(err, &pe) || pe.Pos != want || !strings.Contains(pe.Reason, "duplicate key") {
						t.Fatalf("Parse(%q): %v, want the duplicate key at %d", s, err, want)
					}
				}
			}
		}
	}
}

// TestParsePattern_KeepsOnlyCanonical: a parsed pattern holds no string
// but its canonical form (the input itself when it is canonical), so
// what it costs does not depend on what it was parsed from.
func TestParsePattern_KeepsOnlyCanonical(t *testing.T) {
	within := func(s, in string) bool {
		if len(s) == 0 {
			return true
		}
		p, start := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(in)))
		return p >= start && p+uintptr(len(s)) <= start+uintptr(len(in))
	}
	for _, s := range []string{
		"a:1,b:2",
		" b : 2 ,\ta:1 ",
		"role:math,cmd:sum",
		`a:"x,y",b:"say \"hi\"",c:" pad "`,
		"a:1.0,b:1e3,c:-0",
		`a:x\y`,
		"a:null,b$:1,c:2",
	} {
		input := strings.Clone(s)
		p, err := Parse(input)
		if err != nil {
			t.Fatalf("Parse(%q): %v", s, err)
		}
		str := p.String()
		if str == input && !within(str, input) {
			t.Errorf("Parse(%q): a canonical input is copied", s)
		}
		for _, pr := range p.Pairs() {
			if !within(pr.Key, str) {
				t.Errorf("Parse(%q): key %q is not in the canonical form", s, pr.Key)
			}
			if !within(pr.Value, str) && (str != input && within(pr.Value, input)) {
				t.Errorf("Parse(%q): value %q points into the input", s, pr.Value)
			}
		}
	}
}
