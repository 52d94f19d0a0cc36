// Moleculer 0.15 for wizard/bench's comparison (bench/internal/harness
// starts it). One script, three roles, chosen by the first argument:
//
//   serve                 a broker serving action bench.add {a, b} -> {r: a + b}
//                         over the TCP transporter on 127.0.0.1:TCP_PORT,
//                         UDP discovery off, the caller's broker named in
//                         PEER (host:port/nodeID): every address stays on
//                         loopback. Prints its address; stops when stdin ends.
//   load                  a broker on TCP_PORT that knows the server at PEER;
//                         prints "ready", then for each line "C W D MAX" of
//                         stdin drives C concurrent loops of
//                         broker.call('bench.add', {a, b}) for W ms of
//                         warm-up and D ms measured (MAX calls at most, 0: no
//                         bound).
//   inproc C W D MAX      the same loops against the action in this broker,
//                         no transporter.
//
// Each run of load, and inproc, prints one JSON line: the calls completed in the window,
// the window's length, the errors (wrong answers included) and the p50 and
// p99 latency in ns, the harness's definitions (nearest rank).
import moleculer from 'moleculer';
import { drive, serveRuns } from '../nodeload/drive.mjs';

const { ServiceBroker } = moleculer;
const [role, ...args] = process.argv.slice(2);
const tcpPort = Number(process.env.TCP_PORT || 0);
const peer = process.env.PEER || '';

function newBroker (nodeID, transporter) {
  return new ServiceBroker({
    nodeID,
    transporter,
    logger: false,
    metrics: false,
    tracing: false,
    requestTimeout: 10 * 1000
  });
}

function tcp () {
  return { type: 'TCP', options: { udpDiscovery: false, port: tcpPort, urls: peer ? [peer] : [] } };
}

function addService (broker) {
  broker.createService({
    name: 'bench',
    actions: {
      add (ctx) {
        return { r: ctx.params.a + ctx.params.b };
      }
    }
  });
}

async function main () {
  const numbers = (xs) => xs.map(Number);
  if (role === 'serve') {
    const broker = newBroker('bench-server', tcp());
    addService(broker);
    await broker.start();
    process.stdout.write(`127.0.0.1:${tcpPort}\n`);
    process.stdin.on('end', () => broker.stop().finally(() => process.exit(0)));
    process.stdin.resume();
  } else if (role === 'load') {
    const broker = newBroker('bench-client', tcp());
    await broker.start();
    await broker.waitForServices(['bench'], 30 * 1000);
    const first = await broker.call('bench.add', { a: 1, b: 2 });
    if (!first || first.r !== 3) throw new Error(`1 + 2 answered ${JSON.stringify(first)}`);
    await serveRuns((a, b) => broker.call('bench.add', { a, b }));
    await broker.stop();
    process.exit(0);
  } else if (role === 'inproc') {
    const [callers, w, d, max] = numbers(args);
    const broker = newBroker('bench-inproc', null);
    addService(broker);
    await broker.start();
    await drive((a, b) => broker.call('bench.add', { a, b }), callers, w, d, max);
    await broker.stop();
    process.exit(0);
  } else {
    throw new Error(`unknown role ${JSON.stringify(role)} (serve, load, inproc)`);
  }
}

main().catch((err) => {
  process.stderr.write(`rpc.mjs (${role}): ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
