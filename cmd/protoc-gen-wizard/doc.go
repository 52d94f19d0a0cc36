// Command protoc-gen-wizard generates typed wizard stubs from .proto
// contracts annotated with the options of proto/wizard/v1/options.proto.
//
// For each file with a service carrying (wizard.v1.service) or a message
// carrying (wizard.v1.event) it writes <file>_wizard.pb.go beside
// protoc-gen-go's <file>.pb.go, in the same Go package: for a service, a
// pattern constant per method, an XHandler interface, an
// UnimplementedXHandler, RegisterXHandler, an XClient interface and
// NewXClient; for an event message M, MEventPattern, EmitM, BroadcastM and
// OnM. The code is thin wiring over runtime.NewUnaryHandler,
// runtime.NewStreamHandler, runtime.NewClient and the node's Emit,
// Broadcast and Subscribe.
//
// # Streams
//
// A stream method (server-streaming, client-streaming or bidirectional)
// gets the runtime's generic stream types, no type of its own:
//
//	// rpc Count(CountRequest) returns (stream CountResponse): server-streaming
//	Count(context.Context, *CountRequest, *runtime.ServerStream[*CountRequest, *CountResponse]) error
//	Count(ctx context.Context, req *CountRequest, opts ...runtime.CallOption) (*runtime.ClientStream[*CountRequest, *CountResponse], error)
//
//	// rpc Echo(stream EchoRequest) returns (stream EchoResponse): bidirectional
//	// (client-streaming methods look the same)
//	Echo(context.Context, *runtime.ServerStream[*EchoRequest, *EchoResponse]) error
//	Echo(ctx context.Context, opts ...runtime.CallOption) (*runtime.ClientStream[*EchoRequest, *EchoResponse], error)
//
// The first of each pair is the handler interface's method, the second the
// client's. A server-streaming handler gets the caller's one request (the
// generated registration receives it), and its client sends req and closes
// its side before it returns the stream. Files with stream methods reference
// runtime.IsAtLeastVersion0_5_0, others runtime.IsAtLeastVersion0_3_0.
//
// # Patterns
//
// A method's pattern is the service pattern plus the method's own; a method
// without one gets cmd:<snake_case method name>. Patterns are checked with
// the runtime's own parser. Generation fails, naming the method and the
// problem, on a bad pattern, a key ending in '$' (call metadata, which a
// pattern would drop), a key in both the service and the method pattern,
// two methods with the same pattern anywhere among the files of one
// generation run (whatever their proto packages), a mixin field that is
// missing or not a singular scalar, and a stream method with no_reply,
// mixin or timeout (a stream's answers are its messages, it picks its
// target at open before any message, and only its context's deadline
// bounds it).
//
// # Events
//
// A message with (wizard.v1.event) = {pattern: "role:order,event:placed"}
// is an event emitted on that pattern:
//
//	EmitOrderPlaced(ctx context.Context, n *runtime.Node, m *OrderPlaced, opts ...runtime.CallOption) (runtime.Delivery, error)
//	BroadcastOrderPlaced(ctx context.Context, n *runtime.Node, m *OrderPlaced, opts ...runtime.CallOption) (runtime.Delivery, error)
//	OnOrderPlaced(n *runtime.Node, group string, fn func(context.Context, *OrderPlaced) error, opts ...runtime.HandlerOption) error
//
// OnOrderPlaced subscribes a handler that decodes each event into an
// *OrderPlaced. Generation fails, naming the message and the option, on an
// event pattern that does not parse, is empty, holds a glob, a key ending in
// '$', the key wizard.group or sys:wizard; on a singular scalar field named
// as a key of its pattern (a set field joins the event's pairs, and one that
// contradicts the pattern fails the emit); on two events generated together
// with the same pattern; and on an event whose pattern's pairs are all in
// another event's pattern or its singular scalar fields (a subscription
// receives every event whose pairs include all of its own, so its On helper
// would receive the other type too).
//
// # Options
//
// mixin, no_reply and timeout become the client options runtime.Mixin,
// runtime.NoReply and runtime.Timeout; the standard idempotency_level
// option (IDEMPOTENT or NO_SIDE_EFFECTS) becomes runtime.Idempotent; a
// stream is never retried, so it has no effect on stream methods. The
// caller's options come after them, so they win.
//
// # Usage
//
// In a module of your own, install it as a tool, so that go.mod pins its
// version and go.sum its sums, and write the options it reads into your
// buf module:
//
//	go get -tool github.com/wizardmesh/wizard/cmd/protoc-gen-wizard
//	go get -tool google.golang.org/protobuf/cmd/protoc-gen-go
//	go tool protoc-gen-wizard -write-options proto
//
// -write-options DIR writes DIR/wizard/v1/options.proto, the options of
// this version of the plugin (run it again after upgrading). Then run both
// plugins from buf.gen.yaml through the Go toolchain, leaving the options
// file out of generation (its Go package is wizard's runtime/wizardpb):
//
//	inputs:
//	  - directory: proto
//	    exclude_paths: [proto/wizard]
//	plugins:
//	  - local: ["go", "tool", "protoc-gen-go"]
//	    out: .
//	    opt: module=github.com/you/yourmodule
//	  - local: ["go", "tool", "protoc-gen-wizard"]
//	    out: .
//	    opt: module=github.com/you/yourmodule
//
// docs/codegen.md ("Typed stubs") has the steps in full. The plugin
// takes protogen's parameters (paths, module, M) and no others; --version
// prints its version.
package main
