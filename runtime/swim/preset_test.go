package swim

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/memberlist"
)

func TestPresets(t *testing.T) {
	lan := memberlist.DefaultLANConfig()
	LAN.apply(lan)
	want := memberlist.DefaultLANConfig()
	want.EnableCompression = false // the one change
	if diff := cmp.Diff(want, lan, cmpopts.IgnoreUnexported(memberlist.Config{})); diff != "" {
		t.Errorf("LAN changes memberlist's LAN config beyond compression (-want +got):\n%s", diff)
	}
	fast := memberlist.DefaultLANConfig()
	Fast.apply(fast)
	if fast.ProbeTimeout >= fast.ProbeInterval || fast.GossipInterval >= fast.ProbeInterval || fast.SuspicionMult < 2 {
		t.Errorf("Fast: probe %v/%v, gossip %v, suspicion ×%d", fast.ProbeInterval, fast.ProbeTimeout, fast.GossipInterval, fast.SuspicionMult)
	}
	tests := []struct {
		p    Preset
		n    int
		want time.Duration
	}{
		{LAN, 1, 4 * time.Second},
		{LAN, 10, 4 * time.Second},
		{LAN, 100, 8 * time.Second},
		{Fast, 3, 400 * time.Millisecond},
		{Fast, 10, 400 * time.Millisecond},
		{Fast, 1000, 1200 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := tt.p.SuspicionTimeout(tt.n); got != tt.want {
			t.Errorf("%v.SuspicionTimeout(%d) = %v, want %v", tt.p, tt.n, got, tt.want)
		}
	}
	if got := Preset(9).String(); got != "Preset(9)" {
		t.Errorf("String = %q", got)
	}
}
