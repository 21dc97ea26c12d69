/** Problems found while building a snapshot from a valid file: unset variables, unreadable keys. */

/** Where a problem found while building lies in the file, and what it is. */
export interface BuildProblem {
  readonly path: readonly PropertyKey[];
  readonly message: string;
}
