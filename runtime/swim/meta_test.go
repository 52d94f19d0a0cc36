package swim

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/memberlist"
)

func TestMetaLimit(t *testing.T) {
	if metaMaxSize != memberlist.MetaMaxSize {
		t.Fatalf("metaMaxSize = %d, memberlist.MetaMaxSize = %d", metaMaxSize, memberlist.MetaMaxSize)
	}
	if maxMetaLen > memberlist.MetaMaxSize {
		t.Fatalf("the longest valid meta is %d bytes, over memberlist's %d", maxMetaLen, memberlist.MetaMaxSize)
	}
	longest := meta{
		Protocol:  protocolVersion,
		Addr:      strings.Repeat("a", maxAddrLen),
		Transport: strings.Repeat("t", maxTransportLen),
		Segment:   strings.Repeat("s", maxSegmentLen),
		Digest:    strings.Repeat("d", maxDigestLen),
	}
	b, err := encodeMeta(longest)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != maxMetaLen {
		t.Errorf("longest meta: %d bytes, want %d", len(b), maxMetaLen)
	}
}

func TestMetaRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		m    meta
	}{
		{"typical", meta{Protocol: 1, Addr: "10.1.2.3:7000", Transport: "tcp", Digest: "47DEQpj8HBSa-_TImW-5JA"}},
		{"ipv6 in a segment", meta{Protocol: 1, Addr: "[fd00:1234:5678:9abc:def0:1234:5678:9abc]:65535", Transport: "quic", Segment: "eu-west/payments", Digest: "x"}},
		{"unknown transport and digest", meta{Protocol: 1, Addr: "h:1"}},
		{"a caller that serves nothing", meta{Protocol: 1, Transport: "tcp", Digest: "x"}},
		{"long host name", meta{Protocol: 1, Addr: strings.Repeat("very-long-label.", 15) + "example:7000", Transport: "tcp", Digest: strings.Repeat("d", 32)}},
		{"limits", meta{Protocol: 255, Addr: strings.Repeat("a", 255), Transport: strings.Repeat("t", 32), Segment: strings.Repeat("s", 128), Digest: strings.Repeat("d", 64)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := encodeMeta(tt.m)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > memberlist.MetaMaxSize {
				t.Fatalf("%d bytes", len(b))
			}
			got, err := decodeMeta(b)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.m, got); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEncodeMetaLimits(t *testing.T) {
	ok := meta{Protocol: 1, Addr: "h:1"}
	tests := []struct {
		name string
		edit func(*meta)
		want string
	}{
		{"address", func(m *meta) { m.Addr = strings.Repeat("a", 256) }, "rpc address is 256 bytes, the limit is 255"},
		{"transport", func(m *meta) { m.Transport = strings.Repeat("t", 33) }, "transport name is 33 bytes, the limit is 32"},
		{"segment", func(m *meta) { m.Segment = strings.Repeat("s", 129) }, "segment is 129 bytes, the limit is 128"},
		{"digest", func(m *meta) { m.Digest = strings.Repeat("d", 65) }, "pattern-set digest is 65 bytes, the limit is 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := ok
			tt.edit(&m)
			b, err := encodeMeta(m)
			if err == nil || !errors.Is(err, errMeta) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("encodeMeta = %d bytes, %v; want an error containing %q", len(b), err, tt.want)
			}
		})
	}
}

func TestDecodeMetaRejects(t *testing.T) {
	good, err := encodeMeta(meta{Protocol: 1, Addr: "h:1", Transport: "tcp", Digest: "d"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "empty"},
		{"unknown layout", append([]byte{2}, good[1:]...), "unknown layout version 2"},
		{"layout only", []byte{1}, "truncated after the layout version"},
		{"no fields", []byte{1, 1}, "truncated before the rpc address"},
		{"short field", []byte{1, 1, 5, 'h', ':'}, "rpc address of 5 bytes, only 2 left"},
		{"missing digest", good[:len(good)-2], "truncated before the pattern-set digest"},
		{"trailing", append(bytes.Clone(good), 0), "1 trailing bytes"},
		{"segment over the limit", append([]byte{1, 1, 3, 'h', ':', '1', 0, 129}, make([]byte, 129+1)...), "segment is 129 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := decodeMeta(tt.b)
			if err == nil || !errors.Is(err, errMeta) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("decodeMeta = %+v, %v; want an error containing %q", m, err, tt.want)
			}
		})
	}
}

func TestRPCAddr(t *testing.T) {
	ip := net.ParseIP("10.0.0.7")
	tests := []struct{ in, want string }{
		{"127.0.0.1:7000", "127.0.0.1:7000"},
		{"0.0.0.0:7000", "10.0.0.7:7000"},
		{"[::]:7000", "10.0.0.7:7000"},
		{":7000", "10.0.0.7:7000"},
		{"svc.example:7000", "svc.example:7000"},
		{"not an address", "not an address"},
	}
	for _, tt := range tests {
		if got := rpcAddr(tt.in, ip); got != tt.want {
			t.Errorf("rpcAddr(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := rpcAddr("0.0.0.0:7000", nil); got != "0.0.0.0:7000" {
		t.Errorf("rpcAddr without a gossip IP = %q", got)
	}
}

func FuzzDecodeMeta(f *testing.F) {
	for _, m := range []meta{
		{Protocol: 1, Addr: "127.0.0.1:7000", Transport: "tcp", Digest: "47DEQpj8HBSa-_TImW-5JA"},
		{Protocol: 1, Addr: "[::1]:1", Transport: "quic", Segment: "a"},
		{Protocol: 9, Addr: strings.Repeat("a", 255), Segment: strings.Repeat("s", 128)},
	} {
		b, err := encodeMeta(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{1, 1, 255})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMeta(b)
		if err != nil {
			if !errors.Is(err, errMeta) {
				t.Fatalf("error %v does not wrap errMeta", err)
			}
			return
		}
		out, err := encodeMeta(m)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", m, err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("round trip: %x -> %+v -> %x", b, m, out)
		}
		if len(out) > memberlist.MetaMaxSize {
			t.Fatalf("%d bytes accepted", len(out))
		}
	})
}
