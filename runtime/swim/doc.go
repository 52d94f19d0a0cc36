// Package swim is wizard's discovery by gossip: nodes find each other and
// learn who serves which pattern without a central registry, using SWIM
// membership (hashicorp/memberlist).
package swim
