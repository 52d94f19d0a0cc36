package swim_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/swim"
)

var (
	keyA = bytes.Repeat([]byte{0xa}, 32)
	keyB = bytes.Repeat([]byte{0xb}, 16)
	keyC = bytes.Repeat([]byte{0xc}, 24)
)

// waitShutOut waits until intruder has tried to join at least three times
// and the cluster's first node logged dropping its gossip, then checks
// that neither side sees the other.
func waitShutOut(t *testing.T, cluster []*member, firstLog *testlog.Buffer, intruder *member, logged string) {
	t.Helper()
	testwait.Until(t, "the intruder stopped trying to join", func() bool { return intruder.d.JoinAttempts() >= 3 })
	testwait.Until(t, "no log line for the intruder's gossip", func() bool {
		return strings.Contains(strings.ToLower(firstLog.String()), strings.ToLower(logged))
	})
	ctx := context.Background()
	for _, m := range cluster {
		if n := m.d.NumMembers(); n != len(cluster) {
			t.Errorf("%s knows %d members, want %d", m.id, n, len(cluster))
		}
		if !notFound(ctx, m, intruder.pattern()) {
			t.Errorf("%s routes the intruder's %s", m.id, intruder.pattern())
		}
		if !notFound(ctx, intruder, m.pattern()) {
			t.Errorf("the intruder routes %s", m.pattern())
		}
	}
	if n := intruder.d.NumMembers(); n != 1 {
		t.Errorf("the intruder knows %d members, want 1", n)
	}
}

// TestWrongKey: a node whose key the cluster does not have, or that has
// no key at all, cannot join an encrypted cluster nor make its members
// know it; the cluster's members log the gossip they drop.
func TestWrongKey(t *testing.T) {
	leak.Check(t)
	var log0 testlog.Buffer
	first := startMember(t, "k0", swim.WithKeys(keyA), swim.WithLogger(log0.Logger()))
	seed := first.d.GossipAddr()
	cluster := []*member{first, startMember(t, "k1", swim.WithKeys(keyA), swim.WithSeeds(seed)), startMember(t, "k2", swim.WithKeys(keyA), swim.WithSeeds(seed))}
	t.Cleanup(func() { closeAll(cluster) })
	for _, m := range cluster {
		waitRoutable(t, cluster, m.pattern())
	}
	seeds := swim.WithSeeds(seed, cluster[1].d.GossipAddr(), cluster[2].d.GossipAddr())
	t.Run("wrong key", func(t *testing.T) {
		intruder := startMember(t, "wrongkey", swim.WithKeys(keyB, keyC), seeds)
		waitShutOut(t, cluster, &log0, intruder, "No installed keys could decrypt the message")
	})
	t.Run("no key", func(t *testing.T) {
		intruder := startMember(t, "nokey", seeds)
		waitShutOut(t, cluster, &log0, intruder, "Encryption is configured but remote state is not encrypted")
	})
}

// TestKeyRotation rotates a running cluster from one key to another
// (install, use, remove, a step at a time on every node): the members
// stay together, a node with only the new key joins, and one with only
// the old key no longer can.
func TestKeyRotation(t *testing.T) {
	leak.Check(t)
	var log0 testlog.Buffer
	first := startMember(t, "r0", swim.WithKeys(keyA), swim.WithLogger(log0.Logger()))
	seed := swim.WithSeeds(first.d.GossipAddr())
	cluster := []*member{first, startMember(t, "r1", swim.WithKeys(keyA), seed), startMember(t, "r2", swim.WithKeys(keyA), seed)}
	t.Cleanup(func() { closeAll(cluster) })
	for _, m := range cluster {
		waitRoutable(t, cluster, m.pattern())
	}
	for _, step := range []func(*swim.Discovery) error{
		func(d *swim.Discovery) error { return d.InstallKey(keyB) },
		func(d *swim.Discovery) error { return d.UseKey(keyB) },
		func(d *swim.Discovery) error { return d.RemoveKey(keyA) },
	} {
		for _, m := range cluster {
			if err := step(m.d); err != nil {
				t.Fatalf("%s: %v", m.id, err)
			}
		}
	}
	for _, m := range cluster {
		if keys := m.d.Keys(); len(keys) != 1 || !bytes.Equal(keys[0], keyB) {
			t.Fatalf("%s: keys %x after the rotation", m.id, keys)
		}
	}
	late := startMember(t, "r3", swim.WithKeys(keyB), seed)
	all := append(cluster, late)
	for _, m := range all {
		waitRoutable(t, all, m.pattern())
	}
	old := startMember(t, "r4", swim.WithKeys(keyA), seed)
	waitShutOut(t, all, &log0, old, "No installed keys could decrypt the message")
}

func TestKeyErrors(t *testing.T) {
	d := newDiscovery(t, swim.WithKeys(keyA, keyB))
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"use a key not installed", d.UseKey(keyC), "the key is not installed"},
		{"remove the primary key", d.RemoveKey(keyA), "the key is the primary key"},
		{"install a short key", d.InstallKey([]byte("short")), "the key is 5 bytes; a key is 16, 24 or 32 bytes"},
	}
	for _, tt := range tests {
		if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error containing %q", tt.name, tt.err, tt.want)
		}
	}
	if err := d.RemoveKey(keyC); err != nil {
		t.Errorf("removing a key not installed: %v", err)
	}
	if err := d.RemoveKey(keyB); err != nil {
		t.Errorf("removing a secondary key: %v", err)
	}
	if keys := d.Keys(); len(keys) != 1 || !bytes.Equal(keys[0], keyA) {
		t.Errorf("keys %x, want only the primary", keys)
	}
	plain := newDiscovery(t)
	for name, err := range map[string]error{"install": plain.InstallKey(keyA), "use": plain.UseKey(keyA), "remove": plain.RemoveKey(keyA)} {
		if !errors.Is(err, swim.ErrNoKeyring) {
			t.Errorf("%s without a keyring: %v, want ErrNoKeyring", name, err)
		}
	}
	if plain.Keys() != nil {
		t.Errorf("Keys without a keyring = %x", plain.Keys())
	}
}
