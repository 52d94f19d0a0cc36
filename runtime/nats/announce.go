package nats

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/wizardmesh/wizard/runtime/discovery"
)

// announcement is what a node publishes on the discovery subject: itself
// (op "up", the heartbeat), its leaving ("down"), or a question to every
// node to announce itself at once ("query", sent on joining).
type announcement struct {
	Version   int    `json:"v"`
	Op        string `json:"op"`
	ID        string `json:"id,omitempty"`
	Instance  string `json:"instance,omitempty"`
	Addr      string `json:"addr,omitempty"`
	Transport string `json:"transport,omitempty"`
	Digest    string `json:"digest,omitempty"`
}

// The announcement's limits: a larger one is dropped unread.
const (
	maxAnnouncement = 1024
	maxDigest       = 32
	maxID           = 128
)

// decodeAnnouncement decodes and checks data, at most maxAnnouncement
// bytes.
func decodeAnnouncement(data []byte) (announcement, error) {
	var a announcement
	if len(data) > maxAnnouncement {
		return a, fmt.Errorf("%d bytes, at most %d", len(data), maxAnnouncement)
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return a, err
	}
	switch {
	case a.Version != 1:
		return a, fmt.Errorf("version %d, want 1", a.Version)
	case a.Op == "query":
		return a, nil
	case a.Op != "up" && a.Op != "down":
		return a, fmt.Errorf("op %q, want up, down or query", a.Op)
	case a.Addr == "":
		return a, errors.New("no address")
	case len(a.ID) > maxID || len(a.Instance) > maxID || len(a.Transport) > maxID:
		return a, errors.New("an id, instance or transport name too long")
	case len(a.Digest) > maxDigest:
		return a, fmt.Errorf("a digest of %d bytes, at most %d", len(a.Digest), maxDigest)
	case len(a.Addr) > maxSubject:
		return a, fmt.Errorf("an address of %d bytes, at most %d", len(a.Addr), maxSubject)
	}
	return a, nil
}

// key names the node an announcement is about: its run if it says, else
// its id and address.
func (a announcement) key() string {
	if a.Instance != "" {
		return "i/" + a.Instance
	}
	return "a/" + a.ID + "/" + a.Addr
}

func (a announcement) peer() discovery.Peer {
	return discovery.Peer{ID: a.ID, Instance: a.Instance, Addr: a.Addr, Transport: a.Transport, Digest: a.Digest}
}

// members is what a Discovery knows of the other nodes: their last
// announcement and when it came. It does not lock: the Discovery does.
type members struct {
	deadAfter time.Duration
	max       int
	m         map[string]*member
}

type member struct {
	a    announcement
	seen time.Time
}

// up records a's heartbeat at now and reports whether the node is new or
// changed (so the host hears of it). A node beyond max is not recorded.
func (ms *members) up(a announcement, now time.Time) bool {
	if old := ms.m[a.key()]; old != nil {
		old.seen = now
		if old.a == a {
			return false
		}
		old.a = a
		return true
	}
	if len(ms.m) >= ms.max {
		return false
	}
	ms.m[a.key()] = &member{a: a, seen: now}
	return true
}

// down forgets the node of a and reports whether it was known.
func (ms *members) down(a announcement) (announcement, bool) {
	old := ms.m[a.key()]
	if old == nil {
		return a, false
	}
	delete(ms.m, a.key())
	return old.a, true
}

// expire forgets and returns the nodes not heard from for deadAfter.
func (ms *members) expire(now time.Time) []announcement {
	var dead []announcement
	for k, m := range ms.m {
		if now.Sub(m.seen) >= ms.deadAfter {
			dead = append(dead, m.a)
			delete(ms.m, k)
		}
	}
	return dead
}
