/**
 * How failed reloads are reported: once per distinct content of the files read, so that a bad
 * file written again and again (an editor saving, a watch firing on every write) is one error
 * line and one count, while each other bad content is reported again. Putting the content in
 * force back is said too, since the error line is the last thing an operator read.
 */
import type { Logger } from "pino";
import type { Metrics } from "../metrics.js";

/** What the store tells about the readings that did not come into force. */
export interface ReloadFailures {
  /** A reading of content `identity` failed: logged and counted unless it is the last failure. */
  failed(identity: string, trigger: string, details: Record<string, unknown>): void;
  /** A reading found the content in force: after a failure, that is a restoration. */
  unchanged(trigger: string): void;
  /** Another content came into force. */
  applied(): void;
}

/** Creates the report of failed reloads, with no failure yet. */
export function createReloadFailures(log: Logger, metrics: Metrics): ReloadFailures {
  let last: string | undefined;
  // Exported from the start at 0: a series that first appears at 1 shows Prometheus no increase,
  // and a bad content is counted once, so the alert on failed reloads would miss it.
  metrics.configReloads.inc({ result: "failure" }, 0);
  return {
    failed(identity, trigger, details) {
      if (identity === last) {
        log.debug(
          { trigger },
          "the files read are those of the last failed reload; not reported again",
        );
        return;
      }
      last = identity;
      metrics.configReloads.inc({ result: "failure" });
      log.error({ trigger, ...details }, "config reload failed; the running config stays in force");
    },
    unchanged(trigger) {
      metrics.configReloads.inc({ result: "unchanged" });
      if (last === undefined) return;
      last = undefined;
      log.info({ trigger }, "config restored");
    },
    applied() {
      last = undefined;
    },
  };
}
