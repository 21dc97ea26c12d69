/** Problems found while building a snapshot from a valid file: unset variables, unreadable keys. */

/** Where a problem found while building lies in the file, and what it is. */
export interface BuildProblem {
  readonly path: readonly PropertyKey[];
  readonly message: string;
  /**
   * True when only the deployment can fix it (a variable not set, a file not there here), as
   * opposed to the file itself; `check --no-env` does not report it.
   */
  readonly environment?: boolean;
}
