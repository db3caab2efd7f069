// Client of the sandboxctl daemon's HTTP API over TCP (see api/openapi.yaml).
// Types: index.d.ts.

export class SandboxctlError extends Error {
  constructor(status, message) {
    super(`sandboxctl: HTTP ${status}: ${message}`);
    this.name = "SandboxctlError";
    this.status = status;
    this.apiMessage = message;
  }
}

export class Client {
  /**
   * @param {string} baseUrl e.g. http://127.0.0.1:7766
   * @param {string} token the tool token, or an agent token (pins every call to its agent)
   */
  constructor(baseUrl, token) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.token = token;
  }

  async #request(method, path, { query, body, contentType, signal } = {}) {
    const url = new URL(this.baseUrl + path);
    for (const [k, v] of Object.entries(query ?? {})) {
      if (Array.isArray(v)) for (const x of v) url.searchParams.append(k, String(x));
      else if (v !== undefined && v !== null) url.searchParams.set(k, String(v));
    }
    const headers = {};
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    if (body !== undefined) headers["Content-Type"] = contentType ?? "application/json";
    const resp = await fetch(url, { method, headers, body, signal });
    if (!resp.ok) {
      const text = await resp.text();
      let message = text.trim() || resp.statusText;
      try {
        message = JSON.parse(text).error ?? message;
      } catch {
        // not JSON: keep the text
      }
      throw new SandboxctlError(resp.status, message);
    }
    return resp;
  }

  async #json(method, path, opts = {}) {
    const body = opts.payload === undefined ? undefined : JSON.stringify(opts.payload);
    const resp = await this.#request(method, path, { ...opts, body });
    return resp.json();
  }

  health() {
    return this.#json("GET", "/healthz");
  }

  /** Run a shell command (the exec tool). */
  exec(params) {
    return this.#json("POST", "/v1/tools/exec", { payload: params });
  }

  /** Manage background sessions (the process tool). */
  process(params) {
    return this.#json("POST", "/v1/tools/process", { payload: params });
  }

  /**
   * Run a shell command with "stream": true: an async iterator of NDJSON
   * frames as things happen (start, stdout/stderr with offsets, dropped,
   * status, exit) ending with a "result" frame whose result is exactly
   * what exec(params) answers (or an "error" frame). Bad input rejects
   * with SandboxctlError before any frame. Breaking out of the loop or
   * aborting signal closes the stream; the session goes on.
   */
  async *execStream(params, { signal } = {}) {
    const resp = await this.#request("POST", "/v1/tools/exec", {
      body: JSON.stringify({ ...params, stream: true }),
      signal,
    });
    yield* params.raw ? Client.#rawFrames(resp) : Client.#frames(resp);
  }

  /**
   * Write data (a Uint8Array, exactly, or a string as UTF-8) to the stdin of
   * the background session id, then close it with eof (at most 8 MiB a call).
   */
  async writeStdin(id, data, { eof, agentId, sessionKey } = {}) {
    const body = typeof data === "string" ? new TextEncoder().encode(data) : data;
    const query = { eof: eof ? "1" : undefined, agent: agentId, sessionKey };
    const resp = await this.#request("POST", `/v1/sessions/${encodeURIComponent(id)}/stdin`, {
      query, body, contentType: "application/octet-stream",
    });
    return resp.json();
  }

  // Binary frames of a raw stream (application/vnd.sandboxctl.frames): a
  // kind byte, a big-endian uint32 length and the payload; "o"/"e"
  // payloads are a big-endian int64 offset and the bytes, "j" one JSON frame.
  static async *#rawFrames(resp) {
    let buf = new Uint8Array(0);
    const decoder = new TextDecoder();
    try {
      for await (const chunk of resp.body) {
        const joined = new Uint8Array(buf.length + chunk.length);
        joined.set(buf);
        joined.set(chunk, buf.length);
        buf = joined;
        let at = 0;
        while (buf.length - at >= 5) {
          const view = new DataView(buf.buffer, buf.byteOffset + at);
          const kind = buf[at];
          const n = view.getUint32(1);
          if (buf.length - at - 5 < n) break;
          const payload = buf.subarray(at + 5, at + 5 + n);
          at += 5 + n;
          if (kind === 0x6f || kind === 0x65) {
            const offset = Number(new DataView(payload.buffer, payload.byteOffset).getBigInt64(0));
            yield { type: kind === 0x6f ? "stdout" : "stderr", offset, bytes: payload.slice(8) };
          } else {
            yield JSON.parse(decoder.decode(payload));
          }
        }
        buf = buf.slice(at);
      }
      if (buf.length > 0) throw new SandboxctlError(0, "stream cut inside a frame");
    } finally {
      await resp.body.cancel().catch(() => {});
    }
  }

  /**
   * Follow the background session id from byte offset from (default 0) to
   * its "exit" frame: a "start" frame, then output frames from that offset.
   * opts.agentId / opts.sessionKey name its scope (as for process).
   */
  async *followSession(id, from = 0, { agentId, sessionKey, raw, signal } = {}) {
    const query = { from: from || undefined, agent: agentId, sessionKey, raw: raw ? "1" : undefined };
    const resp = await this.#request("GET", `/v1/sessions/${encodeURIComponent(id)}/stream`, { query, signal });
    yield* raw ? Client.#rawFrames(resp) : Client.#frames(resp);
  }

  /**
   * Tool events as they happen, until signal aborts. Each has a cursor:
   * pass the last one seen as since to resume after it (a "gap" event says
   * how many are no longer kept).
   */
  async *events({ since, signal } = {}) {
    const query = { since: since ?? undefined };
    const resp = await this.#request("GET", "/v1/events", { query, signal });
    yield* Client.#frames(resp);
  }

  // One JSON value a line (NDJSON) of resp's body.
  static async *#frames(resp) {
    const decoder = new TextDecoder();
    let buf = "";
    try {
      for await (const chunk of resp.body) {
        buf += decoder.decode(chunk, { stream: true });
        let nl;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (line) yield JSON.parse(line);
        }
      }
      buf += decoder.decode();
      if (buf.trim()) yield JSON.parse(buf);
    } finally {
      await resp.body.cancel().catch(() => {});
    }
  }

  /** Every agent's sessions (or those of `agentId`), newest first; an agent token sees its own only. */
  sessions({ agentId } = {}) {
    return this.#json("GET", "/v1/sessions", { query: { agent: agentId } });
  }

  /**
   * The sandboxes passing every filter given (docs/sandboxes.md): labels
   * {k: v} (v "": has the label), agentId, template, state.
   */
  sandboxes({ labels, agentId, template, state } = {}) {
    const label = Object.entries(labels ?? {}).map(([k, v]) => (v === "" || v == null ? k : `${k}=${v}`));
    return this.#json("GET", "/v1/sandboxes", { query: { label, agent: agentId, template, state } });
  }

  /** Create the sandbox of a scope (409 when it has one); resolves to the sandbox. */
  createSandbox({ agentId, sessionKey, template, labels, ttlSeconds } = {}) {
    return this.#json("POST", "/v1/sandboxes", { payload: { agentId, sessionKey, template, labels, ttlSeconds } });
  }

  /** One sandbox (by id, unique id prefix or name) with its explanation and resource use. */
  sandbox(id) {
    return this.#json("GET", `/v1/sandboxes/${encodeURIComponent(id)}`);
  }

  /** Remove a sandbox; with workspace its workspace on the host too. */
  deleteSandbox(id, { workspace = false } = {}) {
    return this.#json("DELETE", `/v1/sandboxes/${encodeURIComponent(id)}`, { query: { workspace } });
  }

  pauseSandbox(id) {
    return this.#json("POST", `/v1/sandboxes/${encodeURIComponent(id)}/pause`, { payload: {} });
  }

  resumeSandbox(id) {
    return this.#json("POST", `/v1/sandboxes/${encodeURIComponent(id)}/resume`, { payload: {} });
  }

  /** Set the sandbox to expire ttlSeconds from now. */
  extendSandbox(id, ttlSeconds) {
    return this.#json("POST", `/v1/sandboxes/${encodeURIComponent(id)}/timeout`, { payload: { ttlSeconds } });
  }

  /** Copy the sandbox's files into a snapshot (the container frozen for the copy); resolves to it. */
  snapshotSandbox(id, { name } = {}) {
    return this.#json("POST", `/v1/sandboxes/${encodeURIComponent(id)}/snapshots`, { payload: name ? { name } : {} });
  }

  /** The snapshots of the sandbox's scope, oldest first. */
  snapshots(id) {
    return this.#json("GET", `/v1/sandboxes/${encodeURIComponent(id)}/snapshots`);
  }

  deleteSnapshot(id, name) {
    return this.#json("DELETE", `/v1/sandboxes/${encodeURIComponent(id)}/snapshots/${encodeURIComponent(name)}`);
  }

  /** Put the sandbox back to one of its snapshots (running commands end); resolves to the sandbox. */
  rollbackSandbox(id, snapshot) {
    return this.#json("POST", `/v1/sandboxes/${encodeURIComponent(id)}/rollback`, { payload: { snapshot } });
  }

  /** A new sandbox for another scope from a snapshot (none: one taken for the fork); resolves to it. */
  forkSandbox(id, { agentId, sessionKey, snapshot } = {}) {
    return this.#json("POST", `/v1/sandboxes/${encodeURIComponent(id)}/fork`, { payload: { agentId, sessionKey, snapshot } });
  }

  approvals() {
    return this.#json("GET", "/v1/approvals");
  }

  static #fq(ref, extra = {}) {
    return { agent: ref.agentId, session: ref.sessionKey, path: ref.path, ...extra };
  }

  stat(ref) {
    return this.#json("GET", "/v1/files/stat", { query: Client.#fq(ref) });
  }

  listFiles(ref) {
    return this.#json("GET", "/v1/files/list", { query: Client.#fq(ref) });
  }

  /** The bytes of a regular file. */
  async readFile(ref) {
    const resp = await this.#request("GET", "/v1/files", { query: Client.#fq(ref, { format: "raw" }) });
    return new Uint8Array(await resp.arrayBuffer());
  }

  /** A file or tree as tar bytes, named from its base name (as docker cp). */
  async downloadTar(ref) {
    const resp = await this.#request("GET", "/v1/files", { query: Client.#fq(ref, { format: "tar" }) });
    return new Uint8Array(await resp.arrayBuffer());
  }

  /** Create or replace a file (its directory must exist). */
  async writeFile(ref, data, { mode } = {}) {
    const body = typeof data === "string" ? new TextEncoder().encode(data) : data;
    const query = Client.#fq(ref, { mode: mode === undefined ? undefined : "0" + mode.toString(8) });
    const resp = await this.#request("PUT", "/v1/files", { query, body, contentType: "application/octet-stream" });
    return resp.json();
  }

  /** Extract tar bytes into the existing directory ref.path. */
  async uploadTar(ref, tar) {
    const resp = await this.#request("PUT", "/v1/files", { query: Client.#fq(ref), body: tar, contentType: "application/x-tar" });
    return resp.json();
  }

  /** Remove ref.path recursively. */
  remove(ref) {
    return this.#json("DELETE", "/v1/files", { query: Client.#fq(ref) });
  }
}
