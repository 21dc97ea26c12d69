/** What the process holds in memory, measured after full collections. */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

setFlagsFromString("--expose-gc");
const collect = runInNewContext("gc") as () => void;

/** Heap and array buffers in use, right after a full collection. */
export async function liveMemory(): Promise<number> {
  for (let i = 0; i < 2; i++) {
    collect();
    // Array buffers are freed after the collection, off the main thread.
    await new Promise((done) => setTimeout(done, 20));
  }
  collect();
  const { heapUsed, arrayBuffers } = process.memoryUsage();
  return heapUsed + arrayBuffers;
}
