package swim

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/hashicorp/memberlist"
)

// ErrNoKeyring is returned by the key methods of a Discovery made without
// [WithKeys]: its gossip is not encrypted, and encryption cannot be
// turned on at run time.
var ErrNoKeyring = errors.New("wizard: swim: gossip is not encrypted (no WithKeys)")

// Keys change on one node at a time; to rotate a cluster's key without
// losing members, go through the steps on every node before the next:
//
//  1. InstallKey(new) everywhere: all members decrypt with it;
//  2. UseKey(new) everywhere: all members encrypt with it;
//  3. RemoveKey(old) everywhere.

// InstallKey adds key to the keyring: the node decrypts gossip encrypted
// with it, but still encrypts with its primary key. Installing a key
// already there does nothing. The key is 16, 24 or 32 bytes.
func (d *Discovery) InstallKey(key []byte) error {
	if d.keyring == nil {
		return ErrNoKeyring
	}
	if err := memberlist.ValidateKey(key); err != nil {
		return fmt.Errorf("wizard: swim: install key: the key is %d bytes; a key is 16, 24 or 32 bytes", len(key))
	}
	return d.keyring.AddKey(slices.Clone(key))
}

// UseKey makes key, which must be installed, the primary key: the one the
// node encrypts gossip with. Install it on every member first, or those
// without it drop this node's gossip.
func (d *Discovery) UseKey(key []byte) error {
	if d.keyring == nil {
		return ErrNoKeyring
	}
	if !d.hasKey(key) {
		return errors.New("wizard: swim: use key: the key is not installed (InstallKey it first)")
	}
	return d.keyring.UseKey(key)
}

// RemoveKey removes key from the keyring: gossip encrypted with it is
// dropped from then on. The primary key cannot be removed (UseKey another
// first); removing a key that is not installed does nothing.
//
// memberlist removes a key by shifting the keys after it in place, while
// its receiving goroutines may be reading them. Removing the last key
// shifts nothing, and after the rotation above the old key is the last
// one; avoid removing a key from the middle of a keyring of three or more
// while gossip flows.
func (d *Discovery) RemoveKey(key []byte) error {
	if d.keyring == nil {
		return ErrNoKeyring
	}
	if bytes.Equal(d.keyring.GetPrimaryKey(), key) {
		return errors.New("wizard: swim: remove key: the key is the primary key (UseKey another first)")
	}
	return d.keyring.RemoveKey(key) // does nothing when key is not installed
}

// Keys returns copies of the installed keys, the primary key first, or
// nil without [WithKeys].
func (d *Discovery) Keys() [][]byte {
	if d.keyring == nil {
		return nil
	}
	var out [][]byte
	for _, k := range d.keyring.GetKeys() {
		out = append(out, slices.Clone(k))
	}
	return out
}

func (d *Discovery) hasKey(key []byte) bool {
	return slices.ContainsFunc(d.keyring.GetKeys(), func(k []byte) bool { return bytes.Equal(k, key) })
}
