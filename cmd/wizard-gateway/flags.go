package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/wizardmesh/wizard/internal/transportname"
)

// envPrefix prefixes the environment variable of every flag:
// --log-level is WIZARD_GATEWAY_LOG_LEVEL.
const envPrefix = "WIZARD_GATEWAY_"

// flags are the command line's settings; each overrides the
// configuration file's, and each may come from its environment variable
// instead (the command line wins).
type flags struct {
	config     string
	ip         string
	port       string
	logLevel   string
	sslCert    string
	sslKey     string
	transport  string
	listenMesh string
	gossip     string
	advertise  string
	seeds      string
	peers      string
	gossipKey  string
	descriptor string
}

// flagDef is one flag: its long name, an optional one-letter alias, and
// its help.
type flagDef struct {
	long, short, arg, help string
	dst                    *string
	def                    string
}

func (f *flags) defs() []flagDef {
	return []flagDef{
		{"config", "c", "FILE", "the YAML configuration file (routes, limits, auth); required", &f.config, ""},
		{"ip", "i", "IP", "the IP address to serve HTTP and WebSocket on (default: server.listen's)", &f.ip, ""},
		{"port", "p", "PORT", "the port to serve on (default: server.listen's, 8080)", &f.port, ""},
		{"log-level", "l", "LEVEL", "debug, info (the access log), warn or error", &f.logLevel, "info"},
		{"ssl-cert", "", "FILE", "a PEM certificate: serve HTTPS and wss (with --ssl-key)", &f.sslCert, ""},
		{"ssl-key", "", "FILE", "the PEM private key of --ssl-cert", &f.sslKey, ""},
		{"transport", "", "NAME", "the mesh transport: " + transportname.Names() + " (default: mesh.transport's, tcp)", &f.transport, ""},
		{"listen-mesh", "", "ADDR", "the address the gateway's node listens on for the mesh (default: mesh.listen's, :0)", &f.listenMesh, ""},
		{"gossip", "", "ADDR", "the gossip (SWIM) bind address (default: mesh.gossip_listen's, 0.0.0.0:7946)", &f.gossip, ""},
		{"gossip-advertise", "", "IP", "the gossip address other members reach the gateway at, ip or ip:port (default: mesh.gossip_advertise's, else the first private address; a pod: its IP)", &f.advertise, ""},
		{"seeds", "", "ADDRS", "comma-separated gossip addresses of mesh members to join (default: mesh.seeds)", &f.seeds, ""},
		{"peers", "", "ADDRS", "comma-separated transport addresses of static peers, without gossip (default: mesh.peers)", &f.peers, ""},
		{"descriptors", "", "FILE", "a FileDescriptorSet (buf build -o FILE) of protobuf types to answer as JSON; the types of services added with their methods are learnt from the services themselves", &f.descriptor, ""},
		{"gossip-key", "", "BASE64", "the gossip encryption key, 16, 24 or 32 bytes in base64 (prefer the environment variable: flags show in ps)", &f.gossipKey, ""},
	}
}

// parse reads args, then the environment (getenv) for the flags args did
// not set.
func (f *flags) parse(args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet("wizard-gateway", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	defs := f.defs()
	for _, d := range defs {
		fs.StringVar(d.dst, d.long, d.def, d.help)
		if d.short != "" {
			fs.StringVar(d.dst, d.short, d.def, d.help)
		}
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (subcommands: check-config FILE)", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	for _, d := range defs {
		if set[d.long] || d.short != "" && set[d.short] {
			continue
		}
		if v := getenv(envName(d.long)); v != "" {
			*d.dst = v
		}
	}
	return nil
}

func envName(long string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(long, "-", "_"))
}

// usage writes the --help text.
func usage(w io.Writer, f *flags) {
	fmt.Fprint(w, `wizard-gateway: HTTP and WebSocket into a wizard mesh.

The gateway is a wizard node: it joins the mesh and turns each request into
a call of the pattern its route names, as the YAML configuration says:

  routes:
    - {name: users, method: POST, path: /api/users/{action},
       pattern: "role:users,cmd:{action}", vars: {action: {allow: [create, update]}}}

Usage:
  wizard-gateway -c FILE [flags]      serve
  wizard-gateway --version            print the version and exit
  wizard-gateway check-config FILE    check a configuration file and exit
                                      (every problem, as FILE:LINE:COL: WHERE: REASON;
                                      then the TLS, key and gossip key files it names
                                      are read and its JWKS fetched, as serving would)

Flags (each also from its environment variable; the command line wins,
and both win over the file):
`)
	for _, d := range f.defs() {
		name := "    --" + d.long
		if d.short != "" {
			name = "-" + d.short + ", --" + d.long
		}
		name += " " + d.arg
		fmt.Fprintf(w, "  %-28s %s\n  %-28s [%s]\n", name, d.help, "", envName(d.long))
	}
	fmt.Fprint(w, `  -h, --help                   this text
  -V, --version                the version of wizard, the commit and the Go version; exit

Endpoints: the routes; /healthz (the process is up); /readyz (joined to the
mesh, keys loaded); the WebSocket path of the websocket section (/ws).

Signals: SIGHUP reloads the file as one: routes, CORS, rate limits, auth,
body bounds (a bad file changes nothing, and the log says why; the listener's
settings, the mesh and the log's format and output keep their old values and
the log says "needs a restart: <setting>"); SIGINT and SIGTERM shut down gracefully
(stop accepting, finish the requests in flight, close WebSockets with 1012,
up to server.shutdown_grace).

Memory: unless GOGC is set, the collector's heap goal is kept at least 16 MiB
(GOGC raised while the live heap is under 8 MiB), so that a small heap under
load is not collected every few thousand requests; GOMEMLIMIT bounds it as usual.

Example:
  wizard-gateway -c gateway.yaml -p 8080 --seeds 10.0.0.5:7946
  curl -s localhost:8080/api/users/create -d '{"name":"ada"}' -H 'Content-Type: application/json'
`)
}
