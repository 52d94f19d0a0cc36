// A Seneca 3 node for runtime/microwizard's loop tests (seneca-transport
// over TCP, or HTTP with TYPE=http): it listens on 127.0.0.1, prints
// {"port": N}, reads the Go node's port from its first stdin line, and
// makes that node its client for role:go. role:loop,cmd:node forwards its
// message to role:go,cmd:loop; role:loop,cmd:count answers how often
// role:loop,cmd:node ran and the tracks it saw. It runs until stdin
// closes.
//
// The relay drops transport$: seneca-transport 8.3's prepare_request
// copies a forwarded message's transport$.track with seneca.util.deep,
// which makes the array an object, and then throws on track.push (the
// process dies). So a Seneca relay's call starts a track of its own id.
const Net = require('net')
const Seneca = require('seneca')

const type = process.env.TYPE || 'tcp'
const runs = []
let stdin = ''
const free = Net.createServer().listen(0, '127.0.0.1', function () {
  const port = free.address().port
  free.close(function () {
    const seneca = Seneca({ log: 'silent' })
    seneca.add('role:loop,cmd:node', function (msg, reply) {
      runs.push((msg.transport$ && msg.transport$.track) || [])
      const out = Object.assign({}, msg, { role: 'go', cmd: 'loop', timeout$: 3000 })
      delete out.transport$
      this.act(out, reply)
    })
    seneca.add('role:loop,cmd:count', function (msg, reply) { reply(null, { runs: runs.length, tracks: runs }) })
    seneca.listen({ type, host: '127.0.0.1', port })
    seneca.ready(function () {
      process.stdout.write(JSON.stringify({ port, id: seneca.id }) + '\n')
      process.stdin.on('data', function (d) {
        const had = stdin.includes('\n')
        stdin += d
        if (had || !stdin.includes('\n')) return
        seneca.client({ type, host: '127.0.0.1', port: Number(stdin.split('\n')[0]), pin: 'role:go' })
        seneca.ready(function () { process.stdout.write(JSON.stringify({ ready: true }) + '\n') })
      })
    })
  })
})
process.stdin.on('end', () => process.exit(0))
process.stdin.resume()
