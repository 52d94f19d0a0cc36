// A Seneca 3 client of a wizard node at 127.0.0.1:PORT (seneca-transport
// over TCP, or HTTP with TYPE=http), for runtime/microwizard's tests: it runs each scenario and
// prints one JSON line per scenario, {name, res} or {name, err}, then
// {"done": true}. LOOPID names the Go node's instance id for the loop
// scenario, which writes a raw request whose track holds it.
const Net = require('net')
const Http = require('http')
const Seneca = require('seneca')

const port = Number(process.argv[2])
const only = process.argv.slice(3)
const seneca = Seneca({ log: 'silent' })
seneca.client({ type: process.env.TYPE || 'tcp', host: '127.0.0.1', port, pin: 'role:go' })
const out = (x) => process.stdout.write(JSON.stringify(x) + '\n')

function act (pattern, msg) {
  return new Promise((resolve) => {
    seneca.act(pattern, msg, function (err, res) {
      if (err) resolve({ err: { name: err.name, message: err.message, code: err.code, orig: err.orig && { name: err.orig.name, message: err.orig.message, code: err.orig.code }, stack: err.stack } })
      else resolve({ res: res ?? null })
    })
  })
}

// raw writes one line on its own connection and waits 1 s for an answer.
function raw (obj) {
  return new Promise((resolve) => {
    const c = Net.connect(port, '127.0.0.1')
    let buf = ''
    const t = setTimeout(() => { c.destroy(); resolve({ res: { answered: false } }) }, 1000)
    c.on('data', (d) => { buf += d; if (buf.includes('\n')) { clearTimeout(t); c.destroy(); resolve({ res: { answered: true, line: JSON.parse(buf.split('\n')[0]) } }) } })
    c.on('error', () => {})
    c.write(JSON.stringify(obj) + '\n')
  })
}

// post posts act with a seneca-track header and returns the status and
// the body.
function post (track, act) {
  return new Promise((resolve) => {
    const body = JSON.stringify(act)
    const req = Http.request({ host: '127.0.0.1', port, path: '/act', method: 'POST', headers: { 'content-type': 'application/json', 'seneca-id': 'h1/t1', 'seneca-origin': 'someone', 'seneca-track': JSON.stringify(track) } }, (res) => {
      let buf = ''
      res.on('data', (d) => { buf += d })
      res.on('end', () => resolve({ res: { status: res.statusCode, body: JSON.parse(buf), accept: res.headers['seneca-accept'] } }))
    })
    req.end(body)
  })
}

const scenarios = {
  httploop: () => post(['someone', process.env.LOOPID], { role: 'go', cmd: 'sum', a: 1, b: 1 }),
  httpok: () => post(['someone'], { role: 'go', cmd: 'sum', a: 1, b: 1 }),
  act: () => act('role:go,cmd:sum', { a: 1, b: 2 }),
  big: () => act('role:go,cmd:size', { s: 'x'.repeat(1 << 20) }),
  wide: () => act('role:go,cmd:size', Object.fromEntries(Array.from({ length: 1000 }, (_, i) => ['f' + i, i]))),
  huge: () => act('role:go,cmd:size', { s: 'x'.repeat(2 << 20) }),
  nosync: () => act('role:go,cmd:note', { v: 42, sync$: false }),
  fail: () => act('role:go,cmd:fail', {}),
  timeout: () => act('role:go,cmd:slow', { timeout$: 1500 }),
  loop: () => raw({ id: 'l1/t1', kind: 'act', origin: 'someone', track: ['someone', process.env.LOOPID], act: { role: 'go', cmd: 'sum', a: 1, b: 1 }, sync: true }),
  badkind: () => raw({ id: 'k1/t1', kind: 'zz', origin: 'someone', act: { role: 'go', cmd: 'sum', a: 1, b: 1 }, sync: true }),
  rawok: () => raw({ id: 'o1/t1', kind: 'act', origin: 'someone', track: ['someone'], act: { role: 'go', cmd: 'sum', a: 1, b: 1 }, sync: true })
}

seneca.ready(async function () {
  for (const name of only) {
    out({ name, ...(await scenarios[name]()) })
  }
  out({ done: true })
  process.exit(0)
})
