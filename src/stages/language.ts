import { negotiateLanguage } from "../language/accept-language.js";
import type { LanguageSettings } from "../language/table.js";
import { canonicaliseTranslation } from "../language/translation.js";
import { errorReply, type Stage } from "../core/context.js";

const VARY = "Accept-Language";

/**
 * Decides the one language flag the upstream receives (never an error) and canonicalises the
 * translation parameter of the query (400 invalid_request when it names an unsupported code).
 */
export function createLanguageStage(languages: LanguageSettings): Stage {
  const { table, translation } = languages;
  return function language(ctx) {
    // Only supported tags from the config reach ctx.language: no client byte becomes a header.
    ctx.language = negotiateLanguage(ctx.req.headers["accept-language"], table);
    const vary = ctx.responseHeaders.vary;
    ctx.responseHeaders.vary = vary === undefined ? VARY : `${vary}, ${VARY}`;
    const decision = canonicaliseTranslation(ctx.query, translation);
    if (decision.kind === "refused") return errorReply(400, "invalid_request", decision.message);
    if (decision.kind === "canonical") ctx.query = decision.query;
    return undefined;
  };
}
