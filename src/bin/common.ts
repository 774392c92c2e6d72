import { ConfigError } from '../config/index.ts';

/** Loads configuration or exits 2 with the whole list of problems on stderr (no stack trace). */
export function fatalConfig<T>(load: () => T): T {
  try {
    return load();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(2);
    }
    throw err;
  }
}
