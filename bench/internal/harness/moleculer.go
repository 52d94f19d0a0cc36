package harness

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// molDir is the bench module's folder with Moleculer 0.15 (package.json,
// its lock, rpc.mjs; the gateway benchmark's server.js beside it).
const molDir = "moleculer"

// Moleculer's TCP transporter sends each packet over a connection the
// sender opens to the receiver, and learns where a node is from gossip,
// which carries host names and interface addresses. To keep every byte on
// loopback with UDP discovery off, each broker names the other
// (127.0.0.1:port/nodeID): the server picks the client's port too and
// passes it on in its address, "127.0.0.1:P client 127.0.0.1:Q".
const (
	molServerID = "bench-server"
	molClientID = "bench-client"
)

var moleculerContender = Contender{
	Name:  "moleculer",
	Title: "Moleculer TCP ← Moleculer (Node.js)",
	Note: "Moleculer 0.15 (npm, bench/moleculer, Node.js): a broker with action bench.add on the TCP transporter, pinned to 127.0.0.1 " +
		"(each broker given the other's address, UDP discovery off), JSON serializer, no logger, metrics or tracing; driven by a second " +
		"broker in its own Node.js process (rpc.mjs load, one process for all the runs: that many concurrent loops of broker.call('bench.add'), timed there with " +
		"process.hrtime and reported as the harness does)",
	Prepare: func(ctx context.Context) string { return prepareNode(ctx, molDir) },
	Serve: func(listen string, _ Handler, _ ServeOptions) (Server, error) {
		sp, err1 := freePort()
		cp, err2 := freePort()
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("moleculer: no free port: %v %v", err1, err2)
		}
		s, err := startNodeServer(molDir, []string{"TCP_PORT=" + strconv.Itoa(sp), fmt.Sprintf("PEER=127.0.0.1:%d/%s", cp, molClientID)}, "rpc.mjs", "serve")
		if err != nil {
			return nil, err
		}
		s.addr = fmt.Sprintf("%s client 127.0.0.1:%d", s.addr, cp)
		return s, nil
	},
	DialDriver: func(ctx context.Context, addr string) (Driver, error) {
		server, cport, err := splitMoleculerAddr(addr)
		if err != nil {
			return nil, err
		}
		env := []string{"TCP_PORT=" + cport, "PEER=" + server + "/" + molServerID}
		return startNodeDriver(ctx, molDir, env, "rpc.mjs", "load")
	},
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// splitMoleculerAddr splits the Moleculer server's address, "host:port
// client host:port", into the server's host:port and the client's port.
func splitMoleculerAddr(addr string) (server, clientPort string, err error) {
	server, client, ok := strings.Cut(addr, " client ")
	if ok {
		if _, _, err = net.SplitHostPort(server); err == nil {
			_, clientPort, err = net.SplitHostPort(client)
		}
	}
	if !ok || err != nil || clientPort == "" {
		return "", "", fmt.Errorf("moleculer: server address %q is not \"host:port client host:port\"", addr)
	}
	return server, clientPort, nil
}
