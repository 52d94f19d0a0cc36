// Package microwizard is a transport that speaks MicroWizard 1.5.0's TCP
// protocol, so that a wizard node and a fleet of MicroWizard (Node.js)
// services call each other both ways: a Go service replaces one Node.js
// service at a time.
//
// # Serving
//
// A node on this transport listens where MicroWizard clients, configured
// with client({type: 'tcp', host, port, pin}), send their calls. An act
// ({k:"a", args}) routes by the args' root string, number and boolean
// values through the node's precedence and hands the handler the whole
// args; an actE ({k:"aE", p, d}) routes by the pattern p (with the
// mixins MicroWizard appended) and hands the handler d alone. sync:false
// runs the handler and answers nothing. Typed (protobuf) handlers are
// reached through their JSON form and answer JSON.
//
// # Calling
//
// MicroWizard servers publish no catalog, so the transport states one for
// them: [WithPeer] names an address and the pins served there, and the
// node's catalog pull of that address is answered with them. Give the
// node [Transport.Discovery] as its discovery:
//
//	tr, _ := microwizard.New(microwizard.WithPeer("10.0.0.7:10201", "role:math,cmd:*"))
//	n, _ := runtime.New(runtime.WithTransport(tr), runtime.WithDiscovery(tr.Discovery()))
//	res, err := n.Act(ctx, "role:math,cmd:sum", map[string]any{"a": 1, "b": 2})
//
// A call to a pin without globs goes as actE with the pin as p and the
// message as d; so does an ActE to a pin with a glob, with p the pattern
// it was made with (its mixins included), as MicroWizard's client sends
// an actE under a glob pin; an Act to a pin with a glob, or an Act with
// a protobuf message, goes as act with the merged message.
//
// # Seneca
//
// [WithSeneca] makes the transport speak Seneca 3's seneca-transport over
// TCP instead (the transport is then named "seneca"): a request is
// {id: "msgid/txid", kind: "act", origin, track, time, act, sync}, an
// answer {id, kind: "res", origin, accept, track, time, sync, res |
// error}. Serving, an act routes by its root scalar values as MicroWizard's
// act does; a request of another kind, without an id, or whose track
// holds this node's id (a loop) is not served, and, as seneca-transport
// over TCP, not answered either (its refusals carry no sync). Calling,
// every call goes as an act of the whole message (Seneca routes by its
// values): an ActE's data with the pin's pairs set; origin names this
// node, and track is the track of the request the calling handler serves
// ([Track], which the transport puts in the handler's ctx) plus this
// node's id, as seneca-transport sends a forwarded message's
// transport$.track: a loop that passes a Go handler is refused where it
// closes, however many hops later. Seneca has no keep-alive on its TCP
// wire: the transport sends none.
//
// [WithSenecaHTTP] speaks seneca-transport's HTTP wire (type 'http' or
// 'web'): POST /act with the act as the body and seneca-id,
// seneca-origin and seneca-track headers; the answer is the result with
// 200, or the error with 500 (503 for a refusal). A looped request is
// answered 500 with code message_loop, as Seneca answers it over HTTP.
// seneca-transport's HTTP client rejects any status but 200 before
// reading the body, so a Seneca HTTP caller sees an error's status, not
// its message, from a Seneca server as from this one; a Go caller reads
// the body and keeps the message. A no-reply call returns once its
// request is written, as Seneca's HTTP client goes on with sync false;
// its answer is read and dropped in the background, at most
// [WithMaxPending] per connection (one more is not sent), each bounded by
// [WithServeTimeout].
//
// # Errors
//
// Errors cross both ways with their message and name, never a stack: a
// Go error reaches Node.js as {message, name: "Error", code: "<gRPC code
// name>"} (switch on code), the name of a Node.js error it passes on
// kept; the transport's own refusals are named as JavaScript names them:
// a line over the bound and an integer a JavaScript number cannot hold
// are a RangeError (resource_exhausted, out_of_range). A Node.js error reaches Go as a *runtime.Error with its
// message, the code its "code" names if it is a gRPC code name (else
// unknown), and its name ([ErrorName]); [NodeErrorOf] returns its name,
// message and code, and for a Seneca error (which wraps the action's
// error as act_execute) the original under Orig, as Seneca's own client
// shows it in err.orig: its code (which gives the *runtime.Error its
// code when it names a gRPC code) and its message, from Seneca's
// details. A refusal (over the node's
// runtime.WithMaxInFlight, or shutting down) is answered
// retry_later_err_overload, as a closing MicroWizard node answers; that
// answer received is a refusal (runtime.FlagRefused, resource_exhausted),
// so the balancer tries another target.
//
// # Limits
//
// Lines are bounded ([WithMaxLine], 16 MiB): a longer line is dropped
// and fails its call alone, at once (a RangeError, resource_exhausted);
// the connection and its other calls go on. A line that is not a JSON
// object ends its connection (MicroWizard's parser ends it too). The
// pattern bounds of the node (runtime.WithMaxPatternSize) apply to the
// pairs an act routes by, the keys the node's patterns use
// (runtime.KeyRouter): its other fields are data, bounded by the line
// alone. A line of an unknown kind is ignored, as
// MicroWizard ignores it. Calls waiting for answers and requests being
// served are bounded per connection ([WithMaxPending]); a served request
// runs at most [WithServeTimeout] (the wire carries no deadline). A
// connection silent for 120 s is pinged ({"h":1}) and dropped if the
// answer ({"h":2}) takes more than 5 s, as MicroWizard's client does.
//
// # Numbers
//
// An act's numbers route by their JavaScript string form, as MicroWizard
// routes them (`${v}`): {v: 1e21} finds the handler of v:1e21 (whose
// value the node reads as 1e+21), 1.0 routes as 1. A JavaScript number is
// a float64: an integer beyond 2^53 that it cannot hold (2^53+1) would be
// rounded by Node.js, silently, so a call or a result that holds one
// fails out_of_range (a RangeError on the Node.js side); send such ids as
// strings (protobuf messages do: protojson writes int64 as a string). A
// number in a pattern is a number: v:1e21 goes to MicroWizard as
// v:1e+21; quote it (v:"1e21") to send the text.
//
// # What the packages do (read in their source, testdata/node after npm ci)
//
// MicroWizard 1.5.0 asks for @wzrdtales/visigoth ^2.0.5 and sneeze-ng
// ^0.13.0, which are unpublished; npm overrides to 1.0.0 and 0.12.5
// install and run its TCP transport. Its server's strict ndjson parser
// ends the connection on a line that is not JSON, with no bound on a
// line's length (split2 without maxLength: up to V8's longest string,
// about 512 MiB); {"h":1} is answered {"h":2}; a k other than a or aE is
// answered without sync, so nothing is written; a routes by the args' root
// scalar values in their JavaScript string form, aE by p, parsed by a
// key:value regex without quoting; a call that matches nothing is answered
// with no res; an error travels as its own fields plus message, name
// (default Error) and stack. Its client reconnects after three failures,
// takes ids from uid(), keeps pending calls in an LRU of 10,000, sends an
// actE's mixins appended to p (",m:v"), and times out locally with the
// string 'timeout'.
//
// seneca-transport 8.3 (Seneca 3): track is the sender's transport$.track
// plus its seneca.id. The server refuses invalid_kind_act, no_message_id,
// own_message, message_loop and data_error; over TCP such refusals carry no
// sync and are not written (the caller waits for its timeout), over HTTP
// they are a 500 with the error. A relay that forwards its message
// whole to a client crashes (prepare_request copies transport$.track
// with seneca.util.deep, which makes the array an object, then calls
// track.push), so a Seneca relay must drop transport$, and its call's
// track starts again with its own id. An error crosses as its
// enumerable fields: an Error's message and name do not (Seneca adds
// message and name to its own), so a wrapped error's orig carries its
// code alone, its message is in details.message, its name is lost. The client requires an answer's origin to
// be its own id. HTTP is a POST to /act whose body is the act, with
// seneca-id, -kind, -origin, -track (JSON) and -time-client-sent headers;
// the answer is 200 with the result, or the error's statusCode (else 500)
// with the error, and the HTTP client rejects any status but 200 before
// reading the body. Its timeouts are 5,555 ms.
package microwizard
