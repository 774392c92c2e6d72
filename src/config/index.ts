import { BaseError } from '../errors.ts';
import { schema, type Component, type Config, type Key, type Setting } from './schema.ts';

export type { Component, Config, Key } from './schema.ts';
export { schema } from './schema.ts';

/** Raised once with every bad key, so an operator fixes the whole environment in one pass. */
export class ConfigError extends BaseError<'INVALID_CONFIG'> {
  readonly problems: readonly string[];
  constructor(problems: string[]) {
    super('INVALID_CONFIG', `invalid configuration:\n  ${problems.join('\n  ')}`);
    this.problems = problems;
  }
}

/**
 * Parses the environment once for one component. Unknown variables are ignored (the environment is
 * shared with everything else); every declared key is validated, not only the required ones.
 */
export function loadConfig(component: Component, env: NodeJS.ProcessEnv = process.env): Config {
  const out: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [key, setting] of Object.entries(schema) as [Key, Setting<unknown>][]) {
    const raw = env[key] ?? setting.default;
    if (raw === undefined) {
      if (setting.requiredBy?.includes(component)) problems.push(`${key}: required (${setting.description})`);
      continue;
    }
    try {
      out[key] = setting.parse(raw);
    } catch (err) {
      const why = (err as Error).message;
      // A secret's value never reaches a message. Replacing it inside the text would mangle the
      // message when the value is empty or a common word ("<redacted>must not be empty"), so a
      // message that holds it is withheld whole.
      const leaks = setting.secret === true && raw.trim() !== '' && why.includes(raw);
      problems.push(`${key}: ${leaks ? 'is not valid (the message would show the secret value)' : why}`);
    }
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze(out) as Config;
}

/** Markdown table of the schema, used by the README and docs/configuration.md. */
export function configTable(): string {
  const rows = (Object.entries(schema) as [Key, Setting<unknown>][]).map(([key, s]) => {
    const req = s.requiredBy?.length ? `required by ${s.requiredBy.join(', ')}` : '';
    const def = s.default !== undefined ? `\`${s.default}\`` : '';
    return `| \`${key}\` | ${def} | ${req} | ${s.description} |`;
  });
  return ['| Variable | Default | Required | Description |', '|---|---|---|---|', ...rows].join('\n');
}
