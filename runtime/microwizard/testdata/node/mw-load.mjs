// Load from one MicroWizard client: CALLERS concurrent loops of
// act('role:math,cmd:sum') against 127.0.0.1:PORT for MS milliseconds
// (after a 300 ms warm-up); prints {"calls": N, "ms": elapsed, "errors": E}.
import Micro from 'microwizard';

const [port, callers, ms] = process.argv.slice(2).map(Number);
const mc = new Micro();
await mc.client({ type: 'tcp', host: '127.0.0.1', port, pin: 'role:math,cmd:sum' });

async function loop (until, count) {
  let n = 0;
  let errors = 0;
  while (Date.now() < until) {
    try {
      await mc.act('role:math,cmd:sum', { a: 1, b: 2 });
      if (count) n++;
    } catch (e) {
      errors++;
    }
  }
  return [n, errors];
}
await Promise.all(Array.from({ length: callers }, () => loop(Date.now() + 300, false)));
const start = Date.now();
const res = await Promise.all(Array.from({ length: callers }, () => loop(start + ms, true)));
const elapsed = Date.now() - start;
const calls = res.reduce((s, [n]) => s + n, 0);
const errors = res.reduce((s, [, e]) => s + e, 0);
process.stdout.write(JSON.stringify({ calls, ms: elapsed, errors }) + '\n');
process.exit(0);
