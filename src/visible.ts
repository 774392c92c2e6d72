/**
 * Text as a reader may see it: every Unicode format character (category Cf: bidi overrides and
 * isolates, zero-width characters, the soft hyphen, the BOM, tag characters) written as
 * `[U+XXXX]`. A format character is invisible or reorders what follows (`user:\u202Eecila` reads
 * as `user:alice`), so a name holding one must never be shown raw. Admission refuses them in a
 * Run (crds/); this is for what was stored before, or comes from elsewhere (a bundle, a CLI
 * argument). Pure: the UI's templates and the CLI's output lines pass every value through it.
 */
export function visibleText(text: string): string {
  return text.replace(
    /\p{Cf}/gu,
    (c) => `[U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}]`,
  );
}
