// moleculer-web in front of a Moleculer echo service: one contender of
// wizard/bench's gateway comparison (bench/internal/gwbench starts it).
//
//   ROLE=echo    an echo broker: action echo.echo answers its params.
//   ROLE=gateway moleculer-web on 127.0.0.1:HTTP_PORT, POST /echo -> echo.echo.
//   ROLE=both    the two in one broker, no transporter (the fallback).
//
// The brokers meet over Moleculer's TCP transporter on 127.0.0.1, with
// UDP discovery off and each other's address given (TCP_PORT, PEER).
// Once it serves, the process prints one line: its address (the gateway's
// HTTP address, the echo broker's transporter port). It stops when its
// standard input ends.
"use strict";

const { ServiceBroker } = require("moleculer");
const ApiGateway = require("moleculer-web");

const role = process.env.ROLE || "both";
const tcpPort = Number(process.env.TCP_PORT || 0);
const peer = process.env.PEER || ""; // host:port/nodeID of the other broker

const transporter = role === "both" ? null : {
	type: "TCP",
	options: {
		udpDiscovery: false,
		port: tcpPort,
		urls: peer ? [peer] : [],
	},
};

const broker = new ServiceBroker({
	nodeID: role === "both" ? "both" : role,
	transporter,
	logger: false,
	metrics: false,
	tracing: false,
	requestTimeout: 10 * 1000,
});

if (role === "echo" || role === "both") {
	broker.createService({
		name: "echo",
		actions: {
			echo(ctx) {
				return ctx.params;
			},
		},
	});
}

if (role === "gateway" || role === "both") {
	broker.createService({
		name: "api",
		mixins: [ApiGateway],
		settings: {
			ip: "127.0.0.1",
			port: Number(process.env.HTTP_PORT || 0),
			logRequest: null,
			logResponse: null,
			log4XXResponses: false,
			routes: [{
				path: "/",
				mappingPolicy: "restrict",
				aliases: { "POST /echo": "echo.echo" },
				bodyParsers: { json: true },
			}],
		},
	});
}

async function main() {
	await broker.start();
	if (role === "gateway" || role === "both") {
		await broker.waitForServices(["echo"], 60 * 1000);
		const api = broker.getLocalService("api");
		const a = api.server.address();
		process.stdout.write(`${a.address}:${a.port}\n`);
	} else {
		process.stdout.write(`127.0.0.1:${tcpPort}\n`);
	}
}

process.stdin.on("end", () => {
	broker.stop().finally(() => process.exit(0));
});
process.stdin.resume();
process.on("SIGINT", () => broker.stop().finally(() => process.exit(0)));
process.on("SIGTERM", () => broker.stop().finally(() => process.exit(0)));

main().catch((err) => {
	process.stderr.write(`moleculer server (${role}): ${err && err.stack || err}\n`);
	process.exit(1);
});
