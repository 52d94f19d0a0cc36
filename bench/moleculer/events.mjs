// Moleculer 0.15 for wizard/bench's events mode (bench/internal/evbench
// starts it; go run ./cmd/compare -mode events). One script, two roles,
// chosen by the first argument:
//
//   sub    a member of group GROUP: a broker with a service named GROUP
//          whose event handler for bench.event files each event's latency
//          (the wall clock now minus the event's stamp t, in µs) in a
//          histogram. Prints "ready" once started.
//   emit   the emitter: a broker that waits for the services in GROUPS
//          (comma-separated), prints "ready", then for "start N" runs N
//          concurrent loops of `await broker.emit('bench.event', {t})`
//          (balanced: one instance of each service gets each event) until
//          "stop", which it answers with "EMITTED ERRORS FIRSTERR".
//
// Every broker is NODE_ID on the TCP transporter at 127.0.0.1:TCP_PORT,
// UDP discovery off, the others listed in PEERS (host:port/nodeID,
// comma-separated): every byte stays on loopback.
//
// The control protocol is evbench's: a query line on stdin, an answer
// line on stdout; "snap" answers "N i:c,..." (N events since the last
// snap, c of them in latency bucket i: [1.05^i, 1.05^(i+1)) ns, as
// evbench's hist.go files them), "total" the events handled since the
// start; stdin's end stops the process.
import moleculer from 'moleculer';
import readline from 'node:readline';

const { ServiceBroker } = moleculer;
const role = process.argv[2];
const env = process.env;

// nowUs is the wall clock in µs: its origin from performance.timeOrigin
// (sub-millisecond), its steps from the monotonic hrtime, so that it is
// comparable with another process's clock on the same machine.
const base = BigInt(Math.round((performance.timeOrigin + performance.now()) * 1000)) - process.hrtime.bigint() / 1000n;
const nowUs = () => Number(base + process.hrtime.bigint() / 1000n);

const ratio = Math.log(1.05);
const buckets = 600;
const hist = new Float64Array(buckets);
let total = 0;

function record (latUs) {
  const ns = latUs * 1000;
  const i = ns < 1 ? 0 : Math.min(Math.floor(Math.log(ns) / ratio), buckets - 1);
  hist[i]++;
  total++;
}

function snap () {
  let n = 0;
  const parts = [];
  for (let i = 0; i < buckets; i++) {
    if (hist[i] > 0) {
      n += hist[i];
      parts.push(`${i}:${hist[i]}`);
      hist[i] = 0;
    }
  }
  return n === 0 ? '0 -' : `${n} ${parts.join(',')}`;
}

function newBroker () {
  const peers = (env.PEERS || '').split(',').filter(Boolean);
  return new ServiceBroker({
    nodeID: env.NODE_ID,
    transporter: { type: 'TCP', options: { udpDiscovery: false, port: Number(env.TCP_PORT), urls: peers } },
    logger: false,
    metrics: false,
    tracing: false
  });
}

function serve (broker, answer) {
  const rl = readline.createInterface({ input: process.stdin });
  rl.on('line', async (line) => {
    const a = await answer(line.trim());
    process.stdout.write((a === undefined ? `unknown query ${line.trim()}` : a) + '\n');
  });
  rl.on('close', () => broker.stop().finally(() => process.exit(0)));
}

async function main () {
  const broker = newBroker();
  if (role === 'sub') {
    broker.createService({
      name: env.GROUP,
      events: {
        'bench.event' (ctx) {
          record(nowUs() - ctx.params.t);
        }
      }
    });
    await broker.start();
    process.stdout.write('ready\n');
    serve(broker, (q) => {
      if (q === 'snap') return snap();
      if (q === 'total') return String(total);
      if (q === 'mallocs') return '0';
    });
  } else if (role === 'emit') {
    await broker.start();
    await broker.waitForServices(env.GROUPS.split(','), 60 * 1000);
    let running = false;
    let loops = [];
    let emitted = 0;
    let errors = 0;
    let firstErr = '';
    let pending = 0;
    const loop = async () => {
      let k = 0;
      while (running) {
        pending++;
        try {
          await broker.emit('bench.event', { t: nowUs() });
          emitted++;
        } catch (err) {
          errors++;
          if (!firstErr) firstErr = String(err && err.message ? err.message : err).replace(/\n/g, ' ');
        } finally {
          pending--;
        }
        // If emit settles without waiting on I/O, a loop of them would
        // never give the event loop a turn (stdin, sockets): yield now
        // and then.
        if (++k % 64 === 0) await new Promise((resolve) => setImmediate(resolve));
      }
    };
    process.stdout.write('ready\n');
    serve(broker, async (q) => {
      if (q.startsWith('start ')) {
        running = true;
        loops = Array.from({ length: Number(q.slice(6)) }, loop);
        return 'ok';
      }
      if (q === 'stop') {
        running = false;
        // An emit that never settles would hold stop for ever: wait 20 s
        // at most, and count those still pending as failed.
        let timer;
        const late = await Promise.race([
          Promise.all(loops).then(() => false),
          new Promise((resolve) => { timer = setTimeout(() => resolve(true), 20 * 1000); })
        ]);
        clearTimeout(timer);
        if (late) {
          errors += pending;
          if (!firstErr) firstErr = `${pending} emits still pending 20 s after the loops were stopped`;
        }
        const a = `${emitted} ${errors}${firstErr ? ' ' + firstErr : ''}`;
        emitted = errors = 0;
        firstErr = '';
        return a;
      }
      if (q === 'mallocs') return '0';
    });
  } else {
    throw new Error(`unknown role ${JSON.stringify(role)} (sub, emit)`);
  }
}

main().catch((err) => {
  process.stderr.write(`events.mjs (${role}): ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
