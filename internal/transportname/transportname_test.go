package transportname

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNew(t *testing.T) {
	for _, name := range []string{"tcp", "quic"} {
		t.Run(name, func(t *testing.T) {
			tr, err := New(name, Config{SelfSigned: true})
			if err != nil {
				t.Fatal(err)
			}
			if tr.Name() != name {
				t.Errorf("New(%q).Name() = %q", name, tr.Name())
			}
		})
	}
}

func TestUnknown(t *testing.T) {
	const want = `want tcp or quic, got "udp"`
	if err := Check("udp"); err == nil || err.Error() != want {
		t.Errorf("Check(udp) = %v, want %s", err, want)
	}
	tr, err := New("udp", Config{})
	if tr != nil || err == nil || err.Error() != want {
		t.Errorf("New(udp) = %v, %v; want nil, %s", tr, err, want)
	}
	if diff := cmp.Diff("tcp or quic", Names()); diff != "" {
		t.Errorf("Names() (-want +got):\n%s", diff)
	}
}
