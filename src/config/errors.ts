import { BaseError } from '../errors.ts';

/**
 * One key's value that its parser refuses; the message says why. loadConfig collects them into one
 * ConfigError (every bad key at once), prefixed with the key.
 */
export class ConfigValueError extends BaseError<'INVALID_VALUE'> {
  constructor(message: string) {
    super('INVALID_VALUE', message);
  }
}
