// Drives sandboxctl's MCP server with the official TypeScript SDK and
// prints one JSON object with what it saw (TestMCPTypeScriptClient checks it).
// Usage: node client.mjs stdio BINARY ARGS...   |   node client.mjs http URL TOKEN
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, ...rest] = process.argv.slice(2);
let transport;
if (mode === "stdio") {
  transport = new StdioClientTransport({ command: rest[0], args: rest.slice(1), env: process.env, stderr: "inherit" });
} else if (mode === "http") {
  transport = new StreamableHTTPClientTransport(new URL(rest[0]), {
    requestInit: { headers: { Authorization: `Bearer ${rest[1]}` } },
  });
} else {
  throw new Error(`unknown mode ${mode}`);
}
const client = new Client({ name: "sandboxctl-ts-test", version: "1.0.0" });
await client.connect(transport);
const out = { server: client.getServerVersion(), tools: {}, calls: {} };
for (const t of (await client.listTools()).tools) {
  out.tools[t.name] = t.inputSchema;
}
const call = async (name, args) => {
  const r = await client.callTool({ name, arguments: args });
  return { isError: !!r.isError, text: r.content.map((c) => c.text).join(""), structured: r.structuredContent ?? null };
};
const file = process.env.MCP_TEST_FILE;
out.calls.exec = await call("exec", { command: "echo from-ts; exit 3", yieldMs: 20000 });
out.calls.badHost = await call("exec", { command: "true", host: "elsewhere" }).catch((e) => ({ isError: true, text: String(e) }));
if (file) {
  out.calls.write = await call("write_file", { path: file, content: "written by ts\n" });
  out.calls.read = await call("read_file", { path: file });
  out.calls.list = await call("list_files", { path: file.replace(/\/[^/]*$/, "") || "/" });
  out.calls.readMissing = await call("read_file", { path: file + ".missing" });
}
await client.close();
process.stdout.write(JSON.stringify(out));
