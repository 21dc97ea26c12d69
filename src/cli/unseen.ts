/** Reading a credential on a terminal, unseen. */

/**
 * Asks for a credential with `prompt` on stderr and reads it without echoing it, as passwd
 * does: stdout keeps only the command's own output, and the terminal's scrollback never holds it.
 */
export async function readUnseen(prompt: string): Promise<string> {
  const { read } = await import("read");
  return read({ prompt, silent: true, replace: "", output: process.stderr });
}
