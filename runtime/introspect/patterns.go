package introspect

// The node's own patterns: every node with a transport serves them without
// a handler, outside its in-flight accounting, and never lists them in its
// catalog, so that calls are not routed to them. Patterns with the pair
// sys:wizard are the node's own: runtime's Node.Add refuses them.

// CatalogPattern is the built-in system pattern through which nodes pull
// each other's pattern catalogs. Every node with a transport serves it. A
// pull may name the digest of a pattern set the caller has cached; a node
// whose own digest that is answers the digest alone, with its id and
// instance, instead of its patterns.
const CatalogPattern = "cmd:catalog,sys:wizard"

// HealthPattern is the built-in system pattern through which peers and
// probes ask a node whether it serves. Every node with a listener answers
// it, like [CatalogPattern], without running a handler: outside the
// in-flight accounting and its limit (an overloaded node still serves),
// and it is never in a catalog, so calls are not routed to it. The answer
// is runtime's CodeOK with the JSON object {"status": "serving"} (or "draining",
// "not_serving"); runtime's CheckHealth sends the call and reads the answer.
// Patterns with the pair sys:wizard are the node's own: runtime's Node.Add refuses
// them.
const HealthPattern = "cmd:health,sys:wizard"

// DescribePattern is the built-in system pattern through which a node
// serves the schema of its typed patterns (handlers added with runtime's Method):
// the protobuf files that declare their methods and messages, with every
// file they import, so that a tool can encode JSON into a handler's
// request type and print its answers (wizard describe, wizard act). Like
// [CatalogPattern] it is served without a handler and never routed. A
// pull may name the catalog digest of a schema the caller has cached
// ({"have": digest}); a node whose digest that is answers the digest
// alone. A node without typed patterns answers an empty schema.
// runtime's Node.Describe and runtime's Node.DescribePeer
// find whom to send it to.
const DescribePattern = "cmd:describe,sys:wizard"
