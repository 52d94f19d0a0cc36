// Package userssvc implements the example contract
// wizard.examples.users.v1.UsersService (examples/proto) on its generated
// stubs. It calls role:math (package mathsvc, or any other implementation
// of MathService on the mesh) through a generated client to total a
// user's points.
//
// Moderation shows Seneca-style dispatch through a request field: the
// contract mixes the request's action into the pattern, the
// UsersServiceHandler serves every action, and [Service.Register] adds
// [Service.Ban] under the more specific [BanPattern], which wins for
// action "ban".
package userssvc
