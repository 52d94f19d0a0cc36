// A MicroWizard 1.5.0 node listening over TCP on 127.0.0.1 (port 0: any),
// for runtime/microwizard's tests. It prints {"port": N} once listening,
// and runs until stdin closes.
import Micro from 'microwizard';

const by = process.argv[2] || 'node';
const mc = new Micro();
mc.add('role:math,cmd:sum', async (msg) => ({ answer: msg.a + msg.b, by }));
mc.add('role:mesh,cmd:who', async () => ({ by }));
mc.add('role:test,cmd:fail', async () => {
  const e = new TypeError('bad input from node');
  e.code = 'invalid_argument';
  throw e;
});
mc.add('role:test,cmd:slow', () => new Promise((resolve) => setTimeout(() => resolve({ late: true }), 3000)));
mc.add('role:test,cmd:echo', async (msg) => ({ got: msg }));
mc.add('role:test,cmd:size', async (msg) => ({ len: typeof msg.s === 'string' ? msg.s.length : 0, keys: Object.keys(msg).length }));
mc.add('role:test,cmd:grow', async (msg) => ({ s: 'x'.repeat(msg.n) }));
mc.add('role:glob,cmd:one', async (msg) => ({ which: 'one', got: msg }));
mc.add('role:glob,cmd:two', async (msg) => ({ which: 'two', got: msg }));
const listening = await mc.listen({ type: 'tcp', host: '127.0.0.1', port: Number(process.env.PORT || 0) });
process.stdout.write(JSON.stringify({ port: listening.port }) + '\n');
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
