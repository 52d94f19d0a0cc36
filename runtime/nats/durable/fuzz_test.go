package durable

import (
	"net/url"
	"slices"
	"strconv"
	"testing"

	natsgo "github.com/nats-io/nats.go"
)

// FuzzEventOf decodes the headers of a stored event, which anyone who may
// publish on the space's subjects writes: it never panics, and metadata it
// encoded itself decodes to what it was.
func FuzzEventOf(f *testing.F) {
	f.Add("event:placed,role:order", "2", "x-trace", "t 1=%", "bad=%zz")
	f.Add("", "", "", "", "")
	f.Add("role:a", "300", "k", "v", "no equals sign")
	f.Fuzz(func(t *testing.T, pattern, codec, k, v, raw string) {
		h := natsgo.Header{}
		h.Set(headerPattern, pattern)
		h.Set(headerCodec, codec)
		h[headerMeta] = []string{url.QueryEscape(k) + "=" + url.QueryEscape(v)}
		ev, err := eventOf(h, []byte("{}"))
		c, cerr := strconv.ParseUint(codec, 10, 8)
		switch {
		case pattern == "" || cerr != nil:
			if err == nil {
				t.Fatalf("eventOf took pattern %q, codec %q", pattern, codec)
			}
		case err != nil:
			t.Fatalf("eventOf(%q, %q, %q=%q): %v", pattern, codec, k, v, err)
		case ev.Pattern != pattern || ev.Codec != uint8(c) || !slices.Equal(ev.Meta, [][2]string{{k, v}}):
			t.Fatalf("eventOf = %q %d %q; want %q %d [[%q %q]]", ev.Pattern, ev.Codec, ev.Meta, pattern, c, k, v)
		}
		// Whatever a publisher wrote, eventOf answers without panicking.
		h[headerMeta] = []string{raw}
		_, _ = eventOf(h, nil)
	})
}
