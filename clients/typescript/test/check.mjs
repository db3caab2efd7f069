// Drives @sandboxctl/client against a live daemon (run by TestTypeScriptClient
// from a directory where the package was installed with npm).
// Usage: node check.mjs URL TOKEN AGENT
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { Client, SandboxctlError } from "@sandboxctl/client";

// Entries of a tar archive (ustar, PAX and GNU long names): the sandbox's
// file tool writes PAX (owner uids past the ustar limit), so an archive may
// begin with an extended header ('x', applying path, linkpath, size to the
// next entry) or a global one ('g', applying to all that follow).
function tarEntries(buf) {
  const dec = new TextDecoder();
  const str = (b) => {
    const z = b.indexOf(0);
    return dec.decode(z < 0 ? b : b.subarray(0, z));
  };
  const num = (b) => {
    if (b[0] & 0x80) {
      // GNU base-256: big-endian, the top bit of the first byte a marker.
      let n = b[0] & 0x7f;
      for (const x of b.subarray(1)) n = n * 256 + x;
      return n;
    }
    const t = str(b).trim();
    return t ? parseInt(t, 8) : 0;
  };
  const paxRecords = (b) => {
    const out = {};
    let i = 0;
    while (i < b.length) {
      const sp = b.indexOf(0x20, i);
      if (sp < 0) break;
      const len = parseInt(dec.decode(b.subarray(i, sp)), 10);
      if (!(len > 0) || i + len > b.length) throw new Error("bad PAX record");
      const rec = dec.decode(b.subarray(sp + 1, i + len - 1)); // drop "\n"
      const eq = rec.indexOf("=");
      out[rec.slice(0, eq)] = rec.slice(eq + 1);
      i += len;
    }
    return out;
  };
  const entries = [];
  let global = {};
  let local = {};
  let off = 0;
  while (off + 512 <= buf.length) {
    const h = buf.subarray(off, off + 512);
    if (h.every((x) => x === 0)) break;
    const type = String.fromCharCode(h[156] || 0x30);
    const pax = { ...global, ...local };
    const size = pax.size !== undefined ? Number(pax.size) : num(h.subarray(124, 136));
    const data = buf.subarray(off + 512, off + 512 + size);
    off += 512 + Math.ceil(size / 512) * 512;
    if (type === "x") {
      local = { ...local, ...paxRecords(data) };
      continue;
    }
    if (type === "g") {
      global = { ...global, ...paxRecords(data) };
      continue;
    }
    if (type === "L" || type === "K") {
      local = { ...local, [type === "L" ? "path" : "linkpath"]: str(data) };
      continue;
    }
    let name = str(h.subarray(0, 100));
    const prefix = dec.decode(h.subarray(257, 262)) === "ustar" ? str(h.subarray(345, 500)) : "";
    if (prefix) name = prefix + "/" + name;
    entries.push({
      name: pax.path ?? name,
      linkname: pax.linkpath ?? str(h.subarray(157, 257)),
      type: type === "\0" ? "0" : type,
      size,
      data,
    });
    local = {};
  }
  return entries;
}

// tarEntries on a hand-made archive: a global header, a PAX header naming a
// long path, a GNU long name, and a plain entry.
{
  const enc = new TextEncoder();
  const block = (n) => new Uint8Array(Math.ceil(n / 512) * 512);
  const header = (name, size, type) => {
    const h = new Uint8Array(512);
    const put = (at, s) => h.set(enc.encode(s), at);
    put(0, name.slice(0, 99));
    put(100, "0000644\0");
    put(108, "0000000\0");
    put(116, "0000000\0");
    put(124, size.toString(8).padStart(11, "0") + "\0");
    put(136, "00000000000\0");
    put(148, "        ");
    put(156, type);
    put(257, "ustar\0" + "00");
    const sum = h.reduce((a, b) => a + b, 0);
    put(148, sum.toString(8).padStart(6, "0") + "\0 ");
    return h;
  };
  const rec = (k, v) => {
    const body = ` ${k}=${v}\n`;
    let n = enc.encode(body).length;
    n += String(n).length;
    if (String(n).length + enc.encode(body).length !== n) n++;
    return `${n}${body}`;
  };
  const entry = (name, type, data) => {
    const d = typeof data === "string" ? enc.encode(data) : data;
    const b = block(d.length);
    b.set(d);
    return [header(name, d.length, type), b];
  };
  const longName = "dir/" + "x".repeat(150) + "/f.txt";
  const parts = [
    ...entry("pax_global_header", "g", rec("comment", "hello")),
    ...entry("PaxHeaders/f.txt", "x", rec("path", longName) + rec("uid", "2000000000")),
    ...entry("f.txt", "0", "pax\n"),
    ...entry("././@LongLink", "L", "gnu/" + "y".repeat(120) + "\0"),
    ...entry("gnu/yyy", "0", "gnu\n"),
    ...entry("plain.txt", "0", "plain\n"),
    new Uint8Array(1024),
  ];
  const all = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  parts.reduce((at, p) => (all.set(p, at), at + p.length), 0);
  const got = tarEntries(all).map((e) => [e.name, e.type, new TextDecoder().decode(e.data)]);
  assert.deepEqual(got, [
    [longName, "0", "pax\n"],
    ["gnu/" + "y".repeat(120), "0", "gnu\n"],
    ["plain.txt", "0", "plain\n"],
  ]);
}

const [url, token, agent] = process.argv.slice(2);
const c = new Client(url, token);
assert.equal((await c.health()).ok, true);

// The sandbox lifecycle, as an agent token: it creates for its own agent
// whatever agentId says, sees only its own, and the rest as for the tool
// token (conflict, bad input, filters, pause, resume, extend, delete).
{
  const rejects = async (p, status) => {
    await assert.rejects(p, (e) => e instanceof SandboxctlError && e.status === status);
  };
  const sb = await c.createSandbox({ agentId: "someone-else", labels: { client: "ts" }, ttlSeconds: 600 });
  assert.equal(sb.agentId, agent);
  assert.equal(sb.template, "default");
  assert.deepEqual(sb.labels, { client: "ts" });
  assert.ok(sb.id && sb.expiresAt, JSON.stringify(sb));
  await rejects(c.createSandbox({}), 409);
  await rejects(c.createSandbox({ agentId: agent, template: "nope" }), 400);
  await rejects(c.createSandbox({ agentId: agent, labels: { "bad key": "x" } }), 400);
  const listed = await c.sandboxes({ labels: { client: "ts" }, state: "running" });
  assert.deepEqual(listed.map((s) => s.id), [sb.id]);
  assert.deepEqual(await c.sandboxes({ labels: { client: "nobody" } }), []);
  assert.equal((await c.sandbox(sb.id.slice(0, 12))).id, sb.id);
  assert.equal((await c.pauseSandbox(sb.id)).state, "paused");
  await rejects(c.exec({ command: "echo ran", agentId: agent }), 409);
  assert.equal((await c.resumeSandbox(sb.id)).state, "running");
  const ext = await c.extendSandbox(sb.id, 7200);
  assert.ok(Date.parse(ext.expiresAt) > Date.parse(sb.expiresAt) + 3600e3, JSON.stringify(ext));
  // Snapshots: a rollback puts back a changed file (the container is made
  // anew: a new id); an agent token forks into its own agent only.
  await c.exec({ command: "echo before > /workspace/snap.txt", agentId: agent });
  assert.equal((await c.snapshotSandbox(sb.id, { name: "ts1" })).name, "ts1");
  await c.exec({ command: "echo after > /workspace/snap.txt", agentId: agent });
  assert.deepEqual((await c.snapshots(sb.id)).map((s) => s.name), ["ts1"]);
  const rolled = await c.rollbackSandbox(sb.id, "ts1");
  assert.equal((await c.exec({ command: "cat /workspace/snap.txt", agentId: agent })).content[0].text.trim(), "before");
  await rejects(c.forkSandbox(rolled.id, { agentId: "someone-else", snapshot: "ts1" }), 403);
  assert.equal((await c.deleteSnapshot(rolled.id, "ts1")).name, "ts1");
  assert.deepEqual(await c.snapshots(rolled.id), []);
  assert.equal((await c.deleteSandbox(rolled.id, { workspace: true })).workspaceRemoved, true);
  await rejects(c.sandbox(rolled.id), 404);
}

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
const tarFiles = tarEntries(tar).filter((e) => e.type === "0");
assert.deepEqual(tarFiles.map((e) => e.name), ["node.txt"]);
assert.equal(new TextDecoder().decode(tarFiles[0].data), "from node\n");
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
