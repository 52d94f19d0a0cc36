// Package mathsvc implements the example contract
// wizard.examples.math.v1.MathService (examples/proto) on its generated
// stubs: [Register] adds it to a node, and any node's
// mathv1.NewMathServiceClient calls it.
package mathsvc
