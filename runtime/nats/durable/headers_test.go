package durable

import (
	"strconv"
	"strings"
	"testing"

	natsgo "github.com/nats-io/nats.go"

	"github.com/wizardmesh/wizard/runtime/pattern"
)

// TestSubjectOf checks the subject an event is stored under: the space's
// subject, then a token per pair, with what a token cannot hold (and
// '%') escaped, so that two patterns never share a subject.
func TestSubjectOf(t *testing.T) {
	const prefix = "wizard.events.orders"
	var cache subjectCache
	for _, tc := range []struct{ pattern, want string }{
		{"role:order,event:placed", "wizard.events.orders.event:placed.role:order"},
		{"a:1.5,b:*,c:>", "wizard.events.orders.a:1%2E5.b:%2A.c:%3E"},
		{"a:100%", "wizard.events.orders.a:100%25"},
		{"a:x y,b:\x7f!~", "wizard.events.orders.a:x%20y.b:%7F!~"},
	} {
		p, err := pattern.Parse(tc.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := subjectOf(prefix, p); got != tc.want {
			t.Errorf("subjectOf(%s) = %q; want %q", tc.pattern, got, tc.want)
		}
		if err := checkSubject(subjectOf(prefix, p)); err != nil {
			t.Errorf("subjectOf(%s): %v", tc.pattern, err)
		}
		// The cache answers the same, the first time and the next.
		for range 2 {
			if got, err := cache.of(prefix, tc.pattern); got != tc.want || err != nil {
				t.Errorf("cache.of(%s) = %q, %v; want %q", tc.pattern, got, err, tc.want)
			}
		}
	}
	if got := subjectOf(prefix, pattern.Pattern{}); got != "wizard.events.orders._" {
		t.Errorf("subjectOf(no pairs) = %q", got)
	}
	if _, err := cache.of(prefix, "role"); err == nil {
		t.Error(`cache.of("role"): no error for a pattern without a value`)
	}
	// The cache keeps at most maxSubjects patterns, and starts again.
	for i := range maxSubjects + 1 {
		if _, err := cache.of(prefix, "n:"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
		if n := len(cache.m); n > maxSubjects {
			t.Fatalf("%d subjects cached; at most %d", n, maxSubjects)
		}
	}
}

// TestEscapeTokenBounds: every byte a token cannot hold is escaped, and
// every other byte is kept, at the bounds of the ranges.
func TestEscapeTokenBounds(t *testing.T) {
	for c := 0; c < 256; c++ {
		var b strings.Builder
		escapeToken(&b, string([]byte{byte(c)}))
		escaped := c <= ' ' || c == 0x7f || strings.ContainsRune(".*>%", rune(c))
		if got := b.Len() == 3 && b.String()[0] == '%'; got != escaped {
			t.Errorf("byte %#x: escaped to %q", c, b.String())
		}
	}
}

// TestCheckSubject checks the subjects refused as a space's subject.
func TestCheckSubject(t *testing.T) {
	for s, ok := range map[string]bool{
		"wizard.events.x": true, "a": true, "": false, "a..b": false, "a.": false, ".a": false,
		"a.*": false, "a.>": false, "a b": false, "a\tb": false, "a\rb": false, "a\nb": false,
	} {
		if err := checkSubject(s); (err == nil) != ok {
			t.Errorf("checkSubject(%q) = %v; want ok %v", s, err, ok)
		}
	}
}

// TestCheckSpace checks event space names: 1 to 64 letters, digits, '-'
// and '_', each class's bounds included.
func TestCheckSpace(t *testing.T) {
	for s, ok := range map[string]bool{
		"orders": true, "aAzZ09-_": true, strings.Repeat("x", 64): true,
		"": false, strings.Repeat("x", 65): false, "a.b": false, "a b": false, "é": false,
		"`": false, "{": false, "@": false, "[": false, "/": false, ":": false,
	} {
		if err := checkSpace(s); (err == nil) != ok {
			t.Errorf("checkSpace(%q) = %v; want ok %v", s, err, ok)
		}
	}
}

// TestEventOfErrors checks that each malformed header is refused with
// an error naming it.
func TestEventOfErrors(t *testing.T) {
	good := func() natsgo.Header {
		h := natsgo.Header{}
		h.Set(headerPattern, "role:a")
		h.Set(headerCodec, "2")
		return h
	}
	h := good()
	h[headerMeta] = []string{"a%20b=c%3Dd", "x="}
	ev, err := eventOf(h, []byte("p"))
	if err != nil || ev.Pattern != "role:a" || ev.Codec != 2 || string(ev.Payload) != "p" || len(ev.Meta) != 2 ||
		ev.Meta[0] != [2]string{"a b", "c=d"} || ev.Meta[1] != [2]string{"x", ""} {
		t.Fatalf("eventOf = %+v, %v", ev, err)
	}
	for name, tc := range map[string]struct {
		set  func(natsgo.Header)
		want string
	}{
		"no pattern": {func(h natsgo.Header) { h.Del(headerPattern) }, "no Wizard-Pattern header"},
		"codec":      {func(h natsgo.Header) { h.Set(headerCodec, "256") }, "header Wizard-Codec"},
		"no codec":   {func(h natsgo.Header) { h.Del(headerCodec) }, "header Wizard-Codec"},
		"meta":       {func(h natsgo.Header) { h[headerMeta] = []string{"novalue"} }, `"novalue" is not key=value`},
		"meta key":   {func(h natsgo.Header) { h[headerMeta] = []string{"%zz=v"} }, "header Wizard-Meta"},
		"meta value": {func(h natsgo.Header) { h[headerMeta] = []string{"k=%zz"} }, "header Wizard-Meta"},
	} {
		h := good()
		tc.set(h)
		if _, err := eventOf(h, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: eventOf: %v; want an error with %q", name, err, tc.want)
		}
	}
}
