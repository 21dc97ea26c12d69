/** Binds a server to its address, failing with an error that says which setting to change. */
import type { Server } from "node:http";

/** Where a listener binds, and the config key (`listen`, `admin_listen`) that chose it. */
export interface ListenAt {
  readonly host: string;
  readonly port: number;
  readonly key: string;
  /** The config file, as given on the command line, where the key is changed. */
  readonly file: string;
}

/** A listener that could not bind: one line naming the key that chose its address. */
export class ListenError extends Error {
  /** The bind's errno code, such as EADDRINUSE. */
  readonly code: string | undefined;

  constructor(at: ListenAt, cause: NodeJS.ErrnoException) {
    super(refusal(at, cause), { cause });
    this.name = "ListenError";
    this.code = cause.code;
  }
}

// What went wrong, and the change that puts it right, in one line.
function refusal(at: ListenAt, cause: NodeJS.ErrnoException): string {
  const address = at.host.includes(":") ? `[${at.host}]:${at.port}` : `${at.host}:${at.port}`;
  const change = `set ${at.key} in ${at.file}`;
  switch (cause.code) {
    case "EADDRINUSE":
      return `${address} (${at.key}) is already in use by another process: stop it, or ${change} to a free port`;
    case "EACCES":
      return `${address} (${at.key}) needs privileges this process lacks: ${change} to a port above 1023`;
    case "EADDRNOTAVAIL":
      return `${address} (${at.key}) is not an address of this machine: ${change} to one of its addresses, or 0.0.0.0`;
    default:
      return `cannot listen on ${address} (${at.key}): ${cause.message}; ${change}`;
  }
}

/** Resolves once `server` listens at `at`; rejects with a ListenError. */
export function listenOn(server: Server, at: ListenAt): Promise<void> {
  return new Promise((done, fail) => {
    const refused = (error: NodeJS.ErrnoException) => fail(new ListenError(at, error));
    server.once("error", refused);
    server.listen(at.port, at.host, () => {
      server.off("error", refused);
      done();
    });
  });
}
