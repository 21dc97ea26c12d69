/**
 * The addresses a reload cannot apply: the public and admin listeners are bound once, at start.
 * A reload that asks for another one applies the rest of the change and keeps the address in
 * force in its snapshot, so that what `/config` shows is what serves.
 */
import type { Logger } from "pino";
import type { Snapshot } from "./snapshot.js";

/** `next` with the listening addresses of `inForce`, each difference logged at warn. */
export function keepBoundAddresses(next: Snapshot, inForce: Snapshot, log: Logger): Snapshot {
  const asked = (["listen", "admin_listen"] as const).filter(
    (key) => next.file[key] !== inForce.file[key],
  );
  if (asked.length === 0) return next;
  for (const key of asked) {
    log.warn(
      { key, inForce: inForce.file[key], asked: next.file[key] },
      `${key} stays ${inForce.file[key]} until a restart (the file asks for ${next.file[key]}); the rest of the change is applied`,
    );
  }
  return Object.freeze({
    ...next,
    file: Object.freeze({
      ...next.file,
      listen: inForce.file.listen,
      admin_listen: inForce.file.admin_listen,
    }),
    listen: inForce.listen,
    adminListen: inForce.adminListen,
  });
}
