// The load loop of wizard/bench's Node.js clients (microwizard/bench.mjs,
// moleculer/rpc.mjs): concurrent loops of one call, timed with
// process.hrtime, reported as one JSON line a run in the harness's terms
// (bench/internal/harness/external.go reads it). No dependencies, so each
// contender's folder imports it as it is.
import readline from 'node:readline';

// drive runs callers loops of call(a, b) and prints what it measured.
export async function drive (call, callers, warmupMs, durationMs, maxCalls) {
  const from = process.hrtime.bigint() + BigInt(Math.round(warmupMs * 1e6));
  const to = from + BigInt(Math.round(durationMs * 1e6));
  let started = 0;
  let errors = 0;
  let firstErr = '';
  const lat = [];
  async function loop (w) {
    for (let i = 0; ; i++) {
      const s = process.hrtime.bigint();
      if (s >= to || (maxCalls > 0 && ++started > maxCalls)) return;
      try {
        const res = await call(w, i);
        if (!res || res.r !== w + i) throw new Error(`${w} + ${i} answered ${JSON.stringify(res)}`);
        const e = process.hrtime.bigint();
        if (e >= from && e < to) lat.push(Number(e - s));
      } catch (err) {
        if (errors++ === 0) firstErr = String(err && err.message ? err.message : err);
      }
    }
  }
  await Promise.all(Array.from({ length: callers }, (_, w) => loop(w)));
  let end = process.hrtime.bigint();
  if (end > to) end = to;
  lat.sort((x, y) => x - y);
  const pct = (q) => lat.length === 0 ? 0 : lat[Math.max(0, Math.min(Math.ceil(q * lat.length) - 1, lat.length - 1))];
  process.stdout.write(JSON.stringify({
    calls: lat.length, windowNs: Number(end - from), errors, firstErr, p50Ns: pct(0.5), p99Ns: pct(0.99)
  }) + '\n');
}

// serveRuns prints "ready", then drives one run for each line of stdin,
// "CALLERS WARMUP_MS DURATION_MS MAX_CALLS", printing its JSON line; it
// returns when stdin ends. One process serves every run of a contender:
// its client stays connected and warm between runs.
export async function serveRuns (call) {
  process.stdout.write('ready\n');
  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    const [callers, w, d, max] = line.trim().split(/\s+/).map(Number);
    await drive(call, callers, w, d, max);
  }
}
