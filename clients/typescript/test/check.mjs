// Drives @sandboxctl/client against a live daemon (run by TestTypeScriptClient
// from a directory where the package was installed with npm).
// Usage: node check.mjs URL TOKEN AGENT
import assert from "node:assert/strict";
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
await c.process({ action: "kill", sessionId: sid, agentId: agent });
await Promise.race([following, new Promise((_, rej) => setTimeout(() => rej(new Error("no exit event")), 30000))]);
abort.abort();
assert.ok(exits.some((ev) => ev.sessionId === sid), JSON.stringify(exits));
await assert.rejects(c.exec({ command: "true", host: "elsewhere" }), (e) => e instanceof SandboxctlError && e.status === 400);

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
console.log("ok");
