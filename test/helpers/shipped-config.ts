/** A shipped configuration (the example, a deployment's) made to run on this machine in a test. */
import { parseDocument, type YAMLMap, type YAMLSeq } from "yaml";

/** This machine's addresses and files, in place of those a shipped configuration names. */
export interface LocalAddresses {
  /** The test's upstream, as upstream.url. */
  readonly upstream: string;
  /** The test's Redis, as limits.redis.url; left as the file has it when not given. */
  readonly redis?: string;
  /** tokens.signing.key_file. */
  readonly keyFile: string;
}

/**
 * `text` with the addresses of this machine: listeners on port 0, the test's upstream and Redis,
 * and the key file at `keyFile`; everything else as the file has it, comments included.
 */
export function localConfig(text: string, local: LocalAddresses): string {
  const doc = parseDocument(text);
  doc.setIn(["listen"], "127.0.0.1:0");
  doc.setIn(["admin_listen"], "127.0.0.1:0");
  doc.setIn(["upstream", "url"], local.upstream);
  if (local.redis !== undefined) doc.setIn(["limits", "redis", "url"], local.redis);
  doc.setIn(["tokens", "signing", "key_file"], local.keyFile);
  return doc.toString();
}

/** A client of the example and the demo secret its comment gives (`# demo secret: SECRET;`). */
export interface DemoClient {
  readonly id: string;
  readonly secret: string;
  /** The entry's secret_hash. */
  readonly secretHash: string;
}

/** The example's clients, each with the demo secret written in a comment of its entry. */
export function demoClients(text: string): DemoClient[] {
  const doc = parseDocument(text);
  const clients = doc.get("clients") as YAMLSeq<YAMLMap>;
  return clients.items.map((entry) => {
    const [start, , end] = entry.range ?? [0, 0, 0];
    const secret = /demo secret: (\S+);/.exec(text.slice(start, end))?.[1];
    if (secret === undefined) throw new Error(`no demo secret in ${text.slice(start, end)}`);
    return {
      id: String(entry.get("id")),
      secret,
      secretHash: String(entry.get("secret_hash")),
    };
  });
}
