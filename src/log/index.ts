import { pino, type DestinationStream, type Logger, type LevelWithSilent } from 'pino';

export type { Logger } from 'pino';

const { chindingsSym } = pino.symbols;

/** The serialised bindings of a logger (`,"k":v,...`), where pino keeps them. */
type WithChindings = Record<symbol, string | undefined>;

/**
 * pino writes a child's bindings after its parent's, key by key, so a key bound twice (a child
 * naming its own `component` under a parent that has one) appears twice on every line, and strict
 * log pipelines refuse such lines (JSON.parse keeps the last silently). Here the child's value
 * replaces the parent's, in place: the bindings are re-serialised once per child created (at
 * wiring time, and once per request for Fastify's request loggers).
 */
function replaceRebound(child: Logger): void {
  const holder = child as unknown as WithChindings;
  const raw = holder[chindingsSym] ?? '';
  if (raw.length === 0) return;
  // Already serialised by pino (serializers and redaction applied): plain JSON values.
  const merged = JSON.parse(`{${raw.slice(1)}}`) as Record<string, unknown>;
  holder[chindingsSym] = Object.entries(merged)
    .map(([k, v]) => `,${JSON.stringify(k)}:${JSON.stringify(v)}`)
    .join('');
}

/** The keys a logger binds, per logger (computed on its first call with an object). */
const boundKeys = new WeakMap<Logger, ReadonlySet<string>>();

function keysBoundBy(logger: Logger): ReadonlySet<string> {
  let keys = boundKeys.get(logger);
  if (keys === undefined) {
    const raw = (logger as unknown as WithChindings)[chindingsSym] ?? ',';
    keys = new Set(Object.keys(JSON.parse(`{${raw.slice(1)}}`) as object));
    boundKeys.set(logger, keys);
  }
  return keys;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => {
  if (typeof v !== 'object' || v === null) return false;
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
};

/**
 * Root logger of a process. Modules never import a global logger: they receive a child
 * (`logger.child({ component })`) from the entry point that wired them. Whatever they bind or pass,
 * a line holds each key once: a child's binding replaces its parent's (replaceRebound), and a
 * call's object naming a bound key is written through a child that binds the call's value instead
 * (`log.info({ identity }, …)` under a logger bound to another identity). `destination` is for
 * tests (default: stdout).
 */
export function createLogger(
  name: string,
  level: LevelWithSilent = 'info',
  destination?: DestinationStream,
): Logger {
  const options = {
    name,
    level,
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: ['*.authorization', '*.token', '*.password', '*.secretKey'], censor: '[redacted]' },
    onChild: replaceRebound,
    hooks: {
      logMethod(this: Logger, args: Parameters<Logger['info']>, method: Logger['info']): void {
        let [first, ...rest] = args as unknown[];
        // pino writes an Error as `err` (and its message as msg when none is given).
        if (first instanceof Error && keysBoundBy(this).has('err')) {
          rest = rest.length > 0 ? rest : [first.message];
          first = { err: first };
        }
        if (isPlainObject(first)) {
          const bound = keysBoundBy(this);
          const clash = Object.keys(first).filter((k) => bound.has(k));
          if (clash.length > 0) {
            const own: Record<string, unknown> = {};
            const left: Record<string, unknown> = {};
            for (const [k, v] of Object.entries(first)) (clash.includes(k) ? own : left)[k] = v;
            method.apply(this.child(own), [left, ...rest] as Parameters<Logger['info']>);
            return;
          }
        }
        method.apply(this, [first, ...rest] as Parameters<Logger['info']>);
      },
    },
  };
  return destination === undefined ? pino(options) : pino(options, destination);
}
