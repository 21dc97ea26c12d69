/** A shipped configuration (the example, a deployment's) made to run on this machine in a test. */
import { parseDocument } from "yaml";

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
