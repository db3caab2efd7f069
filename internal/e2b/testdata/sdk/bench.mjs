// Time to interactive as the public sandbox benchmarks measure it:
// Sandbox.create() and the first commands.run('echo'), sequential. Each
// sandbox is killed after its timing. Prints the durations (ms) as JSON.
import { Sandbox } from 'e2b'

const n = Number(process.argv[2] || 50)
const out = []
for (let i = 0; i < n; i++) {
  const t0 = performance.now()
  const sbx = await Sandbox.create()
  const r = await sbx.commands.run('echo')
  out.push(performance.now() - t0)
  if (r.stdout !== '\n') throw new Error(`echo printed ${JSON.stringify(r.stdout)}`)
  await sbx.kill()
}
console.log(JSON.stringify(out))
