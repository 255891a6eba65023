/** The errors of environments. */
import { PolicyloopError, type PolicyloopErrorOptions } from '../internal/errors.js';

/** Options of {@link EnvironmentLoadError}. */
export interface EnvironmentLoadErrorOptions extends PolicyloopErrorOptions {
  /** What the module exports, by name, with each value's kind (`{ default: 'an object' }`), when it was imported. */
  found?: Readonly<Record<string, string>> | undefined;
}

/**
 * An environment could not be loaded by `loadEnvironment` (and `policyloop eval`): the file or
 * package was not found, its module threw while importing, a TypeScript file needs tsx, or the
 * module exports no environment (neither an `Environment` as `default` nor a `loadEnvironment(args)`
 * function that returns one). The message says what was found; `found` holds the module's exports
 * and their kinds when it was imported; `cause` the underlying error.
 * @example
 * try {
 *   await loadEnvironment('@acme/env-math');
 * } catch (error) {
 *   if (error instanceof EnvironmentLoadError) console.error(error.id, error.message);
 * }
 */
export class EnvironmentLoadError extends PolicyloopError {
  /** The id that was loaded (a file path or a package name), as given. */
  readonly id: string;
  /** The module's exports and their kinds, when it was imported (`{ default: 'an object', helper: 'a function' }`). */
  readonly found: Readonly<Record<string, string>> | undefined;

  /**
   * @param id The id given to `loadEnvironment`.
   * @param message What was expected and what was found.
   * @param options The `cause`, and the module's exports when it was imported.
   */
  constructor(id: string, message: string, options: EnvironmentLoadErrorOptions = {}) {
    super(message, options);
    this.id = id;
    this.found = options.found;
  }
}
