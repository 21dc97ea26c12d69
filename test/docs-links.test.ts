/**
 * The manual's links hold: every relative link in README.md and docs/*.md names a file that exists
 * and, with a `#fragment`, a heading of that file, by GitHub's anchors (lower case, spaces to `-`,
 * punctuation removed).
 */
import { existsSync, statSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import t from "tap";
import { anchors, manualFiles, readManual, slug } from "./helpers/docs.js";

/** The targets of the inline links and images of `markdown`, outside code blocks and code spans. */
function linkTargets(markdown: string): string[] {
  const prose = markdown
    .replace(/^ {0,3}(`{3,}|~{3,})[^\n]*\n[\s\S]*?^ {0,3}\1[^\n]*$/gm, "")
    .replace(/`[^`\n]*`/g, "");
  return [...prose.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map(
    (m) => m[1] as string,
  );
}

const external = /^[a-z][a-z0-9+.-]*:/i;

t.test("GitHub's anchors", async (t) => {
  t.equal(slug("Limits and their headers"), "limits-and-their-headers");
  t.equal(slug("Passwords, ACL users and TLS"), "passwords-acl-users-and-tls");
  t.equal(slug("Kubernetes and docker-compose"), "kubernetes-and-docker-compose");
  t.equal(slug("`redis` before and after (2026-11-25)"), "redis-before-and-after-2026-11-25");
  t.strictSame([...anchors("# A\n\n```sh\n# not a heading\n```\n\n## A\n")], ["a", "a-1"]);
});

t.test("the link reader finds links and skips code", async (t) => {
  t.strictSame(linkTargets("[a](x.md#y) `[b](no.md)`\n\n```\n[c](no.md)\n```\n![d](img.png)"), [
    "x.md#y",
    "img.png",
  ]);
});

for (const file of manualFiles()) {
  t.test(`${file}: every relative link has its file and heading`, async (t) => {
    const targets = linkTargets(readManual(file)).filter((target) => !external.test(target));
    if (file === "README.md") t.ok(targets.length >= 10, "README links the chapters");
    for (const target of targets) {
      const [path = "", fragment] = target.split("#", 2);
      const resolved = path === "" ? file : normalize(join(dirname(file), decodeURI(path)));
      t.ok(existsSync(resolved), `${file}: ${target}: ${resolved} exists`);
      if (fragment === undefined || !existsSync(resolved) || !statSync(resolved).isFile()) continue;
      t.ok(
        anchors(readManual(resolved)).has(decodeURIComponent(fragment)),
        `${file}: ${target}: ${resolved} has the heading #${fragment}`,
      );
    }
  });
}

t.test("every chapter is linked from README.md", async (t) => {
  const linked = new Set(
    linkTargets(readManual("README.md")).map((target) => normalize(target.split("#")[0] ?? "")),
  );
  for (const file of manualFiles().filter((path) => path !== "README.md")) {
    t.ok(linked.has(file), `README.md links ${file}`);
  }
});
