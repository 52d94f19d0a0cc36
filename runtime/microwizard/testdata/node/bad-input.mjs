// Sends bad input to a wizard node at 127.0.0.1:PORT over raw TCP, as a
// broken or hostile Node.js peer would, and prints what came back: one
// JSON line per case, {case, answer | closed}.
import Net from 'net';

const port = Number(process.argv[2]);
const out = (x) => process.stdout.write(JSON.stringify(x) + '\n');

// send writes lines on a new connection and collects the answers until
// want lines came or the connection closed (or 3 s passed).
function send (lines, want) {
  return new Promise((resolve) => {
    const c = Net.connect(port, '127.0.0.1');
    const got = [];
    let buf = '';
    const finish = (closed) => { clearTimeout(timer); c.destroy(); resolve({ got, closed }); };
    const timer = setTimeout(() => finish(false), 3000);
    c.on('data', (d) => {
      buf += d.toString();
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        got.push(JSON.parse(buf.slice(0, i)));
        buf = buf.slice(i + 1);
      }
      if (got.length >= want) finish(false);
    });
    c.on('close', () => finish(true));
    c.on('error', () => {});
    c.write(lines.join('\n') + '\n');
  });
}

const ok = JSON.stringify({ id: 'ok', k: 'a', sync: true, args: { role: 'go', cmd: 'sum', a: 1, b: 1 } });
out({ case: 'unknown kind, then a call', ...(await send([JSON.stringify({ id: 'x', k: 'zz', sync: true }), ok], 1)) });
out({ case: 'garbage', ...(await send(['this is not json', ok], 1)) });
out({ case: 'oversized', ...(await send(['{"id":"big","k":"a","args":{"pad":"' + 'x'.repeat(200000) + '"}}', ok], 2)) });
out({ case: 'ping', ...(await send([JSON.stringify({ h: 1 })], 1)) });
out({ case: 'bad pattern', ...(await send([JSON.stringify({ id: 'p', k: 'aE', sync: true, p: 'role:,,', d: {} }), ok], 2)) });
out({ case: 'args not an object', ...(await send([JSON.stringify({ id: 'n', k: 'a', sync: true, args: [1, 2] })], 1)) });
out({ case: 'after all that', ...(await send([ok], 1)) });
out({ done: true });
