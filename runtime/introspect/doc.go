// Package introspect holds what a wizard node tells of the mesh it sees:
// the records its introspection methods return, for tools and for tests
// that wait on routing.
//
//   - [Member]: a node of the mesh (runtime's Node.Members): id, address,
//     transport, connected or not, the last dial error.
//   - [PatternInfo]: a pattern in the node's routing and who serves it
//     (Node.Patterns).
//   - [Route]: the route of one pattern with the state of each target
//     (Node.Route), each a [TargetState], as Node.Explain also lists them.
//
// A node fills them; a service author reads them to debug routing (the
// wizard command's members, patterns and explain print them) and never
// builds one.
package introspect
