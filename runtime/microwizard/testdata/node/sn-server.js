// A Seneca 3 node listening over TCP (or HTTP with TYPE=http;
// seneca-transport) on 127.0.0.1, for
// runtime/microwizard's tests. It prints {"port": N} once listening, and
// runs until stdin closes.
const Net = require('net')
const Seneca = require('seneca')

const by = process.argv[2] || 'seneca'
const free = Net.createServer().listen(0, '127.0.0.1', function () {
  const port = free.address().port
  free.close(function () {
    const seneca = Seneca({ log: 'silent' })
    seneca.add('role:math,cmd:sum', function (msg, reply) { reply(null, { answer: msg.a + msg.b, by }) })
    seneca.add('role:mesh,cmd:who', function (msg, reply) { reply(null, { by }) })
    seneca.add('role:test,cmd:echo', function (msg, reply) { reply(null, { got: seneca.util.clean(msg) }) })
    seneca.add('role:test,cmd:fail', function (msg, reply) {
      const e = new RangeError('bad input from seneca')
      e.code = 'out_of_range'
      reply(e)
    })
    seneca.listen({ type: process.env.TYPE || 'tcp', host: '127.0.0.1', port })
    seneca.ready(function () {
      process.stdout.write(JSON.stringify({ port }) + '\n')
    })
  })
})
process.stdin.on('end', () => process.exit(0))
process.stdin.resume()
