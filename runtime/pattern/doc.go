// Package pattern holds wizard's patterns and the matcher that picks one
// for a message: what a node routes by, on its own.
//
// A pattern is key:value[,key:value...]; see [Parse] for the syntax. Values
// compare as strings: integers in decimal, floats in their shortest
// JavaScript form (1.0 is "1"), booleans as "true" and "false", so 1, "1"
// and 1.0 are the same value. Keys ending in '$' are metadata and never
// route. Added patterns may use globs in values: '*' matches any run of
// characters and '?' exactly one; '*' never matches a missing key. The
// canonical form (a Pattern's String) lists keys in byte order.
//
// A node (package runtime) parses the patterns it is given itself; a
// service author writes them as strings. This package is for code that
// handles patterns as values: configuration that names them (the
// gateway's), tools that print or compare them, and the [Router], the
// patrun matcher inside a node, usable and testable on its own.
//
// # Precedence
//
// When several added patterns match a message, a Router's Find answers as
// Seneca's matcher (patrun, with globs on) does; the runtime package's
// documentation (# Precedence) gives the rules with examples. A
// [Candidate] is one matching pattern as a node's explanation lists it:
// its rank, and the [Rule] by which it lost to the winner.
//
// # Errors
//
// A malformed pattern is a [*ParseError] naming the offset and the
// reason, never a panic (but for [MustParse], meant for patterns fixed at
// compile time).
package pattern
