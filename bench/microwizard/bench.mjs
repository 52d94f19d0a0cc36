// MicroWizard 1.5.0 for wizard/bench's comparison (bench/internal/harness
// starts it). One script, three roles, chosen by the first argument:
//
//   serve                 a node listening over TCP on 127.0.0.1 (any port),
//                         serving role:bench,cmd:add {a, b} -> {r: a + b};
//                         prints its address, stops when stdin ends.
//   load ADDR             a client({type: 'tcp'}) to ADDR; prints "ready", then
//                         for each line "C W D MAX" of stdin drives C
//                         concurrent loops of actE('role:bench,cmd:add',
//                         {a, b}) for W ms of warm-up and D ms measured
//                         (MAX calls at most, 0: no bound).
//   inproc MODE C W D MAX the same loops against a handler in this process,
//                         by actE or act (MODE).
//
// Each run of load, and inproc, prints one JSON line: the calls completed in the window,
// the window's length, the errors (wrong answers included) and the p50 and
// p99 latency in ns, the harness's definitions (nearest rank).
import Micro from 'microwizard';
import { drive, serveRuns } from '../nodeload/drive.mjs';

const PATTERN = 'role:bench,cmd:add';
const [role, ...args] = process.argv.slice(2);

function handler (d) {
  return { r: d.a + d.b };
}

const numbers = (xs) => xs.map(Number);

if (role === 'serve') {
  const mc = new Micro();
  mc.add(PATTERN, handler);
  const l = await mc.listen({ type: 'tcp', host: '127.0.0.1', port: 0 });
  process.stdout.write(`127.0.0.1:${l.port}\n`);
  process.stdin.on('end', () => process.exit(0));
  process.stdin.resume();
} else if (role === 'load') {
  const [host, port] = args[0].split(':');
  const mc = new Micro();
  await mc.client({ type: 'tcp', host, port: Number(port), pin: PATTERN });
  // One call first: the loops start on a connected client.
  const first = await mc.actE(PATTERN, { a: 1, b: 2 });
  if (!first || first.r !== 3) throw new Error(`1 + 2 answered ${JSON.stringify(first)}`);
  await serveRuns((a, b) => mc.actE(PATTERN, { a, b }));
  process.exit(0);
} else if (role === 'inproc') {
  const mode = args[0];
  const [callers, w, d, max] = numbers(args.slice(1));
  const mc = new Micro();
  mc.add(PATTERN, handler);
  const call = mode === 'act'
    ? (a, b) => mc.act(PATTERN, { a, b })
    : (a, b) => mc.actE(PATTERN, { a, b });
  await drive(call, callers, w, d, max);
  process.exit(0);
} else {
  process.stderr.write(`bench.mjs: unknown role ${JSON.stringify(role)} (serve, load, inproc)\n`);
  process.exit(2);
}
