// A background command survives a daemon SIGKILL: "start" creates a
// sandbox, starts a command waiting for input and prints
// {"sandboxId", "pid"}; after the test restarts the daemon, "connect ID
// PID" finds the process, feeds it and reads its whole output.
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'

const [mode, id, pid] = process.argv.slice(2)
if (mode === 'start') {
  const sbx = await Sandbox.create({ metadata: { suite: 'e2b-restart' } })
  console.log(`sandbox-id: ${sbx.sandboxId}`)
  const h = await sbx.commands.run('echo before; read x; echo after:$x', { background: true, stdin: true })
  let out = ''
  const c = await sbx.commands.connect(h.pid, { onStdout: (d) => { out += d } })
  const end = Date.now() + 20000
  while (!out.includes('before') && Date.now() < end) await new Promise((r) => setTimeout(r, 50))
  assert.ok(out.includes('before'), out)
  await c.disconnect()
  console.log(JSON.stringify({ sandboxId: sbx.sandboxId, pid: h.pid }))
  process.exit(0)
}
assert.equal(mode, 'connect')
const sbx = await Sandbox.connect(id)
const list = await sbx.commands.list()
assert.ok(list.some((p) => p.pid === Number(pid)), JSON.stringify(list))
let out = ''
const h = await sbx.commands.connect(Number(pid), { onStdout: (d) => { out += d } })
await sbx.commands.sendStdin(Number(pid), 'z\n')
const res = await h.wait()
assert.equal(res.exitCode, 0)
assert.equal(out, 'before\nafter:z\n')
await sbx.kill()
console.log('E2B-SDK-OK')
