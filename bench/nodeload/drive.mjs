// The load loop of wizard/bench's Node.js clients (microwizard/bench.mjs,
// moleculer/rpc.mjs): concurrent loops of one call, timed with
// process.hrtime, reported as one JSON line a run in the harness's terms
// (bench/internal/harness/external.go reads it). No dependencies, so each
// contender's folder imports it as it is.
import readline from 'node:readline';

// drive runs callers loops of call(a, b) and prints what it measured:
// the calls that end in the window [from, to) after the warm-up. While no
// call has ended since from, the window stays open past to until the
// first does, and that call counts (as benchkit.Window in Go): on a
// loaded machine a call may outlast a short window, and the run then
// measures it instead of 0 req/s. A failed call closes the window too.
export async function drive (call, callers, warmupMs, durationMs, maxCalls) {
  const from = process.hrtime.bigint() + BigInt(Math.round(warmupMs * 1e6));
  const to = from + BigInt(Math.round(durationMs * 1e6));
  let first = null; // the end of the first call ended at or after from
  let started = 0;
  let errors = 0;
  let firstErr = '';
  const lat = [];
  // ended records a call that ended at e and says whether it counts.
  const ended = (e, ok) => {
    if (e < from) return false;
    const won = first === null;
    if (won) first = e;
    return ok && (e < to || won);
  };
  async function loop (w) {
    for (let i = 0; ; i++) {
      const s = process.hrtime.bigint();
      if ((s >= to && first !== null) || (maxCalls > 0 && ++started > maxCalls)) return;
      try {
        const res = await call(w, i);
        if (!res || res.r !== w + i) throw new Error(`${w} + ${i} answered ${JSON.stringify(res)}`);
        const e = process.hrtime.bigint();
        if (ended(e, true)) lat.push(Number(e - s));
      } catch (err) {
        ended(process.hrtime.bigint(), false);
        if (errors++ === 0) firstErr = String(err && err.message ? err.message : err);
      }
    }
  }
  await Promise.all(Array.from({ length: callers }, (_, w) => loop(w)));
  const close = first !== null && first > to ? first : to;
  let end = process.hrtime.bigint();
  if (end > close) end = close; // else stopped by maxCalls
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
