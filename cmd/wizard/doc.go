// Command wizard calls and inspects a running wizard mesh from the shell.
// It joins the mesh as a node that only calls (it adds no handlers; wizard
// sub's serves the events it subscribes to), by
// gossip seeds (--seeds, --dns) or static peers (--peers), and runs one
// command:
//
//	wizard act PATTERN [DATA]     call a pattern; the answer as JSON
//	wizard members                the nodes of the mesh
//	wizard patterns [GLOB]        every pattern and the targets serving it
//	wizard explain PATTERN|MSG    which pattern answers a message, and why
//	wizard describe PATTERN       the request and response schema
//	wizard emit PATTERN [DATA]    emit an event; the groups that took it
//	wizard sub PATTERN...         tail events as JSON lines
//	wizard health [PATTERN]       the serving state of nodes
//	wizard bench PATTERN [DATA]   a closed-loop load test
//	wizard init [DIR]             scaffold a module with a typed contract
//	wizard version                the build of this command
//	wizard repl                   an interactive shell
//
// DATA is JSON or key:value pairs as MicroWizard users type them
// (role:math,cmd:sum,a:1,b:2, nested {} and []), or "-" for the standard
// input. Typed patterns take their protobuf request as JSON: the command
// encodes it through the descriptors the serving node publishes on
// introspect.DescribePattern, and prints protobuf answers as JSON.
//
// Every flag can also be set by an environment variable: WIZARD_ and the
// flag's name in upper case, dashes as underscores (--seeds is
// WIZARD_SEEDS, --gossip-key WIZARD_GOSSIP_KEY). A flag given on the
// command line wins. "wizard help COMMAND" and "wizard COMMAND --help"
// print a command's flags and an example.
//
// "wizard --help" and "wizard COMMAND --help" print on the standard
// output; errors go to the standard error. "wizard version" prints the
// module version, commit and Go version of the build.
//
// Exit status, as grpcurl's:
//
//	0       success
//	1       a failure without a code: a bench whose calls all failed, a
//	        health check that is not serving
//	2       bad usage or input (flags, PATTERN, DATA)
//	64+N    a call, or the join, failed with wizard code N (gRPC's
//	        numbers): 65 canceled, 66 unknown, 67 invalid_argument,
//	        68 deadline_exceeded, 69 not_found, 70 already_exists,
//	        71 permission_denied, 72 resource_exhausted,
//	        73 failed_precondition, 74 aborted, 75 out_of_range,
//	        76 unimplemented, 77 internal, 78 unavailable, 79 data_loss,
//	        80 unauthenticated
//	130     interrupted (Ctrl-C; 143 for SIGTERM): the call in flight is
//	        cancelled first; wizard sub, which runs until interrupted,
//	        exits 0
package main
