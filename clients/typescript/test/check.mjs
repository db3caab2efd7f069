// Drives @sandboxctl/client against a live daemon (run by TestTypeScriptClient
// from a directory where the package was installed with npm).
// Usage: node check.mjs URL TOKEN AGENT
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { Client, SandboxctlError } from "@sandboxctl/client";

const [url, token, agent] = process.argv.slice(2);
const c = new Client(url, token);
assert.equal((await c.health()).ok, true);

const abort = new AbortController();
const exits = [];
const following = (async () => {
  try {
    for await (const ev of c.events({ signal: abort.signal })) {
      if (ev.type === "exit") {
        exits.push(ev);
        return;
      }
    }
  } catch (e) {
    if (e.name !== "AbortError") throw e;
  }
})();

const r = await c.exec({ command: "echo from-node; exit 6", agentId: agent });
assert.equal(r.details.status, "completed");
assert.equal(r.details.exitCode, 6);
assert.match(r.content[0].text, /from-node/);
const bg = await c.exec({ command: "sleep 30", agentId: agent, background: true });
const sid = bg.details.sessionId;
assert.match((await c.process({ action: "list", agentId: agent })).content[0].text, new RegExp(sid));
assert.ok((await c.sessions({ agentId: agent })).sessions.some((s) => s.sessionId === sid && s.agentId === agent));
await c.process({ action: "kill", sessionId: sid, agentId: agent });
await Promise.race([following, new Promise((_, rej) => setTimeout(() => rej(new Error("no exit event")), 30000))]);
abort.abort();
assert.ok(exits.some((ev) => ev.sessionId === sid), JSON.stringify(exits));
await assert.rejects(c.exec({ command: "true", host: "elsewhere" }), (e) => e instanceof SandboxctlError && e.status === 400);

// Streamed exec: frames in order, offsets contiguous, the exit code, and
// last the result the plain call answers.
const byteLen = (s) => new TextEncoder().encode(s).length;
const streamCmd = "echo one; sleep 0.1; echo two >&2; sleep 0.1; echo three; echo four; exit 7";
const frames = [];
for await (const f of c.execStream({ command: streamCmd, agentId: agent })) frames.push(f);
const types = frames.map((f) => f.type);
assert.equal(types[0], "start", types.join(","));
assert.ok(frames[0].sessionId, JSON.stringify(frames[0]));
assert.deepEqual(types.slice(-2), ["exit", "result"], types.join(","));
let next = 0;
let streamed = { stdout: "", stderr: "" };
for (const f of frames.slice(1, -2)) {
  assert.ok(["stdout", "stderr", "status"].includes(f.type), JSON.stringify(f));
  if (f.type === "status") continue;
  assert.equal(f.offset, next, JSON.stringify(frames));
  next = f.offset + byteLen(f.data);
  streamed[f.type] += f.data;
}
assert.equal(streamed.stdout, "one\nthree\nfour\n");
assert.equal(streamed.stderr, "two\n");
const exitFrame = frames.at(-2);
assert.equal(exitFrame.status, "completed", JSON.stringify(exitFrame));
assert.equal(exitFrame.exitCode, 7, JSON.stringify(exitFrame));
const streamedResult = frames.at(-1).result;
const plain = await c.exec({ command: streamCmd, agentId: agent });
const sortedKeys = (o) => Object.keys(o).sort().join(",");
assert.equal(sortedKeys(streamedResult), sortedKeys(plain));
assert.equal(sortedKeys(streamedResult.details), sortedKeys(plain.details));
for (const k of ["status", "exitCode", "aggregated", "cwd"]) assert.deepEqual(streamedResult.details[k], plain.details[k], k);
assert.equal(streamedResult.details.exitCode, 7);
assert.deepEqual(streamedResult.content, plain.content);
await assert.rejects(
  (async () => {
    for await (const f of c.execStream({ command: " ", agentId: agent })) throw new Error(`frame ${JSON.stringify(f)}`);
  })(),
  (e) => e instanceof SandboxctlError && e.status === 400,
);

// Follow a background session from offset 0 and from the middle.
const bgs = await c.exec({ command: "printf 'alpha\\n'; sleep 0.2; printf 'beta\\n'; exit 4", agentId: agent, background: true });
const bgId = bgs.details.sessionId;
async function followAll(from) {
  const got = [];
  for await (const f of c.followSession(bgId, from, { agentId: agent })) got.push(f);
  assert.equal(got[0].type, "start", JSON.stringify(got));
  assert.equal(got[0].sessionId, bgId);
  const last = got.at(-1);
  assert.equal(last.type, "exit", JSON.stringify(got));
  assert.equal(last.exitCode, 4, JSON.stringify(last));
  let at = from;
  let text = "";
  for (const f of got.slice(1, -1)) {
    if (f.type === "status") continue;
    assert.equal(f.type, "stdout", JSON.stringify(f));
    assert.equal(f.offset, at, JSON.stringify(got));
    at += byteLen(f.data);
    text += f.data;
  }
  return text;
}
assert.equal(await followAll(0), "alpha\nbeta\n");
assert.equal(await followAll(3), "ha\nbeta\n");
await assert.rejects(
  (async () => {
    for await (const f of c.followSession("no-such-session", 0, { agentId: agent })) throw new Error(`frame ${JSON.stringify(f)}`);
  })(),
  (e) => e instanceof SandboxctlError && e.status === 404,
);

const ref = { agentId: agent, path: "/workspace/node.txt" };
await c.writeFile(ref, "from node\n", { mode: 0o640 });
assert.equal(new TextDecoder().decode(await c.readFile(ref)), "from node\n");
const st = await c.stat(ref);
assert.equal(st.type, "file");
assert.equal(st.mode, 0o640);
const names = (await c.listFiles({ agentId: agent, path: "/workspace" })).entries.map((e) => e.name);
assert.ok(names.includes("node.txt"), names.join(","));
const tar = await c.downloadTar(ref);
assert.equal(new TextDecoder().decode(tar.slice(0, 8)), "node.txt");
await c.remove(ref);
await assert.rejects(c.stat(ref), (e) => e.status === 404);
await c.uploadTar({ agentId: agent, path: "/workspace" }, tar);
assert.equal(new TextDecoder().decode(await c.readFile(ref)), "from node\n");
await c.remove(ref);

// Raw: random bytes exactly through stdin and back on stdout.
const blob = randomBytes(1000);
const rawBg = await c.exec({ command: "cat", agentId: agent, background: true, raw: true });
const rawSid = rawBg.details.sessionId;
await c.writeStdin(rawSid, blob, { eof: true, agentId: agent });
const parts = [];
for await (const f of c.followSession(rawSid, 0, { agentId: agent, raw: true })) {
  if (f.type === "stdout") parts.push(f.bytes);
}
assert.ok(Buffer.concat(parts).equals(blob), "raw stdin round trip differs");

// Raw: 100 MB of random bytes on stdout, checked against the sandbox's own
// sha256 (on stderr), offsets contiguous, no output dropped.
const hash = createHash("sha256");
let errText = "";
let off = 0;
let rawExit;
let bigSid;
let rawFrames = c.execStream({
  command: "head -c 100000000 /dev/urandom > /tmp/r && sha256sum /tmp/r >&2 && cat /tmp/r; rm -f /tmp/r",
  agentId: agent,
  raw: true,
});
for (let pass = 0; pass < 2 && !rawExit; pass++) {
  for await (const f of rawFrames) {
    assert.notEqual(f.type, "dropped");
    if (f.type === "start") bigSid ??= f.sessionId;
    if (f.type === "stdout" || f.type === "stderr") {
      assert.equal(f.offset, off);
      off += f.bytes.length;
      if (f.type === "stdout") hash.update(f.bytes);
      else errText += new TextDecoder().decode(f.bytes);
    }
    if (f.type === "exit") {
      rawExit = f;
      break;
    }
  }
  // The yield window ended first: follow the session on from off.
  rawFrames = c.followSession(bigSid, off, { agentId: agent, raw: true });
}
assert.equal(rawExit?.exitCode, 0, JSON.stringify(rawExit));
assert.equal(errText.split(" ")[0], hash.digest("hex"));
assert.equal(off - errText.length, 100000000);
console.log("ok");
