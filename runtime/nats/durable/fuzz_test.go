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

// TestDeliveryOf reads the stream sequence and delivery count from the
// reply subjects of both forms, and refuses others.
func TestDeliveryOf(t *testing.T) {
	for _, c := range []struct {
		reply string
		want  delivery
		ok    bool
	}{
		{"$JS.ACK.wizard_events_orders.billing.3.1207.900.1764720000000000000.12", delivery{seq: 1207, n: 3}, true},
		{"$JS.ACK._.ABCHASH.wizard_events_orders.billing.1.42.40.1764720000000000000.0.XyZ", delivery{seq: 42, n: 1}, true},
		{"$JS.ACK.hub.ABCHASH.wizard_events_orders.billing.2.42.40.1764720000000000000.0", delivery{seq: 42, n: 2}, true},
		{"$JS.ACK.s.c.1.2.3", delivery{}, false},
		{"$JS.ACK.a.b.s.c.1.2.3.4", delivery{}, false}, // 10 tokens
		{"$JS.NAK.s.c.1.2.3.4.5", delivery{}, false},
		{"$JS.ACK.s.c.x.2.3.4.5", delivery{}, false},
		{"$JS.ACK.s.c.1.99999999999999999999.3.4.5", delivery{}, false},
		{"", delivery{}, false},
	} {
		got, ok := deliveryOf(c.reply)
		if ok != c.ok || ok && got != c.want {
			t.Errorf("deliveryOf(%q) = %+v, %v; want %+v, %v", c.reply, got, ok, c.want, c.ok)
		}
	}
}
