// A MicroWizard 1.5.0 client of a wizard node at 127.0.0.1:PORT, for
// runtime/microwizard's tests: it runs each scenario and prints one JSON
// line per scenario, {name, res} or {name, err: {name, message, code,
// stack}}, then {"done": true}. TIMEOUT sets the client's timeout in ms
// (default 1500).
import Micro from 'microwizard';

const port = Number(process.argv[2]);
const mc = new Micro();
await mc.client({ type: 'tcp', host: '127.0.0.1', port, pin: 'role:go', timeout: Number(process.env.TIMEOUT || 1500) });

const out = (x) => process.stdout.write(JSON.stringify(x) + '\n');
async function run (name, f) {
  try {
    out({ name, res: (await f()) ?? null });
  } catch (e) {
    out({ name, err: typeof e === 'string' ? { message: e } : { name: e.name, message: e.message, code: e.code, stack: e.stack } });
  }
}

const only = process.argv.slice(3);
const scenarios = {
  act: () => mc.act('role:go,cmd:sum', { a: 1, b: 2 }),
  actE: () => mc.actE('role:go,cmd:echo', { kind: 'mix', v: 7 }, { mixin: ['kind'] }),
  typed: () => mc.act('role:go,cmd:typed', { values: [1.5, 2] }),
  nosync: () => mc.act('role:go,cmd:note', { v: 42 }, { sync: false }),
  fail: () => mc.act('role:go,cmd:fail', {}),
  timeout: () => mc.act('role:go,cmd:slow', {}),
  overload: () => mc.act('role:go,cmd:block', {}),
  // The first call waits for the connection, at most connectTimeout
  // (355 ms): warm opens it before calls that take long to build.
  warm: () => mc.act('role:go,cmd:size', {}),
  big: () => mc.act('role:go,cmd:size', { s: 'x'.repeat(1 << 20) }),
  big5: () => mc.act('role:go,cmd:size', { s: 'x'.repeat(5 << 20) }),
  // 64 calls held until a call sent after a 5 MiB one releases them.
  flood: async () => {
    await mc.act('role:go,cmd:size', {}); // connected: no call waits for the connection
    const holds = Array.from({ length: 64 }, (_, i) => mc.act('role:go,cmd:hold', { i }));
    const start = Date.now();
    const big = mc.act('role:go,cmd:size', { s: 'x'.repeat(5 << 20) }).then(
      (res) => ({ res, ms: Date.now() - start }),
      (e) => ({ err: typeof e === 'string' ? { message: e } : { name: e.name, message: e.message, code: e.code }, ms: Date.now() - start }));
    const release = mc.act('role:go,cmd:release', {});
    const settled = await Promise.allSettled([...holds, release]);
    const failed = settled.filter((s) => s.status === 'rejected').map((s) => String(s.reason?.message ?? s.reason));
    return { big: await big, ok: settled.length - failed.length, failed: [...new Set(failed)] };
  },
  num: () => mc.act('role:go,cmd:num', { v: 1e21 }),
  unsafe: () => mc.act('role:go,cmd:unsafe', {}),
  wide: () => mc.act('role:go,cmd:size', Object.fromEntries(Array.from({ length: 1000 }, (_, i) => ['f' + i, i])))
};
for (const name of only) {
  await run(name, scenarios[name]);
}
out({ done: true });
process.exit(0);
