const { spawn } = require('child_process')
const Seneca = require('seneca')
const p = spawn('node', ['sn-server.js'], { cwd: process.cwd(), env: { ...process.env, TYPE: process.env.TYPE || 'tcp' }, stdio: ['pipe', 'pipe', 'inherit'] })
p.stdout.once('data', (d) => {
  const port = JSON.parse(d).port
  const s = Seneca({ log: 'silent' })
  s.client({ type: process.env.TYPE || 'tcp', host: '127.0.0.1', port, pin: 'role:test' })
  s.ready(() => s.act('role:test,cmd:fail', {}, (err, res) => {
    const o = {}
    for (const k of Object.getOwnPropertyNames(err)) if (k !== 'stack') o[k] = err[k]
    console.log(JSON.stringify(o, null, 1))
    console.log('name', err.name, 'orig', err.orig, err.orig && err.orig.name, err.orig && err.orig.message)
    p.stdin.end(); process.exit(0)
  }))
})
