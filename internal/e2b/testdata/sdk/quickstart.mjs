// The e2b SDK's quickstart and more, against sandboxctl serve --e2b.
// E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY point the SDK at it;
// OTHER_API_KEY is a second agent's key. Every check throws on failure;
// the last line printed is E2B-SDK-OK.
import assert from 'node:assert/strict'
import { Sandbox, CommandExitError, NotFoundError, SandboxNotFoundError, AuthenticationError, TimeoutError, RateLimitError } from 'e2b'

const run = `r${process.pid}`
const step = (s) => console.log(`step: ${s}`)
const until = async (what, cond, ms = 20000) => {
  const end = Date.now() + ms
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

step('create')
const sbx = await Sandbox.create({ metadata: { suite: 'e2b', run }, envs: { GREETING: 'hello' }, timeoutMs: 120_000 })
assert.ok(sbx.sandboxId)
console.log(`sandbox-id: ${sbx.sandboxId}`)

step('run echo with onStdout')
let seen = ''
const r = await sbx.commands.run('echo hi', { onStdout: (d) => { seen += d } })
assert.equal(r.exitCode, 0)
assert.equal(r.stdout, 'hi\n')
assert.equal(seen, 'hi\n')

step('exit code, stderr and the sandbox envs')
await assert.rejects(sbx.commands.run('echo $GREETING >&2; exit 3'), (err) => {
  assert.ok(err instanceof CommandExitError, String(err))
  assert.equal(err.exitCode, 3)
  assert.equal(err.stderr, 'hello\n')
  return true
})
const withEnv = await sbx.commands.run('echo "$A-$PWD"', { envs: { A: 'x y' }, cwd: '/workspace' })
assert.equal(withEnv.stdout, 'x y-/workspace\n')

step('background command, list, connect, sendStdin, closeStdin')
const bg = await sbx.commands.run('read line; echo got:$line; cat; echo eof', { background: true, stdin: true })
assert.ok(bg.pid > 0)
const listed = await sbx.commands.list()
assert.ok(listed.some((p) => p.pid === bg.pid), JSON.stringify(listed))
let connected = ''
const again = await sbx.commands.connect(bg.pid, { onStdout: (d) => { connected += d } })
await sbx.commands.sendStdin(bg.pid, 'abc\n')
await sbx.commands.sendStdin(bg.pid, 'rest\n')
await sbx.commands.closeStdin(bg.pid)
const bgRes = await again.wait()
assert.equal(bgRes.stdout, 'got:abc\nrest\neof\n')
assert.equal(connected, 'got:abc\nrest\neof\n')

step('a command timeout')
await assert.rejects(sbx.commands.run('sleep 30', { timeoutMs: 1000 }), (err) => err instanceof TimeoutError)

step('kill')
const sleeper = await sbx.commands.run('sleep 600', { background: true })
assert.equal(await sbx.commands.kill(sleeper.pid), true)
await assert.rejects(sleeper.wait(), (err) => err instanceof CommandExitError && err.exitCode !== 0)
assert.equal(await sbx.commands.kill(987654), false)

step('files')
const info = await sbx.files.write('/tmp/e2b/dir/a.txt', 'content of a')
assert.equal(info.path, '/tmp/e2b/dir/a.txt')
assert.equal(await sbx.files.read('/tmp/e2b/dir/a.txt'), 'content of a')
const bytes = new Uint8Array([0, 1, 2, 255, 10])
await sbx.files.write('/tmp/e2b/bin', bytes.buffer)
assert.deepEqual(await sbx.files.read('/tmp/e2b/bin', { format: 'bytes' }), bytes)
const multi = await sbx.files.write([{ path: '/tmp/e2b/m1.txt', data: 'one' }, { path: '/tmp/e2b/sub/m2.txt', data: 'two' }])
assert.equal(multi.length, 2)
assert.equal(await sbx.files.read('/tmp/e2b/sub/m2.txt'), 'two')
const entries = await sbx.files.list('/tmp/e2b')
assert.deepEqual(entries.map((e) => e.name).sort(), ['bin', 'dir', 'm1.txt', 'sub'])
assert.equal(entries.find((e) => e.name === 'dir').type, 'dir')
assert.equal(entries.find((e) => e.name === 'm1.txt').size, 3)
const deep = await sbx.files.list('/tmp/e2b', { depth: 2 })
assert.ok(deep.some((e) => e.path === '/tmp/e2b/dir/a.txt'), JSON.stringify(deep.map((e) => e.path)))
assert.equal((await sbx.files.getInfo('/tmp/e2b/m1.txt')).type, 'file')
assert.equal(await sbx.files.exists('/tmp/e2b/m1.txt'), true)
assert.equal(await sbx.files.exists('/tmp/e2b/none'), false)
assert.equal(await sbx.files.makeDir('/tmp/e2b/new/deeper'), true)
assert.equal(await sbx.files.makeDir('/tmp/e2b/new/deeper'), false)
await sbx.files.rename('/tmp/e2b/m1.txt', '/tmp/e2b/new/m1.txt')
assert.equal(await sbx.files.read('/tmp/e2b/new/m1.txt'), 'one')
await sbx.files.remove('/tmp/e2b/new')
assert.equal(await sbx.files.exists('/tmp/e2b/new'), false)
await assert.rejects(sbx.files.read('/tmp/e2b/missing'), (err) => err instanceof NotFoundError)
let streamed = ''
for await (const chunk of await sbx.files.read('/tmp/e2b/dir/a.txt', { format: 'stream' })) streamed += new TextDecoder().decode(chunk)
assert.equal(streamed, 'content of a')

step('watch a directory')
await sbx.files.makeDir('/tmp/watched')
const events = []
const handle = await sbx.files.watchDir('/tmp/watched', (ev) => { events.push(ev) })
await sbx.files.write('/tmp/watched/new.txt', 'x')
await until('a create event', () => events.some((e) => e.name === 'new.txt' && e.type === 'create'))
await sbx.files.remove('/tmp/watched/new.txt')
await until('a remove event', () => events.some((e) => e.name === 'new.txt' && e.type === 'remove'))
await handle.stop()

step('pty with resize')
let term = ''
const decoder = new TextDecoder()
const pty = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { term += decoder.decode(d) } })
await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('stty size\n'))
await until('the first size', () => term.includes('24 80'))
await sbx.pty.resize(pty.pid, { cols: 100, rows: 30 })
await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('stty size; exit\n'))
await until('the new size', () => term.includes('30 100'))
await pty.wait().catch(() => {})
const pty2 = await sbx.pty.create({ cols: 80, rows: 24, onData: () => {} })
assert.equal(await sbx.pty.kill(pty2.pid), true)
await assert.rejects(pty2.wait(), (err) => err instanceof CommandExitError)

step('pause, and connect resumes')
assert.equal(await sbx.pause(), true)
assert.equal(await sbx.pause(), false)
assert.equal((await sbx.getInfo()).state, 'paused')
assert.deepEqual((await Sandbox.list({ query: { metadata: { run }, state: ['paused'] } }).nextItems()).map((s) => s.sandboxId), [sbx.sandboxId])
assert.equal(await sbx.isRunning(), false)
const resumed = await Sandbox.connect(sbx.sandboxId)
assert.equal((await resumed.commands.run('echo resumed')).stdout, 'resumed\n')

step('list, info, timeout, connect')
const mine = await Sandbox.list({ query: { metadata: { run } } }).nextItems()
assert.deepEqual(mine.map((s) => s.sandboxId), [sbx.sandboxId])
assert.equal(mine[0].metadata.suite, 'e2b')
assert.equal((await Sandbox.list({ query: { metadata: { run: 'other' } } }).nextItems()).length, 0)
const before = await sbx.getInfo()
assert.equal(before.state, 'running')
await sbx.setTimeout(600_000)
const after = await sbx.getInfo()
assert.ok(after.endAt.getTime() > before.endAt.getTime() + 60_000, `${before.endAt} -> ${after.endAt}`)
const other = await Sandbox.connect(sbx.sandboxId)
assert.equal((await other.commands.run('echo again')).stdout, 'again\n')
assert.equal(await sbx.isRunning(), true)

step('errors: the sandbox quota (sandbox.maxPerAgent: 2)')
const second = await Sandbox.create()
console.log(`sandbox-id: ${second.sandboxId}`)
await assert.rejects(Sandbox.create(), (err) => err instanceof RateLimitError)
await second.kill()

step('templates: sandbox.templates by name, an unknown one refused')
const small = await Sandbox.create('small')
console.log(`sandbox-id: ${small.sandboxId}`)
assert.equal((await small.getInfo()).templateId, 'small')
assert.equal((await small.commands.run('echo $FLAVOR')).stdout, 'small\n')
await small.kill()
await assert.rejects(Sandbox.create('nosuchtemplate'), (err) => err.statusCode === 404)

step('errors: unauthorized, not found, another key')
await assert.rejects(Sandbox.create({ apiKey: 'not-a-key-0123456789' }), (err) => err instanceof AuthenticationError)
await assert.rejects(Sandbox.connect('inosuchsandbox'), (err) => err instanceof SandboxNotFoundError)
await assert.rejects(Sandbox.getInfo(sbx.sandboxId, { apiKey: process.env.OTHER_API_KEY }), (err) => err instanceof NotFoundError)
assert.equal((await Sandbox.list({ apiKey: process.env.OTHER_API_KEY, query: { metadata: { run } } }).nextItems()).length, 0)
assert.equal(await Sandbox.kill(sbx.sandboxId, { apiKey: process.env.OTHER_API_KEY }), false)
step('kill')
await sbx.kill()
await assert.rejects(Sandbox.getInfo(sbx.sandboxId), (err) => err instanceof NotFoundError)
await assert.rejects(sbx.commands.run('echo dead'))
assert.equal(await sbx.isRunning(), false)
step('a sandbox timeout')
const brief = await Sandbox.create({ timeoutMs: 2000 })
console.log(`sandbox-id: ${brief.sandboxId}`)
await until('the sandbox to time out', async () => !(await brief.isRunning()))
await assert.rejects(Sandbox.getInfo(brief.sandboxId), (err) => err instanceof NotFoundError)
console.log('E2B-SDK-OK')
