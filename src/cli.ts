#!/usr/bin/env node
/** The `gatehouse` command: run the proxy, check a config file, or make secrets and keys. */
import * as module from "node:module";

// Node 22.1 and later can keep the modules' compiled code on disk ($NODE_COMPILE_CACHE, else the
// temporary folder), so that the next start skips compiling them; older runtimes lack the
// function, and a folder that cannot be written only costs the saving. It must run before the
// modules it caches are loaded, hence the dynamic import.
(module as { enableCompileCache?: () => unknown }).enableCompileCache?.();
const { main } = await import("./cli/main.js");

main(process.argv.slice(2), process.env).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`gatehouse: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
