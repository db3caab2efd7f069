// Types of @sandboxctl/client (see api/openapi.yaml).

/** A sandbox as the lifecycle API answers it (docs/sandboxes.md). */
export interface Sandbox {
  id: string;
  name: string;
  scopeKey: string;
  agentId?: string;
  sessionKey?: string;
  state: string;
  image: string;
  template: string;
  labels: Record<string, string>;
  createdAt: string;
  lastUsedAt?: string;
  expiresAt?: string;
  configHash: string;
  current: boolean;
  engine: string;
  path: "supervisor" | "plain";
  pool?: "ready" | "taken";
}

export type Host = "sandbox" | "gateway" | "node";
export type Security = "deny" | "allowlist" | "full";
export type Ask = "off" | "on-miss" | "always";
export type ProcessAction =
  | "list" | "poll" | "log" | "write" | "send-keys" | "paste" | "submit" | "kill" | "clear" | "remove" | "resize";

export interface ExecParams {
  command: string;
  workdir?: string;
  env?: Record<string, string>;
  yieldMs?: number;
  background?: boolean;
  timeout?: number;
  pty?: boolean;
  elevated?: boolean;
  host?: Host;
  security?: Security;
  ask?: Ask;
  node?: string;
  agentId?: string;
  sessionKey?: string;
  /** A workdir that cannot be used is an error instead of being replaced. */
  strictWorkdir?: boolean;
  /** Initial terminal size of a PTY run (1..1000). */
  /** Keep the exact bytes: execStream frames carry bytes, and a slow reader holds the command back (needs stream or background). */
  raw?: boolean;
  cols?: number;
  rows?: number;
}

export interface ProcessParams {
  action: ProcessAction;
  sessionId?: string;
  data?: string;
  eof?: boolean;
  keys?: string[];
  hex?: string[];
  literal?: string;
  text?: string;
  bracketed?: boolean;
  offset?: number;
  limit?: number;
  signal?: string;
  timeoutMs?: number;
  cols?: number;
  rows?: number;
  agentId?: string;
  sessionKey?: string;
}

export interface ToolResult {
  content: { type: "text"; text: string }[];
  details: {
    status?: "completed" | "failed" | "running" | "approval-pending" | "denied";
    exitCode?: number | null;
    sessionId?: string;
    host?: Host;
    [key: string]: unknown;
  };
}

export interface ToolEvent {
  /** The event's number in the journal: events({ since: cursor }) resumes after it. */
  cursor?: number;
  type: string;
  text: string;
  sessionId?: string;
  agentId?: string;
  sessionKey?: string;
  time: string;
  details?: Record<string, unknown>;
}

/** One line of a streamed exec or a session stream (NDJSON). */
export type StreamFrame =
  /** Opens a stream: the session's id and pid. */
  | { type: "start"; sessionId: string; pid?: number }
  /** Output (data) from offset, an absolute byte offset in the session's output; a PTY's output is all stdout. */
  | { type: "stdout" | "stderr"; sessionId?: string; offset: number; data: string }
  /** A raw stream's output (raw: true): the command's exact bytes from offset. */
  | { type: "stdout" | "stderr"; offset: number; bytes: Uint8Array }
  /** lost bytes from offset were dropped from the session's kept output before this reader reached them. */
  | { type: "dropped"; sessionId?: string; offset: number; lost: number }
  /** The running session changed: "waiting-for-input" or "running". */
  | { type: "status"; sessionId?: string; status: string }
  /** Closes a session stream: final status with exitCode, or signal and reason. */
  | { type: "exit"; sessionId?: string; status: "completed" | "failed"; exitCode?: number; signal?: string; reason?: string }
  /** Closes a streamed exec: exactly what exec() answers. */
  | { type: "result"; result: ToolResult }
  /** Closes a stream that failed after it began. */
  | { type: "error"; error: string };

export interface FileRef {
  agentId?: string;
  sessionKey?: string;
  /** Absolute path inside the agent's sandbox. */
  path: string;
}

export interface FileInfo {
  name: string;
  path: string;
  type: "file" | "dir" | "symlink" | "other";
  size: number;
  mode: number;
  mtime: string;
  linkTarget?: string;
}

export interface FileList {
  path: string;
  entries: FileInfo[];
  truncated?: boolean;
}

export declare class SandboxctlError extends Error {
  status: number;
  apiMessage: string;
}

/** A snapshot of a sandbox's files (docs/snapshots.md). */
export interface Snapshot {
  name: string;
  scopeKey: string;
  agentId?: string;
  sessionKey?: string;
  createdAt: string;
  origin: string;
  originId: string;
  template: string;
  labels?: Record<string, string>;
  config: unknown;
  bytes: number;
  files: number;
  method: "subvolume" | "reflink" | "copy";
  tmpfs: string[];
  skipped?: number;
}

export declare class Client {
  constructor(baseUrl: string, token: string);
  health(): Promise<{ ok: boolean; pid: number; version: string }>;
  exec(params: ExecParams): Promise<ToolResult>;
  process(params: ProcessParams): Promise<ToolResult>;
  /** exec with "stream": true: frames as they happen, last a "result" frame equal to exec()'s answer. */
  execStream(params: ExecParams, opts?: { signal?: AbortSignal }): AsyncGenerator<StreamFrame>;
  /** Follow a background session from byte offset `from` (default 0) to its "exit" frame. */
  followSession(
    id: string,
    from?: number,
    opts?: { agentId?: string; sessionKey?: string; raw?: boolean; signal?: AbortSignal },
  ): AsyncGenerator<StreamFrame>;
  /** Write bytes exactly to a background session's stdin (at most 8 MiB a call); eof closes it. */
  writeStdin(
    id: string,
    data: Uint8Array | string,
    opts?: { eof?: boolean; agentId?: string; sessionKey?: string },
  ): Promise<ToolResult>;
  events(opts?: { since?: number; signal?: AbortSignal }): AsyncGenerator<ToolEvent>;
  /** Every agent's sessions (or those of agentId), newest first; an agent token sees its own only. */
  sessions(opts?: { agentId?: string }): Promise<{ sessions: Array<{ sessionId: string; agentId: string; sessionKey: string; status: string; command: string; host: string }> }>;
  sandboxes(filter?: { labels?: Record<string, string>; agentId?: string; template?: string; state?: string }): Promise<Sandbox[]>;
  createSandbox(req?: { agentId?: string; sessionKey?: string; template?: string; labels?: Record<string, string>; ttlSeconds?: number }): Promise<Sandbox>;
  sandbox(id: string): Promise<Sandbox & { explain: unknown; usage?: unknown; usageError?: string }>;
  deleteSandbox(id: string, opts?: { workspace?: boolean }): Promise<{ removed: string; name: string; workspaceRemoved: boolean }>;
  pauseSandbox(id: string): Promise<Sandbox>;
  resumeSandbox(id: string): Promise<Sandbox>;
  extendSandbox(id: string, ttlSeconds: number): Promise<Sandbox>;
  snapshotSandbox(id: string, opts?: { name?: string }): Promise<Snapshot>;
  snapshots(id: string): Promise<Snapshot[]>;
  deleteSnapshot(id: string, name: string): Promise<Snapshot>;
  rollbackSandbox(id: string, snapshot: string): Promise<Sandbox>;
  forkSandbox(id: string, opts?: { agentId?: string; sessionKey?: string; snapshot?: string }): Promise<Sandbox>;
  approvals(): Promise<unknown[]>;
  stat(ref: FileRef): Promise<FileInfo>;
  listFiles(ref: FileRef): Promise<FileList>;
  readFile(ref: FileRef): Promise<Uint8Array>;
  downloadTar(ref: FileRef): Promise<Uint8Array>;
  writeFile(ref: FileRef, data: string | Uint8Array, opts?: { mode?: number }): Promise<{ written: string }>;
  uploadTar(ref: FileRef, tar: Uint8Array): Promise<{ written: string }>;
  remove(ref: FileRef): Promise<{ removed: string }>;
}
