// Command wizard calls and inspects a running wizard mesh from the shell.
// It joins the mesh as a node that only calls (it adds no handlers), by
// gossip seeds (--seeds, --dns) or static peers (--peers), and runs one
// command:
//
//	wizard act PATTERN [DATA]     call a pattern; the answer as JSON
//	wizard members                the nodes of the mesh
//	wizard patterns [GLOB]        every pattern and the targets serving it
//	wizard explain PATTERN|MSG    which pattern answers a message, and why
//	wizard describe PATTERN       the request and response schema
//	wizard health [PATTERN]       the serving state of nodes
//	wizard bench PATTERN [DATA]   a closed-loop load test
//	wizard init [DIR]             scaffold a module with a typed contract
//	wizard repl                   an interactive shell
//
// DATA is JSON or key:value pairs as MicroWizard users type them
// (role:math,cmd:sum,a:1,b:2, nested {} and []), or "-" for the standard
// input. Typed patterns take their protobuf request as JSON: the command
// encodes it through the descriptors the serving node publishes on
// runtime.DescribePattern, and prints protobuf answers as JSON.
//
// Every flag can also be set by an environment variable: WIZARD_ and the
// flag's name in upper case, dashes as underscores (--seeds is
// WIZARD_SEEDS, --gossip-key WIZARD_GOSSIP_KEY). A flag given on the
// command line wins. "wizard help COMMAND" and "wizard COMMAND --help"
// print a command's flags and an example.
//
// Exit status: 0 on success, 1 when a call or a check fails, 2 for bad
// usage or input.
package main
